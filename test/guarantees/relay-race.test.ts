import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { seededRandom } from '../../infra/local/faults';
import type { EventPublisher } from '../../shared/outbox/publisher';
import type { RelayDeps, RunReport } from '../../shared/outbox/relay';
import { runRelay } from '../../shared/outbox/relay';
import { type HeldPublish, PublishGate, Quiescence } from '../support/gates';
import { expireLeases } from '../support/outbox-fixtures';
import { engineEndpoint, type Harness, startHarness } from './harness';
import { scenarioTimeoutMs, sized } from './profile';

/** Relay invocations over the scenario: each starts after the claims held so far have lapsed. */
const relayCount = sized(4, 8);
/** The interleaving: which relay starts or which PutEvents is answered next. */
const seed = 21;

describe('guarantee: relays racing while their leases expire', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await startHarness({ dynamoEndpoint: engineEndpoint('dynalite').endpoint as string });
  });
  afterAll(() => harness?.stop());

  it(
    'every event is settled by its first accepted publish and never claimed after it, with bounded attempts',
    async () => {
      const tasks = sized(20, 100);
      await harness.approveTasks(tasks);
      const random = seededRandom(seed);
      const quiet = new Quiescence();
      const gate = new PublishGate();
      // Events a relay's PutEvents accepted and whose mark has returned: from then on, no claim may take them.
      const published = new Set<string>();
      const claimedAfterPublish: string[] = [];
      const racing = (outbox: RelayDeps['outbox']): RelayDeps['outbox'] => ({
        claim: quiet.track(async (owner, limits) => {
          const publishedBefore = new Set(published);
          const claim = await outbox.claim(owner, limits);
          for (const c of claim.claimed)
            if (publishedBefore.has(c.eventId)) claimedAfterPublish.push(c.eventId);
          return claim;
        }),
        markDelivered: quiet.track(async (items) => {
          const marked = await outbox.markDelivered(items);
          for (const item of items) published.add(item.eventId);
          return marked;
        }),
        markFailed: quiet.track((owner, items) => outbox.markFailed(owner, items)),
        release: quiet.track((owner, items, options) => outbox.release(owner, items, options)),
        purgeDelivered: quiet.track((hours, batch) => outbox.purgeDelivered(hours, batch)),
        stats: quiet.track(() => outbox.stats()),
      });
      const slowNetwork = (publisher: EventPublisher): EventPublisher =>
        gate.wrap({ publish: quiet.track((events) => publisher.publish(events)) });

      const runs: Promise<RunReport>[] = [];
      const startRelay = () =>
        runs.push(
          runRelay(
            harness.relayDeps({
              // Leases never lapse on their own here: only the scenario lets them.
              settings: { leaseSeconds: 3_600, claimBatchSize: 5, roundsInFlight: 2 },
              outbox: racing,
              publisher: slowNetwork,
            }),
            { remainingMs: () => 60_000, sleep: quiet.track(async () => {}) },
          ),
        );

      // Overlapping invocations, as nudges and sweeps start them: each takes over whatever claim
      // has lapsed, while the relay that made it still waits for its PutEvents.
      startRelay();
      const held: HeldPublish[] = [];
      for (;;) {
        await quiet.reached();
        while (gate.queued > 0) held.push(await gate.next());
        const mayStart = runs.length < relayCount;
        if (held.length === 0 && !mayStart) break;
        // The second relay starts while the first one's PutEvents is held: at least one take-over.
        if (mayStart && (held.length === 0 || runs.length === 1 || random() < 0.5)) {
          await expireLeases(harness.db);
          startRelay();
        } else {
          const [answered] = held.splice(Math.floor(random() * held.length), 1);
          void answered?.release();
        }
      }
      const reports = await Promise.all(runs);
      const settled = await harness.settle();
      const report = await harness.check();

      // The fault happened: claims were taken over from relays whose publish was still in flight,
      // and those rows went to the bus more than once.
      const takeOvers = reports.reduce((n, r) => n + r.expiredLeases, 0);
      expect(takeOvers).toBeGreaterThan(0);
      expect(report.figures.duplicates.publish).toBeGreaterThan(0);
      // A row settles at its first accepted publish: never claimed again after it, so a row is
      // claimed at most once per lapse of its lease before then, however many relays run.
      expect(claimedAfterPublish).toEqual([]);
      expect(report.figures.maxPublishAttempts).toBeLessThanOrEqual(relayCount);
      expect(report.figures.maxPublishAttempts).toBeLessThan(topology.relay.maxUnsettledClaims);
      expect(report.violations).toEqual([]);
      expect(settled.quiet).toBe(true);
    },
    scenarioTimeoutMs,
  );
});
