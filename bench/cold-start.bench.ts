/**
 * `npm run bench:cold-start [-- --json] [-- --docs] [-- --rounds R]`: each Lambda bundle's size, SDK clients and cold
 * start, measured by the offline deploy rehearsal (test/rehearsal): a fresh Node process per
 * function imports the bundle the synthesized sandbox template points at (init), then answers
 * its first event of the rehearsal's path against the local stand-ins (first invoke). Cold
 * start = init + first invoke; the median of R rounds (default 3), each a whole new rehearsal.
 * The first invoke includes the stand-ins' own latency (loopback, no network), so on AWS add
 * the real service round trips. It is a benchmark, not a test: nothing asserts.
 *
 * With `--json`, stdout is exactly one line:
 * `{"coldStartMs":{"<function>":..},"initMs":{..},"bundleKiB":{..},"sdkClients":{..},...}`, keyed by
 * Powertools service name (outbox-relay, tasks-api, ops-api, migrate, inbox-gauges,
 * consumer-index, ...). `--docs` writes it to bench/results/cold-start.json and its table into
 * docs/aws.md.
 */
import { availableParallelism } from 'node:os';
import { runRehearsal } from '../test/rehearsal/rehearsal';
import { isMain, numberArg, progress, writeBenchDocs } from './support/cli';
import { type ColdStartResult, coldStartMarkdown } from './support/cold-start-report';
import { median } from './support/stats';

/** Writes the result to bench/results/cold-start.json and its table into docs/aws.md. */
export function writeColdStartDocs(result: ColdStartResult): void {
  writeBenchDocs('cold-start.json', result, 'docs/aws.md', 'cold-start', coldStartMarkdown(result));
}

/** Runs `rounds` fresh rehearsals and reports each function's medians. */
export async function measureColdStart(rounds: number): Promise<ColdStartResult> {
  const samples = new Map<string, { init: number[]; cold: number[]; bytes: number; clients: string[] }>();
  for (let r = 1; r <= rounds; r++) {
    progress(`cold start: rehearsal ${r}/${rounds}`);
    const report = await runRehearsal();
    if (report.steps.some((s) => !s.ok) || report.initErrors.length > 0) {
      throw new Error(`the rehearsal failed: ${JSON.stringify(report.steps.filter((s) => !s.ok))}`);
    }
    const services = new Map(Object.entries(report.serviceNames));
    for (const [logicalId, run] of Object.entries(report.functionsRun)) {
      const service = services.get(logicalId) ?? logicalId;
      const entry = samples.get(service) ?? {
        init: [],
        cold: [],
        bytes: run.bundleBytes,
        clients: run.sdkClients,
      };
      entry.init.push(run.initMs);
      entry.cold.push(run.initMs + (run.firstInvokeMs ?? Number.NaN));
      samples.set(service, entry);
    }
  }
  const rows = [...samples].sort(([a], [b]) => a.localeCompare(b));
  return {
    coldStartMs: Object.fromEntries(rows.map(([s, e]) => [s, Math.round(median(e.cold))])),
    initMs: Object.fromEntries(rows.map(([s, e]) => [s, Math.round(median(e.init))])),
    bundleKiB: Object.fromEntries(rows.map(([s, e]) => [s, Math.round(e.bytes / 1024)])),
    sdkClients: Object.fromEntries(rows.map(([s, e]) => [s, e.clients])),
    rounds,
    measuredAt: new Date().toISOString(),
    machine: { node: process.versions.node, cores: availableParallelism() },
  };
}

if (isMain(import.meta.url)) {
  const args = process.argv.slice(2);
  const rounds = numberArg(args, '--rounds', 3);
  measureColdStart(rounds)
    .then((result) => {
      if (args.includes('--docs')) writeColdStartDocs(result);
      if (args.includes('--json')) {
        process.stdout.write(`${JSON.stringify(result)}\n`);
        return;
      }
      process.stdout.write(coldStartMarkdown(result));
    })
    .catch((err) => {
      console.error(err);
      process.exitCode = 1;
    });
}
