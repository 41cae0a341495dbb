/**
 * What `npm run bench:cold-start` reports: its result's shape, and the Markdown it writes into
 * docs/aws.md with `--docs` (its `generated:cold-start` section; `npm run bench -- --docs`
 * writes it too). Apart from the benchmark so a test can render the committed result
 * (bench/results/cold-start.json) and compare it with the docs without starting anything.
 */

/** Medians by Powertools service name (outbox-relay, tasks-api, ..., consumer-index, ...). */
export interface ColdStartResult {
  /** Init + first invoke. */
  readonly coldStartMs: Readonly<Record<string, number>>;
  readonly initMs: Readonly<Record<string, number>>;
  readonly bundleKiB: Readonly<Record<string, number>>;
  /** The AWS SDK clients each bundle holds (test/rehearsal/bundle-clients.ts). */
  readonly sdkClients: Readonly<Record<string, readonly string[]>>;
  readonly rounds: number;
  readonly measuredAt: string;
  readonly machine: { readonly node: string; readonly cores: number };
}

const n = (v: number | undefined) => (v === undefined ? '—' : v.toLocaleString('en-US'));

/** The table of each function's bundle and cold start, and the line that says how it was measured. */
export function coldStartMarkdown(result: ColdStartResult): string {
  const services = Object.keys(result.coldStartMs).sort();
  return [
    '| function | bundle (minified ESM) | SDK clients inside | cold start: init / with its first event |',
    '|---|---|---|---|',
    ...services.map(
      (s) =>
        `| ${s} | ${n(result.bundleKiB[s])} KiB | ${(result.sdkClients[s] ?? []).join(', ') || 'none'} | ${n(result.initMs[s])} / ${n(result.coldStartMs[s])} ms |`,
    ),
    '',
    `Medians of ${result.rounds} fresh rehearsals, measured ${result.measuredAt} on Node ${result.machine.node}, ${result.machine.cores} cores; the line is kept in \`bench/results/cold-start.json\`.`,
    '',
  ].join('\n');
}
