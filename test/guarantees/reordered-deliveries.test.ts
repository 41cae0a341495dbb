import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seededRandom } from '../../infra/local/faults';
import type { BusEvent } from '../../infra/local/local-bus';
import type { ConsumerResult } from '../../shared/consumers/consumer';
import { type ConsumerName, eventTypes } from '../../shared/topology';
import { at, engineEndpoint, type Harness, type Interposer, startHarness } from './harness';
import { scenarioTimeoutMs, sized } from './profile';

interface Held {
  readonly consumer: ConsumerName;
  readonly event: BusEvent;
  release(): Promise<void>;
}

/**
 * A network that holds every first delivery until the test lets them go, in the order it picks;
 * retries of a released delivery go straight through.
 */
function holdingNetwork() {
  const held: Held[] = [];
  const released = new Set<string>();
  const interpose: Interposer = (consumer, event, invoke) => {
    const key = `${consumer}/${event.id}`;
    if (released.has(key)) return invoke(consumer, event);
    return new Promise<ConsumerResult>((resolve, reject) => {
      held.push({
        consumer,
        event,
        release: async () => {
          released.add(key);
          await invoke(consumer, event).then(resolve, reject);
        },
      });
    });
  };
  return { held, interpose };
}

/** Fisher-Yates with a seeded sequence, so a failing order can be run again. */
function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

describe('guarantee: duplicated and reordered deliveries, a withdrawal overtaking its approval', () => {
  let harness: Harness;
  const network = holdingNetwork();
  beforeAll(async () => {
    harness = await startHarness({
      dynamoEndpoint: engineEndpoint('dynalite').endpoint as string,
      // The bus delivers some entries twice, and loses some answers so the relay publishes again.
      busFaults: { busDuplicate: 0.5, busAckLoss: 0.3 },
      faultSeed: 7,
      busConcurrency: 10_000,
      interpose: network.interpose,
    });
  });
  afterAll(() => harness?.stop());

  it(
    'converges on every task’s latest version, each effect once',
    async () => {
      const tasks = sized(20, 200);
      const ids = await harness.approveTasks(tasks);
      const withdrawn = ids.filter((_, i) => i % 2 === 0);
      for (const id of withdrawn) await harness.withdraw(id);
      const drained = await harness.settle({
        outboxOnly: true,
        relay: { backoff: { baseMs: 50, maxMs: 200 } },
      });
      expect(drained.quiet).toBe(true);

      // Every withdrawal (and its duplicates) first, then everything else in a shuffled order,
      // duplicates of one delivery released side by side.
      const isWithdraw = (h: Held) => h.event['detail-type'] === eventTypes.withdrawn;
      const withdrawals = network.held.filter(isWithdraw);
      const rest = shuffled(
        network.held.filter((h) => !isWithdraw(h)),
        seededRandom(11),
      );
      await Promise.all(withdrawals.map((h) => h.release()));
      await Promise.all(rest.map((h) => h.release()));
      const settled = await harness.settle();
      const report = await harness.check();

      // The faults happened: duplicates on the bus, re-publishes, and every approval of a
      // withdrawn task reached the index after the withdrawal (its write found a higher version).
      // Everything was held: at least one delivery per routed consumer of every event.
      expect(network.held.length).toBeGreaterThanOrEqual(tasks * 3 + withdrawn.length);
      expect(new Set(withdrawals.map((h) => h.event.detail.subject)).size).toBe(withdrawn.length);
      expect(report.figures.duplicates.delivery).toBeGreaterThan(0);
      expect(report.figures.duplicates.publish).toBeGreaterThan(0);
      const staleApprovals = at(harness.observed.effectResults, 'index').filter(
        (r) => r.status === 'approved' && r.outcome === 'stale',
      ).length;
      expect(staleApprovals).toBeGreaterThanOrEqual(withdrawn.length);
      expect(report.figures.withdrawnTasks).toBe(withdrawn.length);
      expect(report.violations).toEqual([]);
      expect(settled.quiet).toBe(true);
    },
    scenarioTimeoutMs,
  );
});
