import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgSqlClient } from '../../shared/db/pg-client';
import { roleName } from '../../shared/db/roles';
import type { SqlClient } from '../../shared/db/sql-client';
import { isPipelineError } from '../../shared/errors';
import { approveTask, createRequestHash, createTaskOnce } from '../../shared/tasks/commands';
import { deferred } from '../support/gates';
import { openTestDatabase, sqlAdapters } from '../support/sql-adapters';
import { waitFor } from '../support/wait-for';

// A create under an Idempotency-Key, through each SQL adapter as the tasks API's own role (so a
// missing grant fails here): the key makes one task however often and however concurrently the
// same request is sent, and refuses another request under it without changing anything.
describe.each(sqlAdapters)('a create under an idempotency key ($name adapter)', (adapter) => {
  let db: SqlClient;
  let truth: PgSqlClient;
  let close: () => Promise<void>;

  beforeAll(async () => {
    const opened = await openTestDatabase(adapter, 'tasksApi');
    db = opened.db;
    close = opened.close;
    truth = new PgSqlClient({ connectionString: opened.url });
  });
  afterAll(async () => {
    await truth.close();
    await close();
  });

  let n = 0;
  const freshKey = () => `key-${adapter.name}-${++n}-${Date.now()}`;

  async function tasksUnder(key: string) {
    const { rows } = await truth.query<{ task_id: string; title: string }>(
      'SELECT task_id, title FROM tasks WHERE idempotency_key = :key',
      { key },
    );
    return rows;
  }

  async function taskCount(): Promise<number> {
    const { rows } = await truth.query<{ n: number }>('SELECT count(*)::int AS n FROM tasks');
    return rows[0]?.n ?? -1;
  }

  it('makes the task on the first create and answers the same task, replayed, to the same request again', async () => {
    const key = freshKey();
    const request = { title: 'Spring launch post', body: 'draft', assignee: 'ana' };

    const first = await createTaskOnce(request, key, { db });
    const again = await createTaskOnce(request, key, { db });

    expect(first.replayed).toBe(false);
    expect(first.task).toMatchObject({ title: 'Spring launch post', status: 'pending_review', version: 1 });
    expect(again.replayed).toBe(true);
    expect(again.task).toEqual(first.task);
    expect(await tasksUnder(key)).toEqual([{ task_id: first.task.taskId, title: 'Spring launch post' }]);
  });

  it('refuses the same key with another request and changes nothing', async () => {
    const key = freshKey();
    const first = await createTaskOnce({ title: 'The first request' }, key, { db });
    const before = await taskCount();

    const err = await createTaskOnce({ title: 'Another request' }, key, { db }).catch((e: unknown) => e);
    // An optional field sent, or left out, is another request too.
    const withAssignee = await createTaskOnce({ title: 'The first request', assignee: 'al' }, key, {
      db,
    }).catch((e: unknown) => e);

    expect(isPipelineError(err, 'IDEMPOTENCY_KEY_REUSED')).toBe(true);
    expect((err as Error).message).toMatch(/already used with another request; nothing was created/);
    expect(isPipelineError(withAssignee, 'IDEMPOTENCY_KEY_REUSED')).toBe(true);
    expect(await taskCount()).toBe(before);
    expect(await tasksUnder(key)).toEqual([{ task_id: first.task.taskId, title: 'The first request' }]);
  });

  it('makes one task of many creates of the same request sent at once', async () => {
    const key = freshKey();

    const answers = await Promise.all(
      Array.from({ length: 8 }, () => createTaskOnce({ title: 'sent eight times at once' }, key, { db })),
    );

    const ids = new Set(answers.map((a) => a.task.taskId));
    expect(ids.size).toBe(1);
    expect(answers.filter((a) => !a.replayed)).toHaveLength(1);
    expect((await tasksUnder(key)).map((r) => r.task_id)).toEqual([...ids]);
  });

  it('answers the task a create in flight under the same key commits, which its own statement could not see', async () => {
    const key = freshKey();
    const request = { title: 'in flight beside it' };
    const inserted = deferred<string>();
    const commit = deferred();
    // Another create of the same request, its INSERT done and not yet committed.
    const other = truth.transaction(async (tx) => {
      const { rows } = await tx.query<{ task_id: string }>(
        `INSERT INTO tasks (task_id, title, idempotency_key, request_hash)
         VALUES (gen_random_uuid(), :title, :key, :hash) RETURNING task_id`,
        { title: request.title, key, hash: createRequestHash(request) },
      );
      inserted.resolve(rows[0]?.task_id as string);
      await commit.promise;
    });
    const otherId = await inserted.promise;

    const answer = createTaskOnce(request, key, { db });
    // The tasks API's INSERT waits on the key's index entry until the other one ends.
    await waitFor(
      () =>
        truth.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = :role AND wait_event_type = 'Lock'`,
          { role: roleName('tasksApi') },
        ),
      (r) => (r.rows[0]?.n ?? 0) > 0,
      { timeoutMs: 60_000, intervalMs: 20, what: 'the create waiting on the key' },
    );
    commit.resolve();
    await other;

    const found = await answer;
    expect(found).toMatchObject({ replayed: true, task: { taskId: otherId } });
    expect((await tasksUnder(key)).map((r) => r.task_id)).toEqual([otherId]);
  });

  it('answers a replay with the task as it is now', async () => {
    const key = freshKey();
    const request = { title: 'approved since' };
    const first = await createTaskOnce(request, key, { db });
    await approveTask({ taskId: first.task.taskId, approvedBy: 'rita' }, { db });

    const again = await createTaskOnce(request, key, { db });

    expect(again.replayed).toBe(true);
    expect(again.task).toMatchObject({ taskId: first.task.taskId, status: 'approved', version: 2 });
  });

  it('keeps keys apart: two keys make two tasks of the same request', async () => {
    const a = await createTaskOnce({ title: 'same words' }, freshKey(), { db });
    const b = await createTaskOnce({ title: 'same words' }, freshKey(), { db });

    expect(a.task.taskId).not.toBe(b.task.taskId);
    expect([a.replayed, b.replayed]).toEqual([false, false]);
  });
});
