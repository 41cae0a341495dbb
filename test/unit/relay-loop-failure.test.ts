import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { OutboxStore } from '../../shared/outbox/outbox-store';
import { runRelay } from '../../shared/outbox/relay';
import { RecordingPublisher, testSettings } from '../support/outbox-fixtures';

describe('a relay run whose round fails', () => {
  it('stops its other loops before it reports the error: no loop outlives the run', async () => {
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
        await new Promise((r) => setTimeout(r, 10));
        if (call === 1) throw new Error('database went away');
        return { claimed: fullBatch(), wedged: [] };
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
      { remainingMs: () => 60_000, sleep: (ms) => new Promise((r) => setTimeout(r, ms)) },
    );

    await expect(run).rejects.toThrow('database went away');
    const atRejection = claims;
    await new Promise((r) => setTimeout(r, 200));
    expect(claims).toBe(atRejection);
  });
});
