import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep } from '../../shared/db/retry';
import type { EventPublisher } from '../../shared/outbox/publisher';
import { type RunReport, runRelay } from '../../shared/outbox/relay';
import { topology } from '../../shared/topology';
import { engineEndpoint, type Harness, startHarness } from './harness';
import { scenarioTimeoutMs, sized } from './profile';

const leaseSeconds = 0.3;
/** Every PutEvents round trip outlasts several leases. */
const publishDelayMs = 1_000;
/** New relay invocations (nudges, sweeps) keep arriving, faster than a lease runs out. */
const invocationEveryMs = 200;
const stormMs = sized(3_000, 12_000);
/** What a claim-publish-mark round may take beyond the PutEvents delay on a busy machine. */
const roundOverheadMs = 1_000;
/**
 * A claim's lease can lapse this many times during one round, each time to a new claim: the bound
 * once the first accepted publish settles the row. Without that, claims go on for as long as new
 * invocations keep arriving (the storm), about (storm + publish) / lease of them.
 */
const claimsPerRound = Math.ceil((publishDelayMs + roundOverheadMs) / (leaseSeconds * 1_000)) + 1;

/** The real publisher behind a slow network (or a throttled PutEvents): the call lands late. */
const slow = (publisher: EventPublisher): EventPublisher => ({
  async publish(events) {
    await sleep(publishDelayMs);
    return publisher.publish(events);
  },
});

describe('guarantee: relays racing while their leases expire', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await startHarness({ dynamoEndpoint: engineEndpoint('dynalite').endpoint as string });
  });
  afterAll(() => harness?.stop());

  it(
    'every event is delivered after its first accepted publish, with bounded attempts',
    async () => {
      const tasks = sized(20, 100);
      await harness.approveTasks(tasks);
      // Overlapping invocations, as nudges and sweeps start them: each takes over whatever claim
      // has lapsed, while the relay that made it is still waiting for its PutEvents.
      const runs: Promise<RunReport>[] = [];
      for (let at = 0; at < stormMs; at += invocationEveryMs) {
        const budgetEnd = Date.now() + 3_000;
        runs.push(
          runRelay(
            harness.relayDeps({
              settings: { leaseSeconds, claimBatchSize: 5, roundsInFlight: 2, pollIntervalMs: 50 },
              publisher: slow,
            }),
            { remainingMs: () => budgetEnd - Date.now() },
          ),
        );
        await sleep(invocationEveryMs);
      }
      const reports = await Promise.all(runs);
      const settled = await harness.settle({ runRelays: false });
      const report = await harness.check();

      // The fault happened: claims were taken over from relays whose publish was still in flight,
      // and those rows went to the bus more than once.
      const takeOvers = reports.reduce((n, r) => n + r.expiredLeases, 0);
      expect(takeOvers).toBeGreaterThan(0);
      expect(report.figures.duplicates.publish).toBeGreaterThan(0);
      // Each take-over is one more claim; a row settles at its first accepted publish, so a row is
      // claimed at most once per lease that can lapse during that round, however many relays run.
      expect(report.figures.maxPublishAttempts).toBeLessThanOrEqual(claimsPerRound);
      expect(report.figures.maxPublishAttempts).toBeLessThan(topology.relay.maxUnsettledClaims);
      expect(report.violations).toEqual([]);
      expect(settled.quiet).toBe(true);
    },
    scenarioTimeoutMs,
  );
});
