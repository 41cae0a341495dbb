import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { PgSqlClient } from '../../shared/db/pg-client';
import type { Row, SqlClient, SqlParams } from '../../shared/db/sql-client';
import { PipelineError } from '../../shared/errors';
import { contentApprovedData } from '../../shared/events/schemas';
import { retryAfterSeconds } from '../../shared/http/unavailable';
import { approveTask, createTask, withdrawTask } from '../../shared/tasks/commands';
import { createTasksApi } from '../../shared/tasks/tasks-api';
import { createTestDatabase } from '../support/database';
import { sqlAdapters } from '../support/sql-adapters';
import { waitFor } from '../support/wait-for';
import { asCaller, callApi, jsonRequest, outboxRows, taskState } from './tasks-api-harness';

/**
 * Wraps `db` so that the change statement (the one that appends to the outbox) fails as the
 * network would: `before` it reaches the database (never ran), or `after` it ran and committed
 * (its answer lost). No SQLSTATE: the database itself refused nothing.
 */
function losingChange(db: SqlClient, when: 'before' | 'after', alsoLoseChecks = false): SqlClient {
  const lost = () => new PipelineError('DB_TRANSIENT', `injected: connection lost ${when} the statement`);
  return {
    async query<R extends Row = Row>(sql: string, params?: SqlParams) {
      const change = /INSERT INTO outbox/.test(sql);
      if ((change && when === 'before') || (!change && alsoLoseChecks)) throw lost();
      const result = await db.query<R>(sql, params);
      if (change) throw lost();
      return result;
    },
    transaction: (work) => db.transaction(work),
    close: async () => {},
  };
}

/** Installs, for the length of `work`, a trigger that refuses every outbox INSERT with a SQL error. */
async function refusingOutboxInserts<T>(owner: SqlClient, work: () => Promise<T>): Promise<T> {
  await owner.query(`CREATE FUNCTION refuse_event() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'injected: event refused' USING ERRCODE = 'P0001'; END $$`);
  await owner.query(
    'CREATE TRIGGER refuse_event BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION refuse_event()',
  );
  try {
    return await work();
  } finally {
    await owner.query('DROP TRIGGER refuse_event ON outbox');
    await owner.query('DROP FUNCTION refuse_event()');
  }
}

/**
 * Holds every approval inside its statement, after its UPDATE took the task's row lock and
 * before its event is inserted, until `release`: an outbox trigger waits on an advisory lock the
 * test holds on a connection of its own. That forces the interleaving the conditional UPDATE
 * must survive: the second approver queued on the first one's row lock.
 */
async function holdingApprovals(owner: string) {
  const holder = new pg.Client({ connectionString: owner });
  await holder.connect();
  await holder.query("SELECT pg_advisory_lock(hashtext('hold approvals'))");
  await holder.query(`CREATE FUNCTION hold_event() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_advisory_xact_lock_shared(hashtext('hold approvals')); RETURN NEW; END $$`);
  await holder.query(
    'CREATE TRIGGER hold_event BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION hold_event()',
  );
  return {
    /** Resolves once `n` sessions of this database wait on a lock (the advisory one or a row's). */
    waiting: (n: number) =>
      waitFor(
        () =>
          holder.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          ),
        ({ rows }) => (rows[0]?.n ?? 0) >= n,
        // Another session's lock wait can only be read, not awaited: a bound on a session that
        // never blocks (it blocks within milliseconds).
        { timeoutMs: 60_000, intervalMs: 20, what: `${n} sessions waiting on a lock` },
      ),
    async release() {
      await holder.query("SELECT pg_advisory_unlock(hashtext('hold approvals'))");
    },
    async close() {
      await holder.query('DROP TRIGGER IF EXISTS hold_event ON outbox');
      await holder.query('DROP FUNCTION IF EXISTS hold_event()');
      await holder.end();
    },
  };
}

const quietLogger = () => ({ error: vi.fn(), warn: vi.fn() });

describe.each(sqlAdapters)('approve and withdraw are all-or-nothing on the $name adapter', (adapter) => {
  let drop: () => Promise<void>;
  let ownerUrl: string;
  let truth: PgSqlClient;
  let db: SqlClient;
  let closeAdapter: () => Promise<void>;

  beforeAll(async () => {
    const database = await createTestDatabase();
    drop = database.drop;
    ownerUrl = database.url;
    truth = new PgSqlClient({ connectionString: database.url });
    // The commands run as the tasks API's own role: its grants must cover both writes.
    const opened = await adapter.open(database.urlAs('tasksApi'), 'tasksApi');
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

  it('an approve the database refuses (its event cannot be inserted) answers 500 and leaves neither change', async () => {
    const taskId = await newTask();
    const nudger = { nudge: vi.fn(async () => {}) };
    const logger = quietLogger();
    const api = createTasksApi({ db, nudger, logger });

    const res = await refusingOutboxInserts(truth, () =>
      callApi(api, jsonRequest('POST', `/tasks/${taskId}/approve`, {})),
    );

    expect(res.status).toBe(500);
    expect(res.body).toEqual({ error: 'internal error' });
    expect(logger.error).toHaveBeenCalledOnce();
    expect(nudger.nudge).not.toHaveBeenCalled();
    expect(await taskState(truth, taskId)).toEqual({ status: 'pending_review', version: 1, reviewer: null });
    expect((await outboxRows(truth)).filter((r) => r.aggregate_id === taskId)).toEqual([]);
    // Nothing was left locked: a clean retry succeeds.
    await expect(approveTask({ taskId, approvedBy: 'rita' }, { db })).resolves.toMatchObject({
      task: { version: 2 },
    });
  });

  it('an approve whose connection is lost before the statement answers 503 with Retry-After and changes nothing', async () => {
    const taskId = await newTask();
    const logger = quietLogger();
    const api = createTasksApi({ db: losingChange(db, 'before'), nudger: { nudge: async () => {} }, logger });

    const res = await callApi(api, jsonRequest('POST', `/tasks/${taskId}/approve`, {}));

    // The database was unavailable: the same request may succeed later, and the answer says so.
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe(String(retryAfterSeconds));
    expect(await taskState(truth, taskId)).toEqual({ status: 'pending_review', version: 1, reviewer: null });
    expect((await outboxRows(truth)).filter((r) => r.aggregate_id === taskId)).toEqual([]);
  });

  it('an approve whose statement committed but whose answer was lost answers 200: its own event proves it', async () => {
    const taskId = await newTask();
    const eventId = crypto.randomUUID();

    const change = await approveTask(
      { taskId, approvedBy: 'rita' },
      { db: losingChange(db, 'after'), ids: () => eventId },
    );

    expect(change).toMatchObject({ eventId, task: { status: 'approved', version: 2 }, relayIdle: true });
    const rows = (await outboxRows(truth)).filter((r) => r.aggregate_id === taskId);
    expect(rows.map((r) => r.event_id)).toEqual([eventId]);
  });

  it('an approve whose answer was lost and whose check cannot reach the database reports the failure (500), never a guess', async () => {
    const taskId = await newTask();

    const attempt = approveTask({ taskId, approvedBy: 'rita' }, { db: losingChange(db, 'after', true) });

    await expect(attempt).rejects.toMatchObject({ code: 'DB_TRANSIENT' });
    // It did commit: the caller's retry gets a 409 naming the approved state, never a second event.
    await expect(approveTask({ taskId, approvedBy: 'rita' }, { db })).rejects.toMatchObject({
      code: 'CONFLICT',
      details: { currentStatus: 'approved' },
    });
  });

  it('a withdraw the database refuses leaves the task approved and writes no event', async () => {
    const taskId = await newTask();
    await approveTask({ taskId, approvedBy: 'rita' }, { db });

    const attempt = refusingOutboxInserts(truth, () => withdrawTask({ taskId, withdrawnBy: 'rita' }, { db }));

    await expect(attempt).rejects.toThrow(/injected: event refused/);
    expect(await taskState(truth, taskId)).toEqual({ status: 'approved', version: 2, reviewer: 'rita' });
    const types = (await outboxRows(truth)).filter((r) => r.aggregate_id === taskId).map((r) => r.event_type);
    expect(types).toEqual(['content.approved']);
  });

  it('of two concurrent approves of one task exactly one answers 200, the other 409, with one outbox row', async () => {
    const taskId = await newTask();
    const hold = await holdingApprovals(ownerUrl);
    try {
      const api = createTasksApi({ db, nudger: { nudge: async () => {} }, logger: quietLogger() });
      const approve = (by: string) =>
        callApi(api, asCaller(jsonRequest('POST', `/tasks/${taskId}/approve`, {}), by));

      const answers = Promise.all([approve('rita'), approve('sam')]);
      // One approver holds the row and waits at its event; the other waits for the row.
      await hold.waiting(2);
      await hold.release();
      const [a, b] = await answers;

      expect([a.status, b.status].sort()).toEqual([200, 409]);
      const winner = [a, b].find((x) => x.status === 200);
      const loser = [a, b].find((x) => x.status === 409);
      expect(loser?.body).toEqual({ error: expect.any(String), currentStatus: 'approved' });
      const rows = (await outboxRows(truth)).filter((r) => r.aggregate_id === taskId);
      expect(rows.map((r) => r.event_id)).toEqual([winner?.body.eventId]);
      expect(await taskState(truth, taskId)).toMatchObject({ status: 'approved', version: 2 });
    } finally {
      await hold.close();
    }
  });
});
