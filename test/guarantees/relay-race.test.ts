import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep } from '../../shared/db/retry';
import type { EventPublisher } from '../../shared/outbox/publisher';
import { type RunReport, runRelay } from '../../shared/outbox/relay';
import { topology } from '../../shared/topology';
import { engineEndpoint, type Harness, startHarness } from './harness';
import { scenarioTimeoutMs, sized } from './profile';

const leaseSeconds = 0.4;
/** Every PutEvents round trip outlasts the lease: each claim is taken over while it publishes. */
const publishDelayMs = 700;
const relays = 3;

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
      const tasks = sized(30, 300);
      await harness.approveTasks(tasks);
      const budgetEnd = Date.now() + sized(20_000, 60_000);
      const reports: RunReport[] = await Promise.all(
        Array.from({ length: relays }, () =>
          runRelay(
            harness.relayDeps({
              settings: { leaseSeconds, claimBatchSize: 5, roundsInFlight: 2, pollIntervalMs: 50 },
              publisher: slow,
            }),
            { remainingMs: () => budgetEnd - Date.now() },
          ),
        ),
      );
      const settled = await harness.settle({ runRelays: false });
      const report = await harness.check();

      // The fault happened: claims were taken over from relays whose publish was still in flight,
      // and those rows went to the bus more than once.
      const takeOvers = reports.reduce((n, r) => n + r.expiredLeases, 0);
      expect(takeOvers).toBeGreaterThan(0);
      expect(report.figures.duplicates.publish).toBeGreaterThan(0);
      // Each take-over is one more claim; a row settles at its first accepted publish, so the
      // claims of one row are bounded by the relays that can overlap one slow publish.
      expect(report.figures.maxPublishAttempts).toBeLessThanOrEqual(relays + 1);
      expect(report.figures.maxPublishAttempts).toBeLessThan(topology.relay.maxUnsettledClaims);
      expect(report.violations).toEqual([]);
      expect(settled.quiet).toBe(true);
      expect(reports.every((r) => r.stats.pending === 0)).toBe(true);
    },
    scenarioTimeoutMs,
  );
});
