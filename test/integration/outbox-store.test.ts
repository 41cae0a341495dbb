import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SqlClient } from '../../shared/db/sql-client';
import { type ClaimedEvent, OutboxStore } from '../../shared/outbox/outbox-store';
import { claimRows, expireLeases, seedPending, statusCounts, testSettings } from '../support/outbox-fixtures';
import { openTestDatabase, sqlAdapters } from '../support/sql-adapters';

// The outbox repository contract, run once per SqlClient adapter on the same real PostgreSQL.
describe.each(sqlAdapters)('outbox store on the $name adapter', (adapter) => {
  let db: SqlClient;
  let store: OutboxStore;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    const opened = await openTestDatabase(adapter);
    db = opened.db;
    store = new OutboxStore(db);
    cleanup = opened.close;
  });
  afterAll(() => cleanup());
  beforeEach(async () => {
    await db.query('DELETE FROM outbox');
  });

  it('appends inside a transaction and rolls back with it', async () => {
    const eventId = randomUUID();
    await expect(
      db.transaction(async (tx) => {
        await store.append(tx, {
          eventId,
          eventType: 'content.approved',
          aggregateId: randomUUID(),
          aggregateVersion: 2,
          payload: { a: 1 },
        });
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await statusCounts(db)).toEqual({});
  });

  it('claims due rows oldest first, with a token, an attempt and a lease', async () => {
    await seedPending(db, 5);
    const claimed = await claimRows(store, 'relay-a', 3, 30);
    expect(claimed).toHaveLength(3);
    expect(claimed.map((c) => c.attempts)).toEqual([1, 1, 1]);
    expect(claimed.every((c) => c.claimToken === 1 && !c.leaseExpired)).toBe(true);
    expect(claimed[0]?.createdAt).toBeInstanceOf(Date);
    const times = claimed.map((c) => c.createdAt.getTime());
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    // The lease hides claimed rows from the next claim.
    const rest = await claimRows(store, 'relay-b', 10, 30);
    expect(rest).toHaveLength(2);
    expect(new Set([...claimed, ...rest].map((c) => c.eventId)).size).toBe(5);
  });

  it('a claim says how long it ran in the database: part of its round trip, and nothing when it took nothing', async () => {
    await seedPending(db, 200);
    const limits = { rows: 200, leaseSeconds: 30, bytes: testSettings().claimBytes, maxUnsettledClaims: 10 };
    const sent = performance.now();
    const claim = await store.claim('relay-a', limits);
    const tripMs = performance.now() - sent;
    expect(claim.claimed).toHaveLength(200);
    expect(claim.databaseMs).toBeGreaterThan(0);
    expect(claim.databaseMs).toBeLessThanOrEqual(tripMs);
    expect((await store.claim('relay-b', limits)).databaseMs).toBeUndefined();
  });

  it('marks pending rows delivered once, keeping the first accepted publish’s bus event id', async () => {
    await seedPending(db, 2);
    const [first] = await claimRows(store, 'relay-a', 2, 30);
    if (!first) throw new Error('expected a claim');
    expect(await store.markDelivered([{ eventId: first.eventId, busEventId: 'bus-1' }])).toEqual([
      first.eventId,
    ]);
    // A second relay's publish of the same event was accepted too: already delivered, unchanged.
    expect(await store.markDelivered([{ eventId: first.eventId, busEventId: 'bus-2' }])).toEqual([]);
    const { rows } = await db.query<{ bus_event_id: string }>(
      "SELECT bus_event_id FROM outbox WHERE status = 'delivered'",
    );
    expect(rows).toEqual([{ bus_event_id: 'bus-1' }]);
  });

  it('an accepted publish is delivered even after another relay took the row over (only failures are fenced)', async () => {
    await seedPending(db, 1);
    const [stale] = await claimRows(store, 'relay-a', 1, 30);
    if (!stale) throw new Error('expected a claim');
    await expireLeases(db);
    const [fresh] = await claimRows(store, 'relay-b', 1, 30);
    if (!fresh) throw new Error('expected a claim');
    // relay-a's publish was accepted: the event is on the bus, so the row is delivered.
    expect(await store.markDelivered([{ eventId: stale.eventId, busEventId: 'from-a' }])).toEqual([
      stale.eventId,
    ]);
    // relay-b's publish failing afterwards changes nothing: it is delivered.
    expect(await store.markFailed('relay-b', [{ ...fresh, error: 'x', dead: false, retryInMs: 0 }])).toEqual(
      [],
    );
    expect(await statusCounts(db)).toEqual({ delivered: 1 });
  });

  it('an expired lease: once taken over, the old owner cannot record a failure; the new owner can settle', async () => {
    await seedPending(db, 1);
    const [stale] = await claimRows(store, 'relay-a', 1, 30);
    if (!stale) throw new Error('expected a claim');
    await expireLeases(db);
    const [fresh] = await claimRows(store, 'relay-b', 1, 30);
    expect(fresh?.leaseExpired).toBe(true);
    expect(fresh?.claimToken).toBe(stale.claimToken + 1);
    expect(fresh?.attempts).toBe(2);
    expect(await store.markFailed('relay-a', [{ ...stale, error: 'x', dead: true, retryInMs: 0 }])).toEqual(
      [],
    );
    if (!fresh) throw new Error('expected a claim');
    expect(await store.markDelivered([{ eventId: fresh.eventId, busEventId: 'ok' }])).toEqual([
      fresh.eventId,
    ]);
  });

  it('a lapsed lease nobody took over still lets its owner mark what it published (no needless republish)', async () => {
    await seedPending(db, 1);
    const [slow] = await claimRows(store, 'relay-a', 1, 30);
    if (!slow) throw new Error('expected a claim');
    await expireLeases(db);

    expect(await store.markDelivered([{ eventId: slow.eventId, busEventId: 'slow' }])).toEqual([
      slow.eventId,
    ]);
    expect(await claimRows(store, 'relay-b', 1, 30)).toEqual([]);
  });

  it('failed rows back off and keep the error; dead rows leave the claimable set', async () => {
    await seedPending(db, 2);
    const [a, b] = await claimRows(store, 'relay-a', 2, 30);
    if (!a || !b) throw new Error('expected two claims');
    await store.markFailed('relay-a', [
      {
        eventId: a.eventId,
        claimToken: a.claimToken,
        error: 'ThrottlingException: slow down',
        dead: false,
        retryInMs: 60_000,
      },
      {
        eventId: b.eventId,
        claimToken: b.claimToken,
        error: 'MalformedDetail: bad',
        dead: true,
        retryInMs: 0,
      },
    ]);
    expect(await claimRows(store, 'relay-a', 10, 30)).toEqual([]);
    const { rows } = await db.query<{ status: string; last_error: string; delay: number }>(
      `SELECT status, last_error, extract(epoch FROM next_attempt_at - now())::float8 AS delay
         FROM outbox ORDER BY status`,
    );
    expect(rows[0]).toMatchObject({ status: 'dead', last_error: 'MalformedDetail: bad' });
    expect(rows[1]).toMatchObject({ status: 'pending', last_error: 'ThrottlingException: slow down' });
    expect(rows[1]?.delay).toBeGreaterThan(50);
    expect(await store.listDead()).toMatchObject([{ eventId: b.eventId, lastError: 'MalformedDetail: bad' }]);
  });

  it('release gives claimed rows back at once without counting the attempt', async () => {
    await seedPending(db, 1);
    const [c] = await claimRows(store, 'relay-a', 1, 30);
    if (!c) throw new Error('expected a claim');
    expect(await store.release('relay-a', [c])).toEqual([c.eventId]);
    const [again] = await claimRows(store, 'relay-b', 1, 30);
    expect(again?.eventId).toBe(c.eventId);
    expect(again?.attempts).toBe(1);
  });

  it('stats count pending and dead rows and age the oldest pending row', async () => {
    await seedPending(db, 3);
    await db.query(
      "UPDATE outbox SET created_at = now() - interval '90 seconds' WHERE event_id = (SELECT event_id FROM outbox ORDER BY created_at LIMIT 1)",
    );
    const [c] = await claimRows(store, 'relay-a', 1, 30);
    if (!c) throw new Error('expected a claim');
    await store.markDelivered([{ ...c, busEventId: 'b' }]);
    const stats = await store.stats();
    expect(stats).toMatchObject({ pending: 2, dead: 0 });
    expect(stats.oldestPendingAgeSeconds).toBeGreaterThan(0);
    expect(stats.oldestPendingAgeSeconds).toBeLessThan(90);
    await db.query('DELETE FROM outbox');
    expect(await store.stats()).toEqual({
      pending: 0,
      dead: 0,
      oldestPendingAgeSeconds: 0,
      nextDueInMs: null,
    });
  });

  it('the delivered count comes from the counters the writes keep, off the relay statements', async () => {
    const before = await store.deliveredCount();
    await seedPending(db, 4);
    const claimed = await claimRows(store, 'relay-a', 3, 30);
    await store.markDelivered(claimed.map((c) => ({ eventId: c.eventId, busEventId: 'b' })));
    await store.markFailed('relay-a', [
      { ...(claimed[0] as ClaimedEvent), error: 'x', dead: true, retryInMs: 0 },
    ]);
    expect(await store.deliveredCount()).toBe(before + 3);
    // The purge's deletes count too (the relay's own statements touch no counter).
    await db.query("UPDATE outbox SET delivered_at = now() - interval '9 days' WHERE status = 'delivered'");
    expect(await store.purgeDelivered(24 * 7, 2)).toBe(2);
    expect(await store.deliveredCount()).toBe(before + 1);
  });

  it('stats say when the next pending row may be claimed: its backoff over and no live lease on it', async () => {
    await seedPending(db, 3);
    expect((await store.stats()).nextDueInMs).toBe(0);
    // One row leased by a live claim, the others backing off for 10 s and for an hour.
    const [leased] = await claimRows(store, 'relay-a', 1, 30);
    if (!leased) throw new Error('expected a claim');
    await db.query(
      `UPDATE outbox SET next_attempt_at = now() + CASE WHEN row_number = 1 THEN interval '10 seconds' ELSE interval '1 hour' END
         FROM (SELECT event_id AS id, row_number() OVER (ORDER BY created_at) FROM outbox WHERE lease_until IS NULL) AS r
        WHERE outbox.event_id = r.id`,
    );
    const due = (await store.stats()).nextDueInMs;
    expect(due).toBeGreaterThan(8_000);
    expect(due).toBeLessThanOrEqual(10_000);
    await db.query("UPDATE outbox SET status = 'delivered' WHERE lease_until IS NULL");
    // Only the leased row is left: nobody else may claim it before its lease runs out in 30 s.
    const leasedOnly = await store.stats();
    expect(leasedOnly.pending).toBe(1);
    expect(leasedOnly.nextDueInMs).toBeGreaterThan(25_000);
    expect(leasedOnly.nextDueInMs).toBeLessThanOrEqual(30_000);
    await db.query('DELETE FROM outbox');
  });

  it('purges only delivered rows past retention, one small batch at a time', async () => {
    await seedPending(db, 7);
    await db.query(
      `UPDATE outbox SET status = 'delivered', delivered_at = now() - interval '8 days'
        WHERE event_id IN (SELECT event_id FROM outbox ORDER BY created_at LIMIT 5)`,
    );
    await db.query(
      `UPDATE outbox SET status = 'delivered', delivered_at = now()
        WHERE event_id IN (SELECT event_id FROM outbox WHERE status = 'pending' ORDER BY created_at LIMIT 1)`,
    );
    expect(await store.purgeDelivered(24 * 7, 3)).toBe(3);
    expect(await store.purgeDelivered(24 * 7, 3)).toBe(2);
    expect(await store.purgeDelivered(24 * 7, 3)).toBe(0);
    expect(await statusCounts(db)).toEqual({ pending: 1, delivered: 1 });
  });

  it('a purge never deletes more than its batch, whatever plan PostgreSQL picks', async () => {
    // Equal delivered_at and a plan that re-scans the chosen rows once per row it looks at (a
    // nested-loop semi-join with nothing cached): a statement whose batch was a sub-select
    // re-ran it after each delete, skipped the rows it had just deleted and took others (12 of 3).
    await seedPending(db, 12);
    await db.query("UPDATE outbox SET status = 'delivered', delivered_at = now() - interval '8 days'");
    const rescanEveryRow = [
      'enable_hashjoin',
      'enable_mergejoin',
      'enable_material',
      'enable_hashagg',
      'enable_sort',
    ];
    const deleted = await db.transaction(async (tx) => {
      for (const setting of rescanEveryRow) await tx.query(`SET LOCAL ${setting} = off`);
      return new OutboxStore({ ...db, query: (sql, params) => tx.query(sql, params) }).purgeDelivered(
        24 * 7,
        3,
      );
    });
    expect(deleted).toBe(3);
    expect(await statusCounts(db)).toEqual({ delivered: 9 });
  });

  it('redrives a dead event back to pending with fresh attempts', async () => {
    await seedPending(db, 1);
    const [c] = await claimRows(store, 'relay-a', 1, 30);
    if (!c) throw new Error('expected a claim');
    await store.markFailed('relay-a', [{ ...c, error: 'InvalidArgument', dead: true, retryInMs: 0 }]);
    expect(await store.redriveDead(c.eventId)).toBe(true);
    expect(await store.redriveDead(c.eventId)).toBe(false);
    const [again] = await claimRows(store, 'relay-a', 1, 30);
    expect(again).toMatchObject({ eventId: c.eventId, attempts: 1 });
  });
});
