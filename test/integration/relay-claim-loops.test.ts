import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SqlClient } from '../../shared/db/sql-client';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { runRelay } from '../../shared/outbox/relay';
import { Quiescence } from '../support/gates';
import {
  RecordingPublisher,
  seedPending,
  statusCounts,
  testSettings,
  throughStore,
} from '../support/outbox-fixtures';
import { openRelayTestDatabase } from '../support/sql-adapters';

describe('the claim loops of a relay run', () => {
  let db: SqlClient;
  let store: OutboxStore;
  let cleanup: () => Promise<void>;
  let openedUrl: string;

  beforeAll(async () => {
    const opened = await openRelayTestDatabase();
    ({ db, relayUrl: openedUrl, close: cleanup } = opened);
    store = new OutboxStore(opened.relayDb);
  });
  afterAll(() => cleanup());
  beforeEach(async () => {
    await db.query('DELETE FROM outbox');
  });

  it('a claim cut short by the byte bound is claimed after at once, without pausing', async () => {
    // 20,000-character payloads: a claim's byte bound takes far fewer rows than its row bound.
    await seedPending(db, 300, 20_000);
    const settings = testSettings({ claimBatchSize: 100, roundsInFlight: 1 });
    const perClaim = Math.floor(settings.claimBytes.perClaim / 20_000);
    expect(perClaim).toBeLessThan(settings.claimBatchSize);
    const slept: number[] = [];

    const report = await runRelay(
      { outbox: store, publisher: new RecordingPublisher(), owner: 'r', settings },
      { remainingMs: () => 60_000, sleep: async (ms) => void slept.push(ms) },
    );

    expect(report.published).toBe(300);
    expect(await statusCounts(db)).toEqual({ delivered: 300 });
    // A short claim is no sign of an empty outbox: the run went on at once, never waiting a poll interval.
    expect(slept).toEqual([]);
  });

  it('rows committed while a run drains are claimed at once after it, without pausing', async () => {
    await seedPending(db, 5);
    const settings = testSettings({ claimBatchSize: 100, roundsInFlight: 1, pollIntervalMs: 1_000 });
    // Approvals keep committing while the relay publishes: 5 more rows during each of the first two publishes.
    let commitsLeft = 2;
    const publisher = new RecordingPublisher();
    const busy: typeof publisher = Object.assign(Object.create(publisher), {
      publish: async (events: Parameters<typeof publisher.publish>[0]) => {
        if (commitsLeft-- > 0) await seedPending(db, 5);
        return publisher.publish(events);
      },
    });
    const slept: number[] = [];

    const report = await runRelay(
      { outbox: store, publisher: busy, owner: 'r', settings },
      { remainingMs: () => 60_000, sleep: async (ms) => void slept.push(ms) },
    );

    expect(report.published).toBe(15);
    expect(await statusCounts(db)).toEqual({ delivered: 15 });
    // Rows due now after a drain that claimed some are fresh commits, not rows another relay holds.
    expect(slept).toEqual([]);
  });

  it('a drain that found nothing claims at once the rows that commit before the run looks again', async () => {
    // A run nudged for rows an earlier run already took: its claim finds nothing, and an
    // approval commits between that claim and the run's look at the outbox.
    const settings = testSettings({ claimBatchSize: 100, roundsInFlight: 1, pollIntervalMs: 1_000 });
    let committed = false;
    const late = throughStore(store, {
      stats: async () => {
        if (!committed) {
          committed = true;
          await seedPending(db, 1);
        }
        return store.stats();
      },
    });
    const slept: number[] = [];

    const report = await runRelay(
      { outbox: late, publisher: new RecordingPublisher(), owner: 'r', settings },
      { remainingMs: () => 60_000, sleep: async (ms) => void slept.push(ms) },
    );

    expect(report.published).toBe(1);
    // Before: the empty drain was taken for rows another relay holds, and the event waited a poll interval.
    expect(slept).toEqual([]);
  });

  it('rows another claim holds while they look due: one more claim at once, then a poll interval', async () => {
    await seedPending(db, 3);
    const settings = testSettings({ claimBatchSize: 100, roundsInFlight: 1, pollIntervalMs: 1_000 });
    // Another relay's claim statement has the rows locked (SKIP LOCKED passes them by) and has
    // not committed their lease yet: stats still sees them due.
    // A connection of its own, not a pool's, so that nothing closes it while it holds the locks.
    const other = new pg.Client({ connectionString: openedUrl });
    await other.connect();
    let claims = 0;
    const slept: number[] = [];
    try {
      await other.query('BEGIN');
      await other.query("SELECT event_id FROM outbox WHERE status = 'pending' FOR UPDATE");
      const counting = throughStore(store, {
        claim: (owner, limits) => {
          claims++;
          return store.claim(owner, limits);
        },
      });
      let left = 2_500;
      const report = await runRelay(
        { outbox: counting, publisher: new RecordingPublisher(), owner: 'r', settings },
        {
          remainingMs: () => left,
          sleep: async (ms) => {
            slept.push(ms);
            left -= ms;
          },
        },
      );
      expect(report.published).toBe(0);
    } finally {
      await other.query('ROLLBACK');
      await other.end();
    }
    // Two claims, then a poll interval's pause before each further one: no tight loop against the database.
    expect(slept).toEqual([1_000, 1_000]);
    expect(claims).toBe(4);
  });

  it('a backlog widens the run to roundsInFlight claims at once, and no further', async () => {
    await seedPending(db, 1_000);
    const settings = testSettings({ claimBatchSize: 50, roundsInFlight: 3 });
    // Claims far slower than everything else, as through the Data API, whatever the machine's
    // speed: a claim is answered only once the run has no other statement in flight, and each
    // answer takes 20 ms of the run's clock, 1 ms of it in the database. Rounds then wait on
    // latency, more of them help, and the run holds as many claims at once as it lets rounds run.
    let now = 0;
    let inFlight = 0;
    let most = 0;
    const quiet = new Quiescence();
    const slowClaims = throughStore(store, {
      claim: async (owner, limits) => {
        most = Math.max(most, ++inFlight);
        try {
          await quiet.reached();
          now += 20;
          const claim = await store.claim(owner, limits);
          return claim.databaseMs === undefined ? claim : { ...claim, databaseMs: 1 };
        } finally {
          inFlight--;
        }
      },
      markDelivered: quiet.track((items) => store.markDelivered(items)),
      markFailed: quiet.track((owner, items) => store.markFailed(owner, items)),
      purgeDelivered: quiet.track((hours, batch) => store.purgeDelivered(hours, batch)),
      stats: quiet.track(() => store.stats()),
    });

    const report = await runRelay(
      { outbox: slowClaims, publisher: new RecordingPublisher(), owner: 'r', settings, clock: () => now },
      { remainingMs: () => 60_000, sleep: async () => {} },
    );

    expect(report.published).toBe(1_000);
    expect(most).toBe(3);
  });
});
