import { type SqlExecutor, type SqlParams, sqlParam } from '../db/sql-client';
import { PipelineError } from '../errors';
import { eventTypes } from '../events/event-types';
import { payloadSql } from '../events/schemas';

/** The lifecycle states a task can be in; the `tasks.status` CHECK constraint allows exactly these. */
export type TaskStatus = 'pending_review' | 'approved' | 'rejected' | 'withdrawn';

/** A task as the domain sees it: one flat object, timestamps as `Date`, absent values as `null`. */
export interface Task {
  readonly taskId: string;
  readonly title: string;
  readonly body: string | null;
  readonly assignee: string | null;
  readonly status: TaskStatus;
  /** Bumped by every change; events carry it so consumers can drop stale ones. */
  readonly version: number;
  readonly reviewer: string | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  readonly approvedAt: Date | null;
  readonly withdrawnAt: Date | null;
  readonly withdrawnBy: string | null;
  readonly withdrawReason: string | null;
  /** When a reviewer (recorded in `reviewer`) rejected it, and why. */
  readonly rejectedAt: Date | null;
  readonly rejectReason: string | null;
}

/** A task as the API returns it: the same flat shape with ISO-8601 timestamps, so JSON round-trips it. */
export type TaskJson = {
  readonly [K in keyof Task]: Task[K] extends Date
    ? string
    : Task[K] extends Date | null
      ? string | null
      : Task[K];
};

interface TaskRow {
  task_id: string;
  title: string;
  body: string | null;
  assignee: string | null;
  status: TaskStatus;
  version: number;
  reviewer: string | null;
  created_at: Date;
  updated_at: Date;
  approved_at: Date | null;
  withdrawn_at: Date | null;
  withdrawn_by: string | null;
  withdraw_reason: string | null;
  rejected_at: Date | null;
  reject_reason: string | null;
  [k: string]: unknown;
}

// Listed once so every statement returns the same shape; the port decodes timestamps to Date.
const taskColumns = `task_id, title, body, assignee, status, version, reviewer, created_at, updated_at,
  approved_at, withdrawn_at, withdrawn_by, withdraw_reason, rejected_at, reject_reason`;

function decodeTask(row: TaskRow): Task {
  return {
    taskId: row.task_id,
    title: row.title,
    body: row.body,
    assignee: row.assignee,
    status: row.status,
    version: row.version,
    reviewer: row.reviewer,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    approvedAt: row.approved_at,
    withdrawnAt: row.withdrawn_at,
    withdrawnBy: row.withdrawn_by,
    withdrawReason: row.withdraw_reason,
    rejectedAt: row.rejected_at,
    rejectReason: row.reject_reason,
  };
}

const iso = (d: Date | null): string | null => (d === null ? null : d.toISOString());

/** Converts a task to its API form, so every caller (HTTP, ops CLI) renders timestamps the same way. */
export function toTaskJson(task: Task): TaskJson {
  return {
    ...task,
    createdAt: task.createdAt.toISOString(),
    updatedAt: task.updatedAt.toISOString(),
    approvedAt: iso(task.approvedAt),
    withdrawnAt: iso(task.withdrawnAt),
    rejectedAt: iso(task.rejectedAt),
  };
}

/** Inserts a new task in `pending_review` at version 1 (the column defaults) and returns it. */
export async function insertTask(
  db: SqlExecutor,
  task: { taskId: string; title: string; body: string | null; assignee: string | null },
): Promise<Task> {
  // A fresh random id can only conflict with this very insert sent again (the Data API's SDK
  // resends a statement whose answer was lost): the row is then the one it wrote.
  const { rows } = await db.query<TaskRow>(
    `INSERT INTO tasks (task_id, title, body, assignee)
     VALUES (:taskId, :title, :body, :assignee)
     ON CONFLICT (task_id) DO NOTHING
     RETURNING ${taskColumns}`,
    { taskId: sqlParam.uuid(task.taskId), title: task.title, body: task.body, assignee: task.assignee },
  );
  const inserted = rows[0];
  if (inserted) return decodeTask(inserted);
  const existing = await findTask(db, task.taskId);
  if (
    existing &&
    existing.title === task.title &&
    existing.body === task.body &&
    existing.assignee === task.assignee
  )
    return existing;
  throw new PipelineError('DB_CONSTRAINT', `task ${task.taskId} already exists`, {
    constraint: 'tasks_pkey',
  });
}

/** A create under an idempotency key: the key, and the hash of the request it came with. */
export interface IdempotentCreate {
  readonly key: string;
  /** SHA-256 (hex) of the create request: another request under the same key is refused. */
  readonly requestHash: string;
}

/** What a create under a key found: the task it made, the task an earlier create under the key made, or another request's key. */
export type KeyedInsert =
  | { readonly outcome: 'created' | 'replayed'; readonly task: Task }
  | { readonly outcome: 'key-reused' };

type KeyedRow = TaskRow & { request_hash: string };

/**
 * Inserts a new task under `key` unless one already has that key, in one statement: the INSERT
 * (`ON CONFLICT DO NOTHING`: the unique index on the key refuses a second task, and the statement
 * waits for a create of the same key in flight to commit or roll back) and, when it inserted
 * nothing, the task holding the key. The row tells the outcome: this create's task id (its own
 * row, also when the Data API's SDK resent the INSERT after an answer it lost), another task id
 * with this request's hash (a retry: replayed), or another hash (the key reused for another
 * request: nothing changed).
 *
 * Read committed takes one snapshot per statement, before a create of the same key in flight
 * committed: such a statement inserts nothing and cannot see the row that stopped it
 * (https://www.postgresql.org/docs/current/transaction-iso.html#XACT-READ-COMMITTED). Only then
 * a second statement reads the key again, in a snapshot that has it.
 */
export async function insertTaskOnce(
  db: SqlExecutor,
  task: { taskId: string; title: string; body: string | null; assignee: string | null },
  idempotency: IdempotentCreate,
): Promise<KeyedInsert> {
  const keyParam = { key: idempotency.key };
  const { rows } = await db.query<KeyedRow>(
    `WITH inserted AS (
       INSERT INTO tasks (task_id, title, body, assignee, idempotency_key, request_hash)
       VALUES (:taskId, :title, :body, :assignee, :key, :requestHash)
       ON CONFLICT DO NOTHING
       RETURNING ${taskColumns}, request_hash
     )
     SELECT * FROM inserted
     UNION ALL
     SELECT ${taskColumns}, request_hash FROM tasks
      WHERE idempotency_key = :key AND NOT EXISTS (SELECT 1 FROM inserted)`,
    {
      taskId: sqlParam.uuid(task.taskId),
      title: task.title,
      body: task.body,
      assignee: task.assignee,
      ...keyParam,
      requestHash: idempotency.requestHash,
    },
  );
  const row =
    rows[0] ??
    (
      await db.query<KeyedRow>(
        `SELECT ${taskColumns}, request_hash FROM tasks WHERE idempotency_key = :key`,
        keyParam,
      )
    ).rows[0];
  if (!row) {
    // Nothing inserted and no task holds the key: the id conflicted, which a fresh random id
    // does only with this very insert, which holds the key. Not reached; said if it is.
    throw new PipelineError('DB_CONSTRAINT', `task ${task.taskId} already exists without the key`, {
      constraint: 'tasks_pkey',
    });
  }
  if (row.task_id === task.taskId) return { outcome: 'created', task: decodeTask(row) };
  if (row.request_hash !== idempotency.requestHash) return { outcome: 'key-reused' };
  return { outcome: 'replayed', task: decodeTask(row) };
}

/** Reads one task, or `null` when there is none: callers decide whether absence is an error. */
export async function findTask(db: SqlExecutor, taskId: string): Promise<Task | null> {
  const { rows } = await db.query<TaskRow>(`SELECT ${taskColumns} FROM tasks WHERE task_id = :taskId`, {
    taskId: sqlParam.uuid(taskId),
  });
  const row = rows[0];
  return row ? decodeTask(row) : null;
}

/** What a task change committed: the new row, and whether the relay looked idle to it. */
export interface CommittedChange {
  readonly task: Task;
  /**
   * No relay run held the run lease when the change committed (`relay_lease` slot 0 free or
   * lapsed): the caller nudges the relay. A run that held it drains this event, or, having
   * released the lease meanwhile, finds it after waiting for this transaction to end (see
   * migration 0007, `relay_writers_in_flight`).
   */
  readonly relayIdle: boolean;
}

/**
 * The event payload of each change, built in SQL from the row the UPDATE returned, so the
 * change and its event are one statement: the expression `payloadSql` makes of the payload's
 * one declaration (`eventPayloads`, shared/events/schemas.ts), which the contract's zod schemas
 * are made of too.
 */
const payloads = {
  approved: payloadSql(eventTypes.approved),
  withdrawn: payloadSql(eventTypes.withdrawn),
  rejected: payloadSql(eventTypes.rejected),
} as const;

/**
 * One statement: the conditional UPDATE, the INSERT of its event at the new version (a
 * data-modifying CTE runs exactly once and commits or rolls back with the statement:
 * https://www.postgresql.org/docs/current/queries-with.html#QUERIES-WITH-MODIFYING), and the
 * relay lease read. The status test is in the UPDATE itself: a concurrent change blocks on
 * the row lock, then PostgreSQL re-checks the WHERE against the committed row and updates
 * nothing, so two changes can never both succeed (no read-then-write window). On the Data API
 * that is one call, not four (BeginTransaction, UPDATE, INSERT, CommitTransaction).
 */
async function changeAndAppend(
  db: SqlExecutor,
  update: { readonly set: string; readonly from: string },
  event: { readonly eventId: string; readonly eventType: string; readonly payload: string },
  params: SqlParams,
): Promise<CommittedChange | null> {
  const { rows } = await db.query<TaskRow & { relay_idle: boolean }>(
    `WITH changed AS (
       UPDATE tasks SET ${update.set}, version = version + 1
        WHERE task_id = :taskId AND ${update.from}
       RETURNING ${taskColumns}
     ),
     appended AS (
       INSERT INTO outbox (event_id, event_type, aggregate_id, aggregate_version, payload)
       SELECT :eventId, :eventType, task_id, version, ${event.payload} FROM changed
     )
     SELECT changed.*,
            NOT EXISTS (SELECT 1 FROM relay_lease
                         WHERE slot = 0 AND owner IS NOT NULL AND lease_until >= now()) AS relay_idle
       FROM changed`,
    { ...params, eventId: sqlParam.uuid(event.eventId), eventType: event.eventType },
  );
  const row = rows[0];
  return row ? { task: decodeTask(row), relayIdle: row.relay_idle } : null;
}

/**
 * Approves the task if it is still `pending_review` and appends its `content.approved` event
 * `eventId`, in one statement; `null` when the task was not pending review (or not there).
 */
export function approveAndAppend(
  db: SqlExecutor,
  change: { taskId: string; reviewer: string; at: Date; eventId: string },
): Promise<CommittedChange | null> {
  return changeAndAppend(
    db,
    {
      set: "status = 'approved', reviewer = :reviewer, approved_at = :at, updated_at = :at",
      from: "status = 'pending_review'",
    },
    { eventId: change.eventId, eventType: eventTypes.approved, payload: payloads.approved },
    { taskId: sqlParam.uuid(change.taskId), reviewer: change.reviewer, at: sqlParam.timestamp(change.at) },
  );
}

/**
 * Withdraws the task if it is `pending_review` or `approved` and appends its
 * `content.withdrawn` event `eventId`, in one statement; `null` from any other state.
 */
export function withdrawAndAppend(
  db: SqlExecutor,
  change: { taskId: string; withdrawnBy: string; reason: string | null; at: Date; eventId: string },
): Promise<CommittedChange | null> {
  return changeAndAppend(
    db,
    {
      set: `status = 'withdrawn', withdrawn_by = :withdrawnBy, withdraw_reason = :reason,
            withdrawn_at = :at, updated_at = :at`,
      from: "status IN ('pending_review', 'approved')",
    },
    { eventId: change.eventId, eventType: eventTypes.withdrawn, payload: payloads.withdrawn },
    {
      taskId: sqlParam.uuid(change.taskId),
      withdrawnBy: change.withdrawnBy,
      reason: change.reason,
      at: sqlParam.timestamp(change.at),
    },
  );
}

/**
 * Rejects the task if it is still `pending_review` and appends its `content.rejected` event
 * `eventId`, in one statement; `null` from any other state. The rejecter is recorded as the
 * task's reviewer: a review ended either way.
 */
export function rejectAndAppend(
  db: SqlExecutor,
  change: { taskId: string; reviewer: string; reason: string; at: Date; eventId: string },
): Promise<CommittedChange | null> {
  return changeAndAppend(
    db,
    {
      set: `status = 'rejected', reviewer = :reviewer, reject_reason = :reason,
            rejected_at = :at, updated_at = :at`,
      from: "status = 'pending_review'",
    },
    { eventId: change.eventId, eventType: eventTypes.rejected, payload: payloads.rejected },
    {
      taskId: sqlParam.uuid(change.taskId),
      reviewer: change.reviewer,
      reason: change.reason,
      at: sqlParam.timestamp(change.at),
    },
  );
}

/** A task as `GET /tasks` lists it: what finds it again, without its body. */
export interface TaskSummary {
  readonly taskId: string;
  readonly title: string;
  readonly assignee: string | null;
  readonly status: TaskStatus;
  readonly version: number;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/**
 * Where a page of {@link listTasks} resumes: the last row's `created_at` to the microsecond (as
 * PostgreSQL's text, so no precision is lost in a JavaScript Date) and its task id.
 */
export interface TaskListKey {
  readonly createdAt: string;
  readonly taskId: string;
}

/** One page of tasks, newest first, and the key of its last row when more may follow. */
export interface TaskPage {
  readonly tasks: readonly TaskSummary[];
  readonly next: TaskListKey | null;
}

/**
 * Tasks newest first, of one status or all, after `after` (exclusive), at most `limit`. Keyset
 * pagination on `(created_at, task_id)`: each page is a backward range scan of
 * `tasks_created_idx` or `tasks_status_created_idx` (migration 0009) reading `limit + 1`
 * entries, whatever the page's depth (OFFSET would read and drop every row before it). The row
 * comparison `(created_at, task_id) < (...)` is one index condition. A task created or changed
 * meanwhile never moves a page's boundary: the key is the creation time, which no change touches.
 */
export async function listTasks(
  db: SqlExecutor,
  page: { readonly status?: TaskStatus; readonly limit: number; readonly after?: TaskListKey },
): Promise<TaskPage> {
  const params: Record<string, SqlParams[string]> = { limit: page.limit + 1 };
  if (page.after) {
    params.afterAt = page.after.createdAt;
    params.afterId = sqlParam.uuid(page.after.taskId);
  }
  // With a status, the key and the order lead with it: `tasks_status_created_idx` is then the
  // one index that yields the order with no sort, so the planner cannot prefer walking
  // `tasks_created_idx` and filtering (reading every other status's rows between two of a rare one).
  if (page.status) params.status = page.status;
  const key = page.status ? 'status, created_at, task_id' : 'created_at, task_id';
  const after = page.status
    ? '(status, created_at, task_id) < (:status, CAST(:afterAt AS timestamptz), :afterId)'
    : '(created_at, task_id) < (CAST(:afterAt AS timestamptz), :afterId)';
  const where = [...(page.status ? ['status = :status'] : []), ...(page.after ? [after] : [])];
  const { rows } = await db.query<TaskRow & { created_key: string }>(
    `SELECT task_id, title, assignee, status, version, created_at, updated_at,
            to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_key
       FROM tasks
      ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
      ORDER BY ${key
        .split(', ')
        .map((c) => `${c} DESC`)
        .join(', ')}
      LIMIT :limit`,
    params,
  );
  const shown = rows.slice(0, page.limit);
  const last = shown[shown.length - 1];
  return {
    tasks: shown.map((r) => ({
      taskId: r.task_id,
      title: r.title,
      assignee: r.assignee,
      status: r.status,
      version: r.version,
      createdAt: r.created_at.toISOString(),
      updatedAt: r.updated_at.toISOString(),
    })),
    next: rows.length > page.limit && last ? { createdAt: last.created_key, taskId: last.task_id } : null,
  };
}

/**
 * A task and whether the event `eventId` exists, in one statement: after a change matched
 * nothing (or its answer was lost), this tells "no such task", "another change won" and "this
 * change did commit" apart. A fresh statement, so it sees what committed since.
 */
export async function taskAndEvent(
  db: SqlExecutor,
  taskId: string,
  eventId: string,
): Promise<{ task: Task | null; eventExists: boolean }> {
  const { rows } = await db.query<TaskRow & { event_exists: boolean }>(
    `SELECT t.*, EXISTS (SELECT 1 FROM outbox WHERE event_id = :eventId) AS event_exists
       FROM (SELECT 1) AS one
       LEFT JOIN (SELECT ${taskColumns} FROM tasks WHERE task_id = :taskId) AS t ON true`,
    { taskId: sqlParam.uuid(taskId), eventId: sqlParam.uuid(eventId) },
  );
  const row = rows[0];
  return {
    task: row && row.task_id !== null ? decodeTask(row) : null,
    eventExists: row?.event_exists === true,
  };
}
