import { type SqlClient, sqlParam } from '../db/sql-client';

/** A row of the latest-events list and of a task's trace. */
export interface EventRow {
  readonly eventId: string;
  readonly eventType: string;
  readonly taskId: string;
  readonly version: number;
  readonly title: string | null;
  readonly status: string;
  readonly attempts: number;
  readonly createdAt: string;
  readonly deliveredAt: string | null;
  readonly lastError: string | null;
}

interface OutboxRow {
  event_id: string;
  event_type: string;
  aggregate_id: string;
  aggregate_version: number;
  title: string | null;
  status: string;
  attempts: number;
  created_at: Date;
  delivered_at: Date | null;
  last_error: string | null;
  [k: string]: unknown;
}

const toEventRow = (r: OutboxRow): EventRow => ({
  eventId: r.event_id,
  eventType: r.event_type,
  taskId: r.aggregate_id,
  version: r.aggregate_version,
  title: r.title,
  status: r.status,
  attempts: r.attempts,
  createdAt: r.created_at.toISOString(),
  deliveredAt: r.delivered_at?.toISOString() ?? null,
  lastError: r.last_error,
});

// The title comes from the event's own payload: the relay's role cannot read tasks, and the
// payload is what the consumers saw.
const eventColumns = `event_id, event_type, aggregate_id, aggregate_version, payload->>'title' AS title,
  status, attempts, created_at, delivered_at, last_error`;

/** The largest page of latest events the ops API returns. */
export const maxEventsLimit = 500;

/**
 * Task counts by status, every status present (zero when none): the sums of the sharded
 * counters a trigger keeps on every task write (migration 0007), not a count of the table.
 */
export async function taskCounts(db: SqlClient): Promise<Record<string, number>> {
  const { rows } = await db.query<{ status: string; n: number }>(
    `SELECT substr(name, 7) AS status, sum(n)::float8 AS n
       FROM pipeline_counters WHERE name LIKE 'tasks.%' GROUP BY name`,
  );
  const counts: Record<string, number> = { pending_review: 0, approved: 0, rejected: 0, withdrawn: 0 };
  for (const r of rows) counts[r.status] = r.n;
  return counts;
}

/** The newest outbox events, at most `limit` (1 to `maxEventsLimit`). */
export async function latestEvents(db: SqlClient, limit: number): Promise<EventRow[]> {
  const { rows } = await db.query<OutboxRow>(
    `SELECT ${eventColumns} FROM outbox ORDER BY created_at DESC LIMIT :limit`,
    { limit: Math.min(Math.max(1, Math.trunc(limit)), maxEventsLimit) },
  );
  return rows.map(toEventRow);
}

/** Every outbox event of one task, oldest first. */
export async function taskEvents(db: SqlClient, taskId: string): Promise<EventRow[]> {
  const { rows } = await db.query<OutboxRow>(
    `SELECT ${eventColumns} FROM outbox WHERE aggregate_id = :taskId ORDER BY created_at`,
    { taskId: sqlParam.uuid(taskId) },
  );
  return rows.map(toEventRow);
}

/** True when the task exists. */
export async function taskExists(db: SqlClient, taskId: string): Promise<boolean> {
  const { rows } = await db.query('SELECT 1 AS found FROM tasks WHERE task_id = :taskId', {
    taskId: sqlParam.uuid(taskId),
  });
  return rows.length > 0;
}
