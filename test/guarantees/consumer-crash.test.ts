import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumerNames } from '../../functions/topology';
import type { ConsumerEffect } from '../../shared/consumers/effect';
import { TransientError } from '../../shared/inbox/failure-kind';
import type { InboxKey, InboxStore } from '../../shared/inbox/inbox-store';
import type { ConsumerName } from '../../shared/topology';
import {
  at,
  engineEndpoint,
  type Harness,
  SimulatedCrashError,
  startHarness,
  withOverrides,
} from './harness';
import { scenarioTimeoutMs, sized } from './profile';

/** A third of the events crash their consumer once after the effect, a third fail once after it. */
const fate = (eventId: string) =>
  (['crash', 'fail', 'fine'] as const)[Number.parseInt(eventId.slice(0, 4), 16) % 3];

describe('guarantee: a consumer that crashes after its effect', () => {
  let harness: Harness;
  const crashed = new Set<string>();
  const failedAfter = new Set<string>();

  beforeAll(async () => {
    harness = await startHarness({
      dynamoEndpoint: engineEndpoint('dynalite').endpoint as string,
      // The process dies between the effect and the inbox's completion: nothing more is written,
      // the record stays PROCESSING until its lease runs out.
      wrapInbox: (consumer: ConsumerName, inbox: InboxStore) =>
        withOverrides(inbox, {
          complete: async (key: InboxKey, owner: string, at: { now: number; expiresAt: number }) => {
            const id = `${consumer}/${key.eventId}`;
            if (fate(key.eventId) === 'crash' && !crashed.has(id)) {
              crashed.add(id);
              throw new SimulatedCrashError(`${consumer} died after its effect on ${key.eventId}`);
            }
            return inbox.complete(key, owner, at);
          },
        }),
      // The effect acted, then the invocation failed (a timeout, an error after the call returned):
      // a failure that passes, retried whatever a consumer's budget of permanent failures.
      wrapEffect:
        (consumer: ConsumerName, effect: ConsumerEffect): ConsumerEffect =>
        async (event, ctx) => {
          const result = await effect(event, ctx);
          const id = `${consumer}/${event.id}`;
          if (fate(event.id) === 'fail' && !failedAfter.has(id)) {
            failedAfter.add(id);
            throw new TransientError(`${consumer} failed after its effect on ${event.id}`);
          }
          return result;
        },
    });
  });
  afterAll(() => harness?.stop());

  it(
    'runs the effect again after the lease or the backoff, and only notifications repeat',
    async () => {
      const tasks = sized(15, 300);
      await harness.approveTasks(tasks);
      const settled = await harness.settle();
      const report = await harness.check();

      // The faults happened, on every consumer, and each of those effects ran a second time.
      for (const consumer of consumerNames) {
        const crashes = [...crashed].filter((id) => id.startsWith(`${consumer}/`));
        const failures = [...failedAfter].filter((id) => id.startsWith(`${consumer}/`));
        expect(crashes.length).toBeGreaterThan(0);
        expect(failures.length).toBeGreaterThan(0);
        for (const id of [...crashes, ...failures]) expect(harness.observed.effectRuns.get(id)).toBe(2);
        expect(harness.observed.actedWithoutCompleting[consumer]).toBe(crashes.length + failures.length);
      }
      // The second index write found its own version (stale); the second archive put found the
      // object; SNS dedupes nothing, so notify's repeats show, each explained by an attempt above.
      const indexStale = at(harness.observed.effectResults, 'index').filter(
        (r) => r.outcome === 'stale',
      ).length;
      expect(indexStale).toBeGreaterThanOrEqual(
        [...crashed, ...failedAfter].filter((id) => id.startsWith('index/')).length,
      );
      expect(
        at(harness.observed.effectResults, 'archive').filter((r) => r.outcome === 'exists').length,
      ).toBeGreaterThan(0);
      expect(report.figures.duplicates.notification).toBe(harness.observed.actedWithoutCompleting.notify);
      expect(report.violations).toEqual([]);
      expect(settled.quiet).toBe(true);
    },
    scenarioTimeoutMs,
  );
});
