/**
 * `npm run bench:cold-start [-- --json] [-- --rounds R]`: each Lambda bundle's size and cold
 * start, measured by the offline deploy rehearsal (test/rehearsal): a fresh Node process per
 * function imports the bundle the synthesized sandbox template points at (init), then answers
 * its first event of the rehearsal's path against the local stand-ins (first invoke). Cold
 * start = init + first invoke; the median of R rounds (default 3), each a whole new rehearsal.
 * The first invoke includes the stand-ins' own latency (loopback, no network), so on AWS add
 * the real service round trips. It is a benchmark, not a test: nothing asserts.
 *
 * With `--json`, stdout is exactly one line:
 * `{"coldStartMs":{"<function>":..},"initMs":{..},"bundleKiB":{..}}`, keyed by Powertools
 * service name (outbox-relay, tasks-api, ops-api, migrate, inbox-gauges, consumer-index, ...).
 */
import { runRehearsal } from '../test/rehearsal/rehearsal';

const args = process.argv.slice(2);
const json = args.includes('--json');
const roundsAt = args.indexOf('--rounds');
const rounds = roundsAt >= 0 ? Number(args[roundsAt + 1]) : 3;

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

const samples = new Map<string, { init: number[]; cold: number[]; bytes: number }>();
for (let round = 1; round <= rounds; round++) {
  process.stderr.write(`round ${round}/${rounds}\n`);
  const report = await runRehearsal();
  if (report.steps.some((s) => !s.ok) || report.initErrors.length > 0) {
    throw new Error(`the rehearsal failed: ${JSON.stringify(report.steps.filter((s) => !s.ok))}`);
  }
  const services = new Map(
    Object.entries(report.serviceNames).map(([logicalId, service]) => [logicalId, service] as const),
  );
  for (const [logicalId, run] of Object.entries(report.functionsRun)) {
    const service = services.get(logicalId) ?? logicalId;
    const entry = samples.get(service) ?? { init: [], cold: [], bytes: run.bundleBytes };
    entry.init.push(run.initMs);
    entry.cold.push(run.initMs + (run.firstInvokeMs ?? Number.NaN));
    samples.set(service, entry);
  }
}

const rows = [...samples].sort(([a], [b]) => a.localeCompare(b));
const round = (n: number) => Math.round(n);
if (json) {
  process.stdout.write(
    `${JSON.stringify({
      coldStartMs: Object.fromEntries(rows.map(([s, e]) => [s, round(median(e.cold))])),
      initMs: Object.fromEntries(rows.map(([s, e]) => [s, round(median(e.init))])),
      bundleKiB: Object.fromEntries(rows.map(([s, e]) => [s, round(e.bytes / 1024)])),
    })}\n`,
  );
} else {
  process.stdout.write(
    '| function | bundle KiB | init ms | cold start ms (init + first event) |\n|---|---|---|---|\n',
  );
  for (const [service, e] of rows) {
    process.stdout.write(
      `| ${service} | ${round(e.bytes / 1024)} | ${round(median(e.init))} | ${round(median(e.cold))} |\n`,
    );
  }
  process.stdout.write(`\nmedians of ${rounds} rounds, each a fresh rehearsal\n`);
}
