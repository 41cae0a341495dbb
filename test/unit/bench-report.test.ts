import { describe, expect, it } from 'vitest';
import type { RelayBenchResult } from '../../bench/relay.bench';
import { latencyGoals } from '../../bench/support/latency-model';
import { buildReport, formatJsonLine, type Measurements, toMarkdown } from '../../bench/support/report';

/** The fields issue 12 names for the line of `npm run bench -- --json`. */
const issueFields = [
  'relayEventsPerSec',
  'bestCeilingEventsPerSec',
  'bestCeilingCell',
  'naiveEventsPerSec',
  'peerEventsPerSec',
  'relayRoundTripsPer1000',
  'peerRoundTripsPer1000',
  'approveRoundTrips',
  'inboxEventsPerSec',
  'powertoolsEventsPerSec',
  'e2e',
  'e2eNoNudgeP99Ms',
  'latencyModel',
  'coldStartMs',
];

/** What the report does not carry of a model run. */
const noDetail = { coldStarts: {}, eventLoopDelayMs: { p50: 10, p99: 20 } };

const latencies = (base: number) => Array.from({ length: 100 }, (_, i) => base + i * 10);

const relay: RelayBenchResult = {
  events: 20_000,
  rounds: 3,
  relayEventsPerSec: 21_000,
  relayRoundTripsPer1000: 2.9,
  relayPutEventsPer1000: 100,
  rssGrowthMb: 20,
  ceiling: { '100x1': 10_000, '1000x2': 25_000 },
  bestCeilingEventsPerSec: 25_000,
  bestCeilingCell: { batch: 1_000, connections: 2 },
  naiveEventsPerSec: 900,
  peerEventsPerSec: 700,
  peerRoundTripsPer1000: 4_100,
  peerPutEventsPer1000: 1_000,
  peerConfig: { batchSize: 100, pollingIntervalMs: 10, handlerConnections: 20 },
  awsRelayEventsPerSec: 2_700,
  awsRelayRoundTripsPer1000: 2.9,
  settings: { claimBatchSize: 1_000, roundsInFlight: 4, publishConcurrency: 10 },
  byRound: {},
};

const measurements = (overrides: Partial<Measurements> = {}): Measurements => ({
  relay,
  changeRoundTrips: { approveRoundTrips: 1, withdrawRoundTrips: 1 },
  inbox: {
    events: 5_000,
    inboxEventsPerSec: 200,
    powertoolsEventsPerSec: 150,
    writesPerFirstDelivery: 2,
    callsPerDuplicate: 1,
    concurrency: 8,
    rounds: 3,
    inbox: {
      callsPerFirstDelivery: 2,
      writesPerFirstDelivery: 2,
      callsPerDuplicate: 1,
      writesPerDuplicate: 0,
      eventsPerSecByRound: [200],
      errors: 0,
    },
    powertools: {
      callsPerFirstDelivery: 2,
      writesPerFirstDelivery: 2,
      callsPerDuplicate: 1,
      writesPerDuplicate: 0,
      eventsPerSecByRound: [150],
      errors: 0,
    },
  },
  e2e: {
    '20': latencies(20),
    '50': latencies(30),
    '100': latencies(40),
    noNudge20: latencies(1_000),
    model20: latencies(300),
    model100: latencies(400),
  },
  model: {
    '20': { approveP50Ms: 300, approveP99Ms: 500, effectsP50Ms: 600, effectsP99Ms: 1_100, ...noDetail },
    '100': { approveP50Ms: 320, approveP99Ms: 550, effectsP50Ms: 650, effectsP99Ms: 1_400, ...noDetail },
  },
  coldStart: {
    coldStartMs: { 'outbox-relay': 500 },
    initMs: { 'outbox-relay': 380 },
    bundleKiB: {},
    sdkClients: {},
    rounds: 3,
    measuredAt: '2026-12-01T12:00:00Z',
    machine: { node: '20.20.2', cores: 2 },
  },
  quick: false,
  sweepSeconds: 60,
  peerPackage: 'pg-transactional-outbox 0.5.7',
  measuredAt: new Date('2026-12-01T12:00:00Z'),
  ...overrides,
});

describe('the bench report formatter', () => {
  it('puts every figure the issue names into the JSON line, nested as named', () => {
    const line = formatJsonLine(buildReport(measurements()));

    expect(line).not.toContain('\n');
    const parsed = JSON.parse(line) as Record<string, unknown>;
    for (const field of issueFields) expect(parsed, field).toHaveProperty(field);
    expect(Object.keys(parsed.e2e as object).sort()).toEqual(['100', '20', '50']);
    for (const rate of ['20', '50', '100'])
      expect(Object.keys((parsed.e2e as Record<string, object>)[rate] as object).sort()).toEqual([
        'p50Ms',
        'p95Ms',
        'p99Ms',
      ]);
    expect(parsed.latencyModel).toEqual({
      relayEventsPerSec: 2_700,
      '20': { approveP50Ms: 300, approveP99Ms: 500, effectsP50Ms: 600, effectsP99Ms: 1_100 },
      '100': { approveP50Ms: 320, approveP99Ms: 550, effectsP50Ms: 650, effectsP99Ms: 1_400 },
    });
    expect(Object.keys(parsed.latencyModelSources as object)).toContain('dataApiCall');
    expect(parsed.coldStartMs).toEqual({ 'outbox-relay': 500 });
    expect(parsed.bestCeilingCell).toEqual({ batch: 1_000, connections: 2 });
    expect(parsed).toMatchObject({ e2eNoNudgeP99Ms: 1_980, peerRoundTripsPer1000: 4_100 });
  });

  it('judges each goal of the issue from the figures', () => {
    const { goals } = buildReport(measurements());

    expect(goals.relayToBestCeiling).toEqual({ value: 0.84, target: '>= 0.8', met: true });
    expect(goals.relayToPeer).toEqual({ value: 30, target: '>= 20', met: true });
    expect(goals.relayRoundTripsPer1000.met).toBe(true);
    expect(goals.rssGrowthMb.met).toBe(true);
    expect(goals.e2e50P99Ms.met).toBe(false);
    const quick = Array.from({ length: 100 }, (_, i) => i * 4);
    expect(
      buildReport(measurements({ e2e: { ...measurements().e2e, '50': quick } })).goals.e2e50P99Ms,
    ).toEqual({
      value: 392,
      target: '< 500',
      met: true,
    });
    expect(buildReport(measurements({ relay: { ...relay, rssGrowthMb: 50 } })).goals.rssGrowthMb.met).toBe(
      false,
    );
  });

  it("judges the latency model's goals: approve p99 at both rates within the model's bound, effects p99 at 100/s under 1.5 s", () => {
    const bound = latencyGoals().approveP99BoundMs;
    const base = measurements().model;
    const at = (approveP99Ms: number, effectsP99Ms: number) =>
      buildReport(
        measurements({
          model: { '20': base['20'], '100': { ...base['100'], approveP99Ms, effectsP99Ms } },
        }),
      ).goals;

    expect(at(bound, 1_499).modelApproveP99Ms).toEqual({ value: bound, target: `<= ${bound}`, met: true });
    expect(at(bound + 1, 1_499).modelApproveP99Ms.met).toBe(false);
    expect(at(bound, 1_499).modelEffectsP99At100Ms.met).toBe(true);
    expect(at(bound, 1_500).modelEffectsP99At100Ms).toEqual({ value: 1_500, target: '< 1500', met: false });
  });

  it('refuses a report with a figure that was not measured or is not a number', () => {
    expect(() => buildReport(measurements({ relay: { ...relay, peerEventsPerSec: null } }))).toThrow(
      /the peer/,
    );
    expect(() => buildReport(measurements({ relay: { ...relay, relayEventsPerSec: Number.NaN } }))).toThrow();
    expect(() => buildReport(measurements({ e2e: { ...measurements().e2e, '50': [] } }))).toThrow();
    const { relayEventsPerSec: _, ...withoutOne } = buildReport(measurements());
    expect(() => formatJsonLine(withoutOne as never)).toThrow(/relayEventsPerSec/);
  });

  it('renders the markdown table with the goals and the ceiling grid', () => {
    const markdown = toMarkdown(buildReport(measurements()));

    expect(markdown).toContain('| 21,000 events/s |');
    expect(markdown).toContain('relay at least 0.8 of it: 0.84, met');
    expect(markdown).toContain('p99 under 500 ms: **not met** |');
    expect(markdown).toContain('| 1,000 |  | 25,000 |  |');
  });
});
