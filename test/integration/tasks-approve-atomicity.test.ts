import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { PgSqlClient } from '../../shared/db/pg-client';
import type { Row, SqlClient, SqlExecutor, SqlParams } from '../../shared/db/sql-client';
import { contentApprovedData } from '../../shared/events/schemas';
import { approveTask, createTask, withdrawTask } from '../../shared/tasks/commands';
import { createTasksApi } from '../../shared/tasks/tasks-api';
import { createTestDatabase } from '../support/database';
import { sqlAdapters } from '../support/sql-adapters';
import { waitFor } from '../support/wait-for';
import { callApi, jsonRequest, outboxRows, taskState } from './tasks-api-harness';

/** Where the injected failure strikes inside the approve transaction. */
interface Fault {
  readonly statement: RegExp;
  /** `before`: the statement never runs; `after`: it runs, then the call fails (a lost connection). */
  readonly when: 'before' | 'after';
}

/** Wraps `db` so that, inside a transaction, the statement matching `fault` throws. */
function failingAt(db: SqlClient, fault: Fault): SqlClient {
  const fail = () => new Error(`injected fault ${fault.when} ${fault.statement}`);
  const wrap = (tx: SqlExecutor): SqlExecutor => ({
    async query<R extends Row = Row>(sql: string, params?: SqlParams) {
      const hit = fault.statement.test(sql);
      if (hit && fault.when === 'before') throw fail();
      const result = await tx.query<R>(sql, params);
      if (hit) throw fail();
      return result;
    },
  });
  return {
    query: (sql, params) => db.query(sql, params),
    transaction: (work) => db.transaction((tx) => work(wrap(tx))),
    close: async () => {},
  };
}

/**
 * Wraps `db` so that the first transaction to reach the outbox INSERT waits there until another
 * session of this database is blocked on a lock: the second approver's UPDATE, queued behind
 * the first one's row lock. That forces the interleaving the conditional UPDATE must survive.
 */
function holdingFirstApproval(db: SqlClient, observer: SqlClient): SqlClient {
  let held = false;
  const wrap = (tx: SqlExecutor): SqlExecutor => ({
    async query<R extends Row = Row>(sql: string, params?: SqlParams) {
      if (/INSERT INTO outbox/.test(sql) && !held) {
        held = true;
        await waitFor(
          () =>
            observer.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock'`,
            ),
          ({ rows }) => (rows[0]?.n ?? 0) >= 1,
          // PostgreSQL tells of a lock wait only in pg_stat_activity: read until it shows, within
          // a bound on an approver that never blocks (it blocks within milliseconds).
          { timeoutMs: 60_000, intervalMs: 20, what: 'the second approver blocked' },
        );
      }
      return tx.query<R>(sql, params);
    },
  });
  return {
    query: (sql, params) => db.query(sql, params),
    transaction: (work) => db.transaction((tx) => work(wrap(tx))),
    close: async () => {},
  };
}

const quietLogger = () => ({ error: vi.fn(), warn: vi.fn() });

describe.each(sqlAdapters)('approve and withdraw are all-or-nothing on the $name adapter', (adapter) => {
  let drop: () => Promise<void>;
  let truth: PgSqlClient;
  let db: SqlClient;
  let closeAdapter: () => Promise<void>;

  beforeAll(async () => {
    const database = await createTestDatabase();
    drop = database.drop;
    truth = new PgSqlClient({ connectionString: database.url });
    // The commands run as the tasks API's own role: its grants must cover both writes.
    const opened = await adapter.open(database.urlAs('tasksApi'));
    db = opened.db;
    closeAdapter = opened.close;
  });
  afterAll(async () => {
    await closeAdapter();
    await truth.close();
    await drop();
  });

  const newTask = async () => (await createTask({ title: 'Atomic', assignee: 'ana' }, { db })).taskId;

  it('approveTask commits the approved task and one content.approved row at the new version', async () => {
    const taskId = await newTask();
    const at = new Date('2026-03-01T10:00:00.123Z');
    const eventId = crypto.randomUUID();

    const change = await approveTask(
      { taskId, approvedBy: 'rita' },
      { db, ids: () => eventId, clock: () => at },
    );

    expect(change.eventId).toBe(eventId);
    expect(change.task).toMatchObject({
      taskId,
      status: 'approved',
      version: 2,
      reviewer: 'rita',
      approvedAt: at,
    });
    const rows = (await outboxRows(truth)).filter((r) => r.aggregate_id === taskId);
    expect(rows).toEqual([
      {
        event_id: eventId,
        event_type: 'content.approved',
        aggregate_id: taskId,
        aggregate_version: 2,
        status: 'pending',
        payload: {
          taskId,
          version: 2,
          title: 'Atomic',
          assignee: 'ana',
          reviewer: 'rita',
          approvedAt: '2026-03-01T10:00:00.123Z',
        },
      },
    ]);
    expect(contentApprovedData.safeParse(rows[0]?.payload).success).toBe(true);
  });

  it('approveTask throws NOT_FOUND for an unknown task and CONFLICT with currentStatus for an approved one', async () => {
    const taskId = await newTask();
    await approveTask({ taskId, approvedBy: 'rita' }, { db });

    const unknown = approveTask({ taskId: crypto.randomUUID(), approvedBy: 'rita' }, { db });
    const again = approveTask({ taskId, approvedBy: 'sam' }, { db });

    // Both expectations hold their promise from the start: awaited one after the other, the
    // second's rejection could land first with no handler (an unhandled rejection in CI).
    await Promise.all([
      expect(unknown).rejects.toMatchObject({ code: 'NOT_FOUND' }),
      expect(again).rejects.toMatchObject({ code: 'CONFLICT', details: { currentStatus: 'approved' } }),
    ]);
  });

  it.each<[string, Fault]>([
    ['the outbox INSERT throws', { statement: /INSERT INTO outbox/, when: 'before' }],
    ['the outbox INSERT runs and then the call fails', { statement: /INSERT INTO outbox/, when: 'after' }],
    ['the task UPDATE runs and then the call fails', { statement: /UPDATE tasks/, when: 'after' }],
  ])('an approve fails with a 500 and leaves neither change when %s', async (_label, fault) => {
    const taskId = await newTask();
    const nudger = { nudge: vi.fn(async () => {}) };
    const logger = quietLogger();
    const api = createTasksApi({ db: failingAt(db, fault), nudger, logger });

    const res = await callApi(api, jsonRequest('POST', `/tasks/${taskId}/approve`, { approvedBy: 'rita' }));

    expect(res.status).toBe(500);
    expect(res.body).toEqual({ error: 'internal error' });
    expect(logger.error).toHaveBeenCalledOnce();
    expect(nudger.nudge).not.toHaveBeenCalled();
    expect(await taskState(truth, taskId)).toEqual({ status: 'pending_review', version: 1, reviewer: null });
    expect((await outboxRows(truth)).filter((r) => r.aggregate_id === taskId)).toEqual([]);
    // The rollback released the row: a clean retry succeeds.
    await expect(approveTask({ taskId, approvedBy: 'rita' }, { db })).resolves.toMatchObject({
      task: { version: 2 },
    });
  });

  it('a withdraw whose outbox INSERT throws leaves the task approved and writes no event', async () => {
    const taskId = await newTask();
    await approveTask({ taskId, approvedBy: 'rita' }, { db });

    const attempt = withdrawTask(
      { taskId, withdrawnBy: 'rita' },
      { db: failingAt(db, { statement: /INSERT INTO outbox/, when: 'before' }) },
    );

    await expect(attempt).rejects.toThrow(/injected fault/);
    expect(await taskState(truth, taskId)).toEqual({ status: 'approved', version: 2, reviewer: 'rita' });
    const types = (await outboxRows(truth)).filter((r) => r.aggregate_id === taskId).map((r) => r.event_type);
    expect(types).toEqual(['content.approved']);
  });

  it('of two concurrent approves of one task exactly one answers 200, the other 409, with one outbox row', async () => {
    const taskId = await newTask();
    const api = createTasksApi({
      db: holdingFirstApproval(db, truth),
      nudger: { nudge: async () => {} },
      logger: quietLogger(),
    });
    const approve = (by: string) =>
      callApi(api, jsonRequest('POST', `/tasks/${taskId}/approve`, { approvedBy: by }));

    const answers = await Promise.all([approve('rita'), approve('sam')]);

    expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
    const winner = answers.find((a) => a.status === 200);
    const loser = answers.find((a) => a.status === 409);
    expect(loser?.body).toEqual({ error: expect.any(String), currentStatus: 'approved' });
    const rows = (await outboxRows(truth)).filter((r) => r.aggregate_id === taskId);
    expect(rows.map((r) => r.event_id)).toEqual([winner?.body.eventId]);
    expect(await taskState(truth, taskId)).toMatchObject({ status: 'approved', version: 2 });
  });
});
