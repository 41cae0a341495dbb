import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PgSqlClient } from '../../shared/db/pg-client';
import type { SqlClient } from '../../shared/db/sql-client';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { relayOnce, runRelay } from '../../shared/outbox/relay';
import { createTasksApi } from '../../shared/tasks/tasks-api';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { RecordingPublisher, statusCounts, testSettings } from '../support/outbox-fixtures';
import { dataApiAdapter } from '../support/sql-adapters';
import { asCaller, callApi, jsonRequest } from './tasks-api-harness';

// The relay's claim through the RDS Data API adapter and the Data API-compatible endpoint, which
// refuses a response over 1 MiB or a row over 64 KB as the Data API does: what the claim returns
// must stay within both, whatever payloads the tasks API accepts.
describe('relay claims through the RDS Data API', () => {
  let database: TestDatabase;
  let owner: SqlClient;
  let relayDb: { db: SqlClient; close: () => Promise<void> };
  let store: OutboxStore;

  beforeAll(async () => {
    database = await createTestDatabase();
    owner = new PgSqlClient({ connectionString: database.url });
    relayDb = await dataApiAdapter.open(database.urlAs('relay'), 'relay');
    store = new OutboxStore(relayDb.db);
  });
  afterAll(async () => {
    await relayDb.close();
    await owner.close();
    await database.drop();
  });
  beforeEach(async () => {
    await owner.query('DELETE FROM outbox');
    await owner.query('DELETE FROM tasks');
  });

  it('100 withdrawals with the longest titles and reasons the API accepts, all escaping twice, are all delivered', async () => {
    const tasksDb = new PgSqlClient({ connectionString: database.urlAs('tasksApi') });
    const api = createTasksApi({
      db: tasksDb,
      nudger: { nudge: async () => {} },
      logger: { error: () => {}, warn: () => {} },
    });
    // A control character is 6 bytes in jsonb text (\u0001) and 7 once the Data API escapes
    // that again; a quote or backslash 2, then 4.
    const hostile = (n: number) => '"\\\u0001'.repeat(Math.ceil(n / 3)).slice(0, n);
    try {
      const ids: string[] = [];
      for (let i = 0; i < 100; i++) {
        const created = await callApi(api, jsonRequest('POST', '/tasks', { title: `x${hostile(499)}` }));
        expect(created.status).toBe(201);
        const id = created.body.taskId as string;
        ids.push(id);
        expect(
          (await callApi(api, asCaller(jsonRequest('POST', `/tasks/${id}/approve`, {}), hostile(200))))
            .status,
        ).toBe(200);
      }
      // The withdrawals one after another, so a claim of 100 rows by count takes 100 of them.
      for (const id of ids) {
        const withdrawn = await callApi(
          api,
          asCaller(jsonRequest('POST', `/tasks/${id}/withdraw`, { reason: hostile(2000) }), hostile(200)),
        );
        expect(withdrawn.status).toBe(200);
      }
    } finally {
      await tasksDb.close();
    }
    // What one claim of 100 rows would have answered: over the 1 MiB response limit.
    const { rows } = await owner.query<{ bytes: number }>(
      `SELECT sum(octet_length(to_json(payload::text)::text))::int AS bytes FROM outbox
        WHERE event_type = 'content.withdrawn'`,
    );
    expect(rows[0]?.bytes).toBeGreaterThan(1024 * 1024);

    const publisher = new RecordingPublisher();
    const report = await runRelay(
      { outbox: store, publisher, owner: 'relay-data-api', settings: testSettings() },
      { remainingMs: () => 60_000 },
    );
    expect(report.dead).toBe(0);
    expect(await statusCounts(owner)).toEqual({ delivered: 200 });
    expect(new Set(publisher.published.map((e) => e.eventId)).size).toBe(200);
    const withdrawal = publisher.published.find((e) => e.eventType === 'content.withdrawn');
    expect(withdrawal?.payload).toMatchObject({ reason: hostile(2000) });
  });

  it('a payload over the 64 KB row limit is claimed without it and goes dead; the rows behind it are delivered', async () => {
    const { seedPending } = await import('../support/outbox-fixtures');
    await seedPending(owner, 3);
    await owner.query(
      `UPDATE outbox SET payload = payload || jsonb_build_object('padding', repeat('x', 100000))
        WHERE event_id = (SELECT event_id FROM outbox ORDER BY created_at LIMIT 1)`,
    );
    const round = await relayOnce({
      outbox: store,
      publisher: new RecordingPublisher(),
      owner: 'r',
      settings: testSettings(),
    });
    expect(round).toMatchObject({ claimed: 3, published: 2, dead: 1 });
    expect((await store.listDead())[0]?.lastError).toMatch(/^PayloadTooLarge/);
  });

  it('a row whose claims never settle goes dead after maxUnsettledClaims, with the reason, and stops holding the rest', async () => {
    const { seedPending, makeAllDue, expireLeases } = await import('../support/outbox-fixtures');
    await seedPending(owner, 2);
    const limits = { rows: 1, leaseSeconds: 30, bytes: testSettings().claimBytes, maxUnsettledClaims: 3 };
    const [first] = (await store.claim('crashing', limits)).claimed;
    if (!first) throw new Error('expected a claim');
    // Every relay that claims the oldest row dies before marking it: its lease runs out.
    for (let i = 2; i <= 3; i++) {
      await expireLeases(owner);
      const again = await store.claim('crashing', limits);
      expect(again.claimed.map((c) => [c.eventId, c.attempts])).toEqual([[first.eventId, i]]);
    }
    await expireLeases(owner);
    await makeAllDue(owner);
    const fourth = await store.claim('crashing', limits);
    expect(fourth).toEqual({
      claimed: [],
      wedged: [first.eventId],
      more: true,
      databaseMs: expect.any(Number),
    });
    // Not stuck behind it: the next claim takes the next row.
    const fifth = await store.claim('next', limits);
    expect(fifth.claimed).toHaveLength(1);
    expect(fifth.claimed[0]?.eventId).not.toBe(first.eventId);
    const [dead] = await store.listDead();
    expect(dead).toMatchObject({ eventId: first.eventId, attempts: 3 });
    expect(dead?.lastError).toMatch(/^claimed 3 times in a row without being marked/);
  });
});
