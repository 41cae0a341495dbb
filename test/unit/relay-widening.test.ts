import { describe, expect, it } from 'vitest';
import type { Claim } from '../../shared/outbox/outbox-store';
import { runRelay } from '../../shared/outbox/relay';
import { claimedEvents, RecordingPublisher, stubOutbox, testSettings } from '../support/outbox-fixtures';

describe('a relay run meeting a backlog', () => {
  it('widens to every round in flight as soon as a claim comes back full', async () => {
    const settings = testSettings({ roundsInFlight: 4, claimBatchSize: 2 });
    const pending: ((claim: Claim) => void)[] = [];
    const fullBatch = (): Claim => ({
      claimed: claimedEvents(settings.claimBatchSize),
      wedged: [],
      more: true,
    });
    const outbox = stubOutbox(() => new Promise<Claim>((resolve) => pending.push(resolve)));
    // Every collaborator answers at once, so the run moves on within microtasks: no clock needed.
    const settle = async () => {
      for (let i = 0; i < 50; i++) await Promise.resolve();
    };

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

  it('keeps two rounds while the database’s work is most of a round, and widens once rounds wait on latency', async () => {
    const settings = testSettings({ roundsInFlight: 4, claimBatchSize: 2 });
    let now = 0;
    const pending: ((claim: Claim) => void)[] = [];
    const outbox = stubOutbox(() => new Promise<Claim>((resolve) => pending.push(resolve)));
    const settle = async () => {
      for (let i = 0; i < 50; i++) await Promise.resolve();
    };
    // Each claim's round trip takes 10 ms; `databaseMs` of it ran in the database.
    const answer = (databaseMs: number, more = true) => {
      now += 10;
      for (const resolve of pending.splice(0))
        resolve({
          claimed: more ? claimedEvents(settings.claimBatchSize) : [],
          wedged: [],
          more,
          databaseMs,
        });
    };

    const run = runRelay(
      { outbox, publisher: new RecordingPublisher(), owner: 'r', settings, clock: () => now },
      { remainingMs: () => 60_000, sleep: async () => {} },
    );
    await settle();
    expect(pending).toHaveLength(1);

    // A loopback database: 9 of the 10 ms were its own work. Two rounds keep it busy; four would share its cores.
    answer(9);
    await settle();
    expect(pending).toHaveLength(2);

    // The Data API: 1 ms of work in a 10 ms round trip. All four rounds, to overlap the latency.
    answer(1);
    await settle();
    expect(pending).toHaveLength(4);

    // The database's work again: the two loops beyond the width give their places up.
    answer(9);
    await settle();
    expect(pending).toHaveLength(2);

    answer(0, false);
    await run;
  });

  it('a full claim starts a second round at once, before its own round has published', async () => {
    const settings = testSettings({ roundsInFlight: 4, claimBatchSize: 2 });
    const claims: ((claim: Claim) => void)[] = [];
    const outbox = stubOutbox(() => new Promise<Claim>((resolve) => claims.push(resolve)));
    const publishes: (() => void)[] = [];
    const recording = new RecordingPublisher();
    const slow: RecordingPublisher = Object.assign(Object.create(recording), {
      publish: async (events: Parameters<RecordingPublisher['publish']>[0]) => {
        await new Promise<void>((resolve) => publishes.push(resolve));
        return recording.publish(events);
      },
    });
    const settle = async () => {
      for (let i = 0; i < 50; i++) await Promise.resolve();
    };

    const run = runRelay(
      { outbox, publisher: slow, owner: 'r', settings },
      { remainingMs: () => 60_000, sleep: async () => {} },
    );
    await settle();
    claims.shift()?.({ claimed: claimedEvents(settings.claimBatchSize), wedged: [], more: true });
    await settle();

    // The first round is publishing; the second is already claiming.
    expect(publishes).toHaveLength(1);
    expect(claims).toHaveLength(1);
    claims.shift()?.({ claimed: [], wedged: [], more: false });
    for (const release of publishes.splice(0)) release();
    await settle();
    for (const resolve of claims.splice(0)) resolve({ claimed: [], wedged: [], more: false });
    await run;
  });
});
