/**
 * The one report `npm run bench` produces: the JSON line (`-- --json`), bench/results/latest.json
 * and the markdown table docs/performance.md carries. Its shape is a zod schema, so a figure that goes
 * missing or comes out NaN fails the run instead of vanishing from the line.
 */

import * as z from 'zod';
import type { ModelFigures } from '../e2e.bench';
import type { InboxBenchResult } from '../inbox.bench';
import type { RelayBenchResult } from '../relay.bench';
import type { ColdStartResult } from './cold-start-report';
import { type Hop, latencyGoals, latencyModel } from './latency-model';
import type { ChangeRoundTrips } from './round-trips';
import { type LatencySummary, percentile, round, summarize } from './stats';

const figure = z.number();
const latency = z.strictObject({ p50Ms: figure, p95Ms: figure, p99Ms: figure });
const goal = z.strictObject({ value: figure, target: z.string(), met: z.boolean() });
const modelRate = z.strictObject({
  approveP50Ms: figure,
  approveP99Ms: figure,
  effectsP50Ms: figure,
  effectsP99Ms: figure,
});

/** The approval rates the end-to-end figures are measured at, with the nudge. */
export const e2eRates = ['20', '50', '100'] as const;

/** The line's fields, by the names issue 12 gives them; the rest of the report follows them. */
export const benchReportSchema = z.strictObject({
  relayEventsPerSec: figure,
  bestCeilingEventsPerSec: figure,
  bestCeilingCell: z.strictObject({ batch: figure, connections: figure }),
  naiveEventsPerSec: figure,
  peerEventsPerSec: figure,
  relayRoundTripsPer1000: figure,
  peerRoundTripsPer1000: figure,
  /** Data API calls on the caller's path of one approve (one statement; four before it). */
  approveRoundTrips: figure,
  withdrawRoundTrips: figure,
  inboxEventsPerSec: figure,
  powertoolsEventsPerSec: figure,
  e2e: z.strictObject({ '20': latency, '50': latency, '100': latency }),
  e2eNoNudgeP99Ms: figure,
  latencyModel: z.strictObject({ relayEventsPerSec: figure, '20': modelRate, '100': modelRate }),
  coldStartMs: z.record(z.string(), figure).refine((m) => Object.keys(m).length > 0, 'no function measured'),

  relayPutEventsPer1000: figure,
  peerPutEventsPer1000: figure,
  rssGrowthMb: figure,
  ceilingEventsPerSec: z.record(z.string(), figure),
  goals: z.strictObject({
    relayToBestCeiling: goal,
    relayToPeer: goal,
    relayRoundTripsPer1000: goal,
    rssGrowthMb: goal,
    e2e50P99Ms: goal,
    modelApproveP99Ms: goal,
    modelEffectsP99At100Ms: goal,
  }),
  relaySettings: z.strictObject({
    claimBatchSize: figure,
    roundsInFlight: figure,
    publishConcurrency: figure,
  }),
  peerConfig: z.strictObject({
    package: z.string(),
    listener: z.string(),
    batchSize: figure,
    pollingIntervalMs: figure,
    handlerConnections: figure,
    rows: z.string(),
    protections: z.string(),
  }),
  latencyModelSources: z.record(z.string(), z.string()),
  workload: z.strictObject({
    events: figure,
    rounds: figure,
    inboxEvents: figure,
    e2eApprovals: figure,
    coldStartRounds: figure,
    sweepSeconds: figure,
    quick: z.boolean(),
  }),
  measuredAt: z.string(),
});

export type BenchReport = z.infer<typeof benchReportSchema>;

/** Everything one `npm run bench` measured, before it is reported. */
export interface Measurements {
  readonly relay: RelayBenchResult;
  /** Data API calls of one approve and one withdraw (bench/support/round-trips.ts). */
  readonly changeRoundTrips: ChangeRoundTrips;
  readonly inbox: InboxBenchResult;
  /** Sorted latencies of each end-to-end run, by series name (see `e2eSeries`). */
  readonly e2e: Readonly<Record<E2eSeries, readonly number[]>>;
  /** The runs under the latency model, at 20 and 100 approvals/s. */
  readonly model: Readonly<Record<'20' | '100', ModelFigures>>;
  readonly coldStart: ColdStartResult;
  readonly quick: boolean;
  /** The sweep period of the schedule-only run. */
  readonly sweepSeconds: number;
  readonly peerPackage: string;
  readonly measuredAt: Date;
}

/**
 * The end-to-end runs: commit -> processed at the nudged rates and at 20/s on the schedule alone;
 * request -> every consumer done under the latency model at 20 and 100/s.
 */
export const e2eSeries = ['20', '50', '100', 'noNudge20', 'model20', 'model100'] as const;
export type E2eSeries = (typeof e2eSeries)[number];

function required<T>(value: T | null, what: string): T {
  if (value === null) throw new Error(`the benchmark did not measure ${what}`);
  return value;
}

/** The report from the measurements; throws when a figure is missing. */
export function buildReport(m: Measurements): BenchReport {
  const r = m.relay;
  const peer = required(r.peerEventsPerSec, 'the peer');
  const ratio = (a: number, b: number) => round(a / b, 2);
  const e2e = Object.fromEntries(e2eRates.map((rate) => [rate, summarize(m.e2e[rate])])) as Record<
    (typeof e2eRates)[number],
    LatencySummary
  >;
  const goals = latencyGoals();
  const report: BenchReport = {
    relayEventsPerSec: r.relayEventsPerSec,
    bestCeilingEventsPerSec: r.bestCeilingEventsPerSec,
    bestCeilingCell: r.bestCeilingCell,
    naiveEventsPerSec: required(r.naiveEventsPerSec, 'the naive relay'),
    peerEventsPerSec: peer,
    relayRoundTripsPer1000: r.relayRoundTripsPer1000,
    peerRoundTripsPer1000: required(r.peerRoundTripsPer1000, "the peer's round trips"),
    approveRoundTrips: m.changeRoundTrips.approveRoundTrips,
    withdrawRoundTrips: m.changeRoundTrips.withdrawRoundTrips,
    inboxEventsPerSec: m.inbox.inboxEventsPerSec,
    powertoolsEventsPerSec: m.inbox.powertoolsEventsPerSec,
    e2e,
    e2eNoNudgeP99Ms: summarize(m.e2e.noNudge20).p99Ms,
    latencyModel: {
      relayEventsPerSec: required(r.awsRelayEventsPerSec, 'the relay under the latency model'),
      '20': modelRateOf(m.model['20']),
      '100': modelRateOf(m.model['100']),
    },
    coldStartMs: { ...m.coldStart.coldStartMs },
    relayPutEventsPer1000: r.relayPutEventsPer1000,
    peerPutEventsPer1000: required(r.peerPutEventsPer1000, "the peer's PutEvents calls"),
    rssGrowthMb: r.rssGrowthMb,
    ceilingEventsPerSec: { ...r.ceiling },
    goals: {
      relayToBestCeiling: goalOf(
        ratio(r.relayEventsPerSec, r.bestCeilingEventsPerSec),
        '>= 0.8',
        (v) => v >= 0.8,
      ),
      relayToPeer: goalOf(ratio(r.relayEventsPerSec, peer), '>= 20', (v) => v >= 20),
      relayRoundTripsPer1000: goalOf(r.relayRoundTripsPer1000, '<= 5', (v) => v <= 5),
      rssGrowthMb: goalOf(r.rssGrowthMb, '< 50', (v) => v < 50),
      e2e50P99Ms: goalOf(e2e['50'].p99Ms, '< 500', (v) => v < 500),
      modelApproveP99Ms: goalOf(
        Math.max(m.model['20'].approveP99Ms, m.model['100'].approveP99Ms),
        `<= ${goals.approveP99BoundMs}`,
        (v) => v <= goals.approveP99BoundMs,
      ),
      modelEffectsP99At100Ms: goalOf(
        m.model['100'].effectsP99Ms,
        `< ${goals.effectsP99At100BoundMs}`,
        (v) => v < goals.effectsP99At100BoundMs,
      ),
    },
    relaySettings: { ...r.settings },
    peerConfig: {
      package: m.peerPackage,
      listener: 'initializePollingMessageListener (polling)',
      batchSize: r.peerConfig.batchSize,
      pollingIntervalMs: r.peerConfig.pollingIntervalMs,
      handlerConnections: r.peerConfig.handlerConnections,
      rows: "its own outbox table (DatabaseSetup), the same rows copied, concurrency 'parallel', no segment",
      protections:
        'enableMaxAttemptsProtection and enablePoisonousMessageProtection off, as its README outbox example',
    },
    latencyModelSources: Object.fromEntries(
      (Object.keys(latencyModel) as Hop[]).map((hop) => [hop, latencyModel[hop].source]),
    ),
    workload: {
      events: r.events,
      rounds: r.rounds,
      inboxEvents: m.inbox.events,
      e2eApprovals: m.e2e['20'].length,
      coldStartRounds: m.coldStart.rounds,
      sweepSeconds: m.sweepSeconds,
      quick: m.quick,
    },
    measuredAt: m.measuredAt.toISOString(),
  };
  return benchReportSchema.parse(report);
}

const modelRateOf = (f: ModelFigures) => ({
  approveP50Ms: f.approveP50Ms,
  approveP99Ms: f.approveP99Ms,
  effectsP50Ms: f.effectsP50Ms,
  effectsP99Ms: f.effectsP99Ms,
});

function goalOf(value: number, target: string, met: (v: number) => boolean) {
  return { value, target, met: met(value) };
}

/** The report as one JSON line, validated: a figure that is missing or NaN throws here. */
export function formatJsonLine(report: BenchReport): string {
  return JSON.stringify(benchReportSchema.parse(report));
}

/** Each series' latency at every percent 1..100, for latest.json and the chart. */
export function latencyPercentiles(
  e2e: Readonly<Record<E2eSeries, readonly number[]>>,
): Record<E2eSeries, number[]> {
  return Object.fromEntries(
    e2eSeries.map((s) => [s, Array.from({ length: 100 }, (_, i) => Math.round(percentile(e2e[s], i + 1)))]),
  ) as Record<E2eSeries, number[]>;
}

const n = (x: number) => Math.round(x).toLocaleString('en-US');
const ms = (x: number) => `${n(x)} ms`;
const check = (g: { met: boolean }) => (g.met ? 'met' : '**not met**');

/** The markdown docs/performance.md carries (and bench/results/latest.md holds). */
export function toMarkdown(report: BenchReport): string {
  const g = report.goals;
  const s = report.relaySettings;
  const w = report.workload;
  const cell = report.bestCeilingCell;
  const lines = [
    `| figure | value | goal |`,
    `|---|---|---|`,
    `| relay: drain of ${n(w.events)} pending rows (defaults: batch ${n(s.claimBatchSize)}, up to ${s.roundsInFlight} rounds in flight, as many as keep the database busy, ${s.publishConcurrency} PutEvents calls per round) | ${n(report.relayEventsPerSec)} events/s | |`,
    `| DB-only ceiling, best cell of batch 100/500/1,000 x 1/2/4 connections | ${n(report.bestCeilingEventsPerSec)} events/s (batch ${n(cell.batch)} x ${cell.connections}) | relay at least 0.8 of it: ${g.relayToBestCeiling.value}, ${check(g.relayToBestCeiling)} |`,
    `| naive relay (select one, publish, update one) | ${n(report.naiveEventsPerSec)} events/s | |`,
    `| peer: ${report.peerConfig.package} polling listener (batch ${report.peerConfig.batchSize}, ${report.peerConfig.pollingIntervalMs} ms polling, ${report.peerConfig.handlerConnections} handler connections) | ${n(report.peerEventsPerSec)} events/s | relay at least 20x: ${g.relayToPeer.value}x, ${check(g.relayToPeer)} |`,
    `| database round trips per 1,000 events | relay ${report.relayRoundTripsPer1000}, peer ${n(report.peerRoundTripsPer1000)} | relay at most 5: ${check(g.relayRoundTripsPer1000)} |`,
    `| Data API calls on the caller's path | approve ${report.approveRoundTrips}, withdraw ${report.withdrawRoundTrips} (one statement each) | |`,
    `| PutEvents calls per 1,000 events | relay ${n(report.relayPutEventsPer1000)}, peer ${n(report.peerPutEventsPer1000)} | |`,
    `| RSS growth over a relay drain | ${report.rssGrowthMb} MB | under 50 MB: ${check(g.rssGrowthMb)} |`,
    `| inbox vs Powertools idempotency, ${n(w.inboxEvents)} deliveries (10% duplicates) on dynalite | ${n(report.inboxEventsPerSec)} vs ${n(report.powertoolsEventsPerSec)} events/s | |`,
    ...(['20', '50', '100'] as const).map((rate) => {
      const e = report.e2e[rate];
      const goal = rate === '50' ? `p99 under 500 ms: ${check(g.e2e50P99Ms)}` : '';
      return `| end to end, commit -> every consumer processed, ${rate} approvals/s with the nudge (p50 / p95 / p99) | ${ms(e.p50Ms)} / ${ms(e.p95Ms)} / ${ms(e.p99Ms)} | ${goal} |`;
    }),
    `| end to end at 20/s, the schedule alone (a ${n(w.sweepSeconds)} s sweep), p99 | ${ms(report.e2eNoNudgeP99Ms)} | |`,
    `| latency model: relay drain (each Data API and PutEvents call delayed) | ${n(report.latencyModel.relayEventsPerSec)} events/s | |`,
    ...(['20', '100'] as const).map((rate) => {
      const f = report.latencyModel[rate];
      return `| latency model over the local runtime (the seams run), ${rate} approvals/s: approve API p50 / p99; request -> every consumer done p50 / p99 | ${ms(f.approveP50Ms)} / ${ms(f.approveP99Ms)}; ${ms(f.effectsP50Ms)} / ${ms(f.effectsP99Ms)} | ${
        rate === '100'
          ? `approve p99 at most ${g.modelApproveP99Ms.target.slice(3)} ms (both rates): ${check(g.modelApproveP99Ms)}; effects p99 under 1,500 ms: ${check(g.modelEffectsP99At100Ms)}`
          : ''
      } |`;
    }),
    '',
    `DB-only ceiling by cell (events/s, claim and mark statements with no publish):`,
    '',
    `| batch \\ connections | 1 | 2 | 4 |`,
    `|---|---|---|---|`,
    ...[100, 500, 1000].map(
      (b) =>
        `| ${n(b)} | ${[1, 2, 4].map((c) => (report.ceilingEventsPerSec[`${b}x${c}`] === undefined ? '' : n(report.ceilingEventsPerSec[`${b}x${c}`] as number))).join(' | ')} |`,
    ),
    '',
    `Cold start, init + first event (median of ${w.coldStartRounds} rehearsals): ${Object.entries(
      report.coldStartMs,
    )
      .map(([f, v]) => `${f} ${ms(v)}`)
      .join(', ')}.`,
    '',
    `Medians of ${w.rounds} rounds in which the implementations take turns; ${n(w.e2eApprovals)} approvals per end-to-end run${w.quick ? ' (quick mode: small workloads, not comparable)' : ''}; measured ${report.measuredAt}.`,
  ];
  return `${lines.join('\n')}\n`;
}
