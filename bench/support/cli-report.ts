/**
 * What `npm run bench:cli` reports, and the Markdown it writes into docs/operations.md with
 * `--docs` (its `generated:cli` section). Apart from the benchmark so a test can render the
 * committed result (bench/results/cli.json) and compare it with the docs.
 */

/** Medians in ms and the ratios to `node -e 0`. */
export interface CliBenchResult {
  readonly rounds: number;
  readonly nodeMs: number;
  readonly helpMs: number;
  readonly statusMs: number;
  readonly helpRatio: number;
  readonly statusRatio: number;
  /** Where it ran, e.g. "Node 20.20.2, 2 cores". */
  readonly machine: string;
}

/** The goals: each command within this many times `node -e 0`. */
export const cliGoals = { help: 2.5, status: 3 } as const;

export function cliMarkdown(r: CliBenchResult): string {
  return [
    `Measured by \`npm run bench:cli\` (medians of ${r.rounds} runs in alternation, ${r.machine}):`,
    '',
    '| command | median | times `node -e 0` | goal |',
    '|---|---|---|---|',
    `| \`node -e 0\` | ${r.nodeMs} ms | 1 | |`,
    `| \`pipeline --help\` | ${r.helpMs} ms | ${r.helpRatio} | ${cliGoals.help} |`,
    `| \`pipeline status\` (local runtime) | ${r.statusMs} ms | ${r.statusRatio} | ${cliGoals.status} |`,
  ].join('\n');
}
