/**
 * `npm run bench [-- --json] [-- --docs] [-- --quick] [-- --only relay,inbox,e2e,cold-start]`: every figure
 * in one run, progress on stderr.
 * - relay: the relay, the DB-only ceiling grid, the naive relay and pg-transactional-outbox on
 *   the same rows, taking turns in rounds, plus the relay under the latency model's Data API and
 *   PutEvents calls (bench/relay.bench.ts);
 * - inbox: the inbox against Powertools idempotency on dynalite (bench/inbox.bench.ts);
 * - e2e: commit -> all consumers processed at 20, 50 and 100 approvals/s with the nudge and at
 *   20/s on the schedule alone; under the latency model at 20 and 100/s, the approve API's
 *   answer and request -> all three effects (bench/e2e.bench.ts);
 * - cold start of each Lambda bundle (bench/cold-start.bench.ts).
 * Writes bench/results/latest.json, latest.md (the table docs/performance.md carries) and
 * e2e-latency.svg; `--quick` (or BENCH_QUICK=1) runs everything small, to try the benchmark
 * itself, and writes quick.* instead. With `--json`, stdout is exactly one line: the report
 * (bench/support/report.ts names its fields). `--only` runs some parts and prints what they
 * measured, writing nothing. `--docs` (a full run only) also writes the table into
 * docs/performance.md and the cold starts into docs/aws.md (bench/results/cold-start.json). The
 * full run takes about twenty minutes on 2 cores.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeSection } from '../infra/docs/doc-section';
import { measureColdStart, writeColdStartDocs } from './cold-start.bench';
import { type ModelFigures, measureE2e, modelFigures } from './e2e.bench';
import { measureInbox } from './inbox.bench';
import { measureRelayBench, relaySettingsFrom } from './relay.bench';
import { e2eLatencyChart } from './support/chart';
import { progress } from './support/cli';
import { tunedPeerConfig } from './support/peer';
import {
  buildReport,
  type E2eSeries,
  formatJsonLine,
  latencyPercentiles,
  type Measurements,
  toMarkdown,
} from './support/report';
import { measureChangeRoundTrips } from './support/round-trips';

const parts = ['relay', 'inbox', 'e2e', 'cold-start'] as const;
type Part = (typeof parts)[number];

/** How much each part does: the full run, and the quick one. */
const workloads = {
  full: {
    events: 20_000,
    // Five rounds: the median shrugs off two drains a busy machine slowed.
    rounds: 5,
    inboxEvents: 5_000,
    inboxRounds: 3,
    approvals: 1_000,
    sweepMs: 60_000,
    coldStartRounds: 3,
  },
  quick: {
    events: 2_000,
    rounds: 1,
    inboxEvents: 500,
    inboxRounds: 1,
    approvals: 100,
    sweepMs: 5_000,
    coldStartRounds: 1,
  },
};

const resultsDir = join(dirname(fileURLToPath(import.meta.url)), 'results');

function peerPackage(): string {
  const manifest = join(
    dirname(fileURLToPath(import.meta.url)),
    '..',
    'node_modules',
    'pg-transactional-outbox',
    'package.json',
  );
  const { name, version } = JSON.parse(readFileSync(manifest, 'utf8')) as { name: string; version: string };
  return `${name} ${version}`;
}

async function main() {
  const args = process.argv.slice(2);
  const json = args.includes('--json');
  const quick = args.includes('--quick') || process.env.BENCH_QUICK === '1';
  const docs = args.includes('--docs');
  const onlyAt = args.indexOf('--only');
  const only = onlyAt >= 0 ? String(args[onlyAt + 1]).split(',') : [...parts];
  for (const p of only)
    if (!parts.includes(p as Part)) throw new Error(`--only takes ${parts.join(', ')}; not ${p}`);
  const wants = (p: Part) => only.includes(p);
  const w = quick ? workloads.quick : workloads.full;
  const started = Date.now();

  const relay = wants('relay')
    ? await measureRelayBench({
        events: w.events,
        rounds: w.rounds,
        batches: [100, 500, 1_000],
        connections: [1, 2, 4],
        settings: relaySettingsFrom([]),
        peer: tunedPeerConfig,
      })
    : undefined;
  const changeRoundTrips = wants('relay') ? await measureChangeRoundTrips() : undefined;
  const inbox = wants('inbox')
    ? await measureInbox({ events: w.inboxEvents, concurrency: 8, rounds: w.inboxRounds })
    : undefined;
  let e2e: Record<E2eSeries, number[]> | undefined;
  let model: Record<'20' | '100', ModelFigures> | undefined;
  if (wants('e2e')) {
    const approvals = w.approvals;
    const local = async (rate: number, nudge = true) =>
      (await measureE2e({ approvals, rate, nudge, sweepMs: w.sweepMs })).commitToProcessedMs;
    const modelled = (rate: number) => measureE2e({ approvals, rate, nudge: true, model: true });
    const [m20, m100] = [await modelled(20), await modelled(100)];
    e2e = {
      '20': await local(20),
      '50': await local(50),
      '100': await local(100),
      noNudge20: await local(20, false),
      model20: m20.requestToEffectsMs,
      model100: m100.requestToEffectsMs,
    };
    model = { '20': modelFigures(m20), '100': modelFigures(m100) };
  }
  const coldStart = wants('cold-start') ? await measureColdStart(w.coldStartRounds) : undefined;
  progress(`done in ${Math.round((Date.now() - started) / 1000)} s`);

  if (!relay || !changeRoundTrips || !inbox || !e2e || !model || !coldStart) {
    // A partial run, for trying one part: what it measured, nothing written.
    const measured = {
      relay,
      changeRoundTrips,
      inbox,
      e2e: e2e && latencyPercentiles(e2e),
      model,
      coldStart,
    };
    console.log(JSON.stringify(measured, null, json ? undefined : 2));
    return;
  }
  const measurements: Measurements = {
    relay,
    changeRoundTrips,
    inbox,
    e2e,
    model,
    coldStart,
    quick,
    sweepSeconds: w.sweepMs / 1000,
    peerPackage: peerPackage(),
    measuredAt: new Date(),
  };
  const report = buildReport(measurements);
  const prefix = quick ? 'quick' : 'latest';
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(
    join(resultsDir, `${prefix}.json`),
    `${JSON.stringify({ ...report, e2ePercentilesMs: latencyPercentiles(e2e) }, null, 2)}\n`,
  );
  const markdown = toMarkdown(report);
  writeFileSync(join(resultsDir, `${prefix}.md`), markdown);
  writeFileSync(
    join(resultsDir, quick ? 'quick-e2e-latency.svg' : 'e2e-latency.svg'),
    e2eLatencyChart(
      `Commit -> all consumers processed, ${e2e['20'].length.toLocaleString('en-US')} approvals per run`,
      [
        { label: '20 approvals/s, nudge', color: '#1b6ac9', sortedMs: e2e['20'] },
        { label: '50 approvals/s, nudge', color: '#2a9d3a', sortedMs: e2e['50'] },
        { label: '100 approvals/s, nudge', color: '#d9822b', sortedMs: e2e['100'] },
        {
          label: `20 approvals/s, schedule only (${w.sweepMs / 1000} s sweep)`,
          color: '#c0392b',
          sortedMs: e2e.noNudge20,
        },
        {
          label: 'latency model, 20 approvals/s: request -> all effects',
          color: '#7d3c98',
          sortedMs: e2e.model20,
          dashed: true,
        },
        {
          label: 'latency model, 100 approvals/s: request -> all effects',
          color: '#555555',
          sortedMs: e2e.model100,
          dashed: true,
        },
      ],
    ),
  );
  progress(`wrote ${join(resultsDir, `${prefix}.{json,md}`)} and the chart`);
  if (docs && !quick) {
    progress(`${writeSection('docs/performance.md', 'bench', markdown)} updated`);
    writeColdStartDocs(coldStart);
  }
  if (json) console.log(formatJsonLine(report));
  else console.log(markdown);
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
