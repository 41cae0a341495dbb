import { describe, expect, it } from 'vitest';
import type { OutboxStore } from '../../shared/outbox/outbox-store';
import { runRelay } from '../../shared/outbox/relay';
import { RecordingPublisher, testSettings } from '../support/outbox-fixtures';

describe('a relay run whose round fails', () => {
  it('stops its other loops before it reports the error: no loop outlives the run', async () => {
    let claims = 0;
    const outbox = {
      claim: async () => {
        const call = ++claims;
        await new Promise((r) => setTimeout(r, 10));
        if (call === 1) throw new Error('database went away');
        return [];
      },
      markDelivered: async () => [],
      markFailed: async () => [],
      purgeDelivered: async () => 0,
      stats: async () => ({ pending: 0, delivered: 0, dead: 0, oldestPendingAgeSeconds: 0 }),
    } satisfies Pick<OutboxStore, 'claim' | 'markDelivered' | 'markFailed' | 'purgeDelivered' | 'stats'>;

    const run = runRelay(
      {
        outbox,
        publisher: new RecordingPublisher(),
        owner: 'r',
        settings: testSettings({ roundsInFlight: 2, pollIntervalMs: 5 }),
      },
      { remainingMs: () => 60_000, sleep: (ms) => new Promise((r) => setTimeout(r, ms)) },
    );

    await expect(run).rejects.toThrow('database went away');
    const atRejection = claims;
    await new Promise((r) => setTimeout(r, 200));
    expect(claims).toBe(atRejection);
  });
});
