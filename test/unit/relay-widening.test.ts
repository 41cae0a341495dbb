import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Claim, OutboxStore } from '../../shared/outbox/outbox-store';
import { runRelay } from '../../shared/outbox/relay';
import { RecordingPublisher, testSettings } from '../support/outbox-fixtures';

describe('a relay run meeting a backlog', () => {
  it('widens to every round in flight as soon as a claim comes back full', async () => {
    const settings = testSettings({ roundsInFlight: 4, claimBatchSize: 2 });
    const pending: ((claim: Claim) => void)[] = [];
    const fullBatch = (): Claim => ({
      claimed: Array.from({ length: settings.claimBatchSize }, () => ({
        eventId: randomUUID(),
        eventType: 'content.approved',
        aggregateId: randomUUID(),
        aggregateVersion: 2,
        payload: {},
        createdAt: new Date(),
        attempts: 1,
        claimToken: 1,
        leaseExpired: false,
      })),
      wedged: [],
      more: true,
    });
    const outbox = {
      claim: () => new Promise<Claim>((resolve) => pending.push(resolve)),
      markDelivered: async (items: readonly { eventId: string }[]) => items.map((i) => i.eventId),
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
    const settle = () => new Promise((r) => setTimeout(r, 10));

    const run = runRelay(
      { outbox, publisher: new RecordingPublisher(), owner: 'r', settings },
      { remainingMs: () => 60_000, sleep: async () => {} },
    );
    await settle();
    // One claim first: an idle outbox or a nudge for one event is claimed once.
    expect(pending).toHaveLength(1);
    pending.shift()?.(fullBatch());
    await settle();

    // A full claim means a backlog: all four rounds claim at once, not one more per full claim.
    expect(pending).toHaveLength(4);
    for (const resolve of pending.splice(0)) resolve({ claimed: [], wedged: [], more: false });
    await run;
  });
});
