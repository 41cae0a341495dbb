import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgSqlClient } from '../../shared/db/pg-client';
import type { SqlClient } from '../../shared/db/sql-client';
import { taskCounts } from '../../shared/ops/ops-queries';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { approveTask, createTask, withdrawTask } from '../../shared/tasks/commands';
import { createTestDatabase, type TestDatabase } from '../support/database';

// The ops status reads task counts and delivered rows from counters the writes keep (migration
// 0007), not from counts of the tables: they must say what a count of the tables says.

describe('the counters the task and outbox writes keep', () => {
  let database: TestDatabase;
  let owner: PgSqlClient;
  let tasksApi: SqlClient;

  beforeAll(async () => {
    database = await createTestDatabase();
    owner = new PgSqlClient({ connectionString: database.url });
    tasksApi = new PgSqlClient({ connectionString: database.urlAs('tasksApi'), maxConnections: 8 });
  });
  afterAll(async () => {
    await tasksApi.close();
    await owner.close();
    await database.drop();
  });

  const counted = async () => {
    const { rows } = await owner.query<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM tasks GROUP BY status',
    );
    return {
      pending_review: 0,
      approved: 0,
      rejected: 0,
      withdrawn: 0,
      ...Object.fromEntries(rows.map((r) => [r.status, r.n])),
    };
  };

  it('task counts by status agree with a count of the table after creates, approvals, withdrawals, a bulk change and deletes', async () => {
    const ids = await Promise.all(
      Array.from(
        { length: 40 },
        async (_, i) => (await createTask({ title: `count ${i}` }, { db: tasksApi })).taskId,
      ),
    );
    // Concurrent changes on many backends: no deadlock between their counter writes.
    await Promise.all(
      ids.slice(0, 30).map((taskId) => approveTask({ taskId, approvedBy: 'rita' }, { db: tasksApi })),
    );
    await Promise.all(
      ids.slice(20, 35).map((taskId) => withdrawTask({ taskId, withdrawnBy: 'rita' }, { db: tasksApi })),
    );
    await owner.query(
      "UPDATE tasks SET status = 'rejected' WHERE status = 'pending_review' AND title LIKE 'count 3%'",
    );
    await owner.query("DELETE FROM tasks WHERE title = 'count 39'");

    expect(await taskCounts(owner)).toEqual(await counted());
    expect((await taskCounts(owner)).withdrawn).toBe(15);
  });

  it('delivered rows are appended minus deleted minus pending and dead, whatever inserted or deleted them', async () => {
    const store = new OutboxStore(owner);
    await owner.query(
      `INSERT INTO outbox (event_id, event_type, aggregate_id, aggregate_version, payload, status, delivered_at)
       SELECT gen_random_uuid(), 'content.approved', gen_random_uuid(), 2, '{}', 'delivered', now() FROM generate_series(1, 500)`,
    );
    await owner.query(
      "DELETE FROM outbox WHERE event_id IN (SELECT event_id FROM outbox WHERE status = 'delivered' LIMIT 120)",
    );
    const { rows } = await owner.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM outbox WHERE status = 'delivered'",
    );
    expect(await store.deliveredCount()).toBe(rows[0]?.n);
  });
});
