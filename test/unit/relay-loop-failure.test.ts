import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { OutboxStore } from '../../shared/outbox/outbox-store';
import { runRelay } from '../../shared/outbox/relay';
import { elapse, useFakeTime } from '../support/fake-time';
import { RecordingPublisher, testSettings } from '../support/outbox-fixtures';

describe('a relay run whose round fails', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('stops its other loops before it reports the error: no loop outlives the run', async () => {
    const time = useFakeTime();
    let claims = 0;
    const settings = testSettings({ roundsInFlight: 2, pollIntervalMs: 5, claimBatchSize: 2 });
    // Full batches keep the sibling loop claiming: only the failure can stop it.
    const fullBatch = () =>
      Array.from({ length: settings.claimBatchSize }, () => ({
        eventId: randomUUID(),
        eventType: 'content.approved',
        aggregateId: randomUUID(),
        aggregateVersion: 2,
        payload: {},
        createdAt: new Date(),
        attempts: 1,
        claimToken: 1,
        leaseExpired: false,
      }));
    const outbox = {
      claim: async () => {
        const call = ++claims;
        await elapse(10, undefined);
        if (call === 2) throw new Error('database went away');
        return { claimed: fullBatch(), wedged: [], more: true };
      },
      markDelivered: async () => [],
      markFailed: async () => [],
      purgeDelivered: async () => 0,
      stats: async () => ({
        pending: 0,
        delivered: 0,
        dead: 0,
        oldestPendingAgeSeconds: 0,
        nextDueInMs: null,
      }),
    } satisfies Pick<OutboxStore, 'claim' | 'markDelivered' | 'markFailed' | 'purgeDelivered' | 'stats'>;

    const run = runRelay(
      {
        outbox,
        publisher: new RecordingPublisher(),
        owner: 'r',
        settings,
      },
      { remainingMs: () => 60_000, sleep: (ms) => elapse(ms, undefined) },
    );
    let failure: unknown;
    run.catch((err: unknown) => {
      failure = err;
    });

    // The first claim answers a full batch at +10 ms, so the run widens to a second loop; at
    // +20 ms that loop's first claim fails while the first loop's next claim succeeds, and the run
    // reports the failure at once.
    await time.advance(20);
    expect(failure).toMatchObject({ message: 'database went away' });
    const atRejection = claims;
    // Time goes on: a loop that outlived the run would keep claiming full batches in it.
    await time.advance(1_000);
    expect(claims).toBe(atRejection);
  });
});
