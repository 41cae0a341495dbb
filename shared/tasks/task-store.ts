import type { SqlExecutor } from '../db/sql-client';
import { sqlParam } from '../db/sql-client';
import { PipelineError } from '../errors';

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
  [k: string]: unknown;
}

// Listed once so every statement returns the same shape; the port decodes timestamps to Date.
const taskColumns = `task_id, title, body, assignee, status, version, reviewer, created_at, updated_at,
  approved_at, withdrawn_at, withdrawn_by, withdraw_reason`;

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

/** Reads one task, or `null` when there is none: callers decide whether absence is an error. */
export async function findTask(db: SqlExecutor, taskId: string): Promise<Task | null> {
  const { rows } = await db.query<TaskRow>(`SELECT ${taskColumns} FROM tasks WHERE task_id = :taskId`, {
    taskId: sqlParam.uuid(taskId),
  });
  const row = rows[0];
  return row ? decodeTask(row) : null;
}

/**
 * Approves the task only if it is still `pending_review`, returning the new row or `null`.
 * The status test is in the UPDATE itself: a concurrent approver blocks on the row lock, then
 * PostgreSQL re-checks the WHERE against the committed row and updates nothing, so two
 * approvals can never both succeed (no read-then-write window).
 */
export async function approvePendingTask(
  tx: SqlExecutor,
  change: { taskId: string; reviewer: string; at: Date },
): Promise<Task | null> {
  const { rows } = await tx.query<TaskRow>(
    `UPDATE tasks
        SET status = 'approved', version = version + 1, reviewer = :reviewer,
            approved_at = :at, updated_at = :at
      WHERE task_id = :taskId AND status = 'pending_review'
      RETURNING ${taskColumns}`,
    { taskId: sqlParam.uuid(change.taskId), reviewer: change.reviewer, at: sqlParam.timestamp(change.at) },
  );
  return rows[0] ? decodeTask(rows[0]) : null;
}

/**
 * Withdraws the task only if it is `pending_review` or `approved`, returning the new row or
 * `null`; conditional in one statement for the same reason as {@link approvePendingTask}.
 */
export async function withdrawOpenTask(
  tx: SqlExecutor,
  change: { taskId: string; withdrawnBy: string; reason: string | null; at: Date },
): Promise<Task | null> {
  const { rows } = await tx.query<TaskRow>(
    `UPDATE tasks
        SET status = 'withdrawn', version = version + 1, withdrawn_by = :withdrawnBy,
            withdraw_reason = :reason, withdrawn_at = :at, updated_at = :at
      WHERE task_id = :taskId AND status IN ('pending_review', 'approved')
      RETURNING ${taskColumns}`,
    {
      taskId: sqlParam.uuid(change.taskId),
      withdrawnBy: change.withdrawnBy,
      reason: change.reason,
      at: sqlParam.timestamp(change.at),
    },
  );
  return rows[0] ? decodeTask(rows[0]) : null;
}
