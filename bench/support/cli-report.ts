/**
 * What `npm run bench:cli` reports, and the Markdown it writes into docs/operations.md with
 * `--docs` (its `generated:cli` section). Apart from the benchmark so a test can render the
 * committed result (bench/results/cli.json) and compare it with the docs.
 */

/**
 * Medians in ms of each command as a user types it, and the ratios to `node -e 0`: `pipeline`
 * found on PATH (the clone's `bin/`), `npx pipeline` from the clone's root.
 */
export interface CliBenchResult {
  readonly rounds: number;
  readonly nodeMs: number;
  /** `pipeline --help`, found on PATH. */
  readonly helpMs: number;
  /** `pipeline status` against a local runtime, found on PATH. */
  readonly statusMs: number;
  /** `npx pipeline status` against the same runtime: npm's own start before the CLI's. */
  readonly npxStatusMs: number;
  readonly helpRatio: number;
  readonly statusRatio: number;
  readonly npxStatusRatio: number;
  /** Where it ran, e.g. "Node 20.20.2, 2 cores". */
  readonly machine: string;
}

/** The goals of `pipeline` on PATH: each command within this many times `node -e 0`. */
export const cliGoals = { help: 2.5, status: 3 } as const;

export function cliMarkdown(r: CliBenchResult): string {
  return [
    `Measured by \`npm run bench:cli\` (medians of ${r.rounds} runs in alternation, ${r.machine}),`,
    'each command started by name as a user types it: `pipeline` found on PATH after',
    '`export PATH="$PWD/bin:$PATH"`, `npx pipeline` from the clone.',
    '',
    '| command | median | times `node -e 0` | goal |',
    '|---|---|---|---|',
    `| \`node -e 0\` | ${r.nodeMs} ms | 1 | |`,
    `| \`pipeline --help\` | ${r.helpMs} ms | ${r.helpRatio} | ${cliGoals.help} |`,
    `| \`pipeline status\` (local runtime) | ${r.statusMs} ms | ${r.statusRatio} | ${cliGoals.status} |`,
    `| \`npx pipeline status\` (local runtime) | ${r.npxStatusMs} ms | ${r.npxStatusRatio} | |`,
  ].join('\n');
}
