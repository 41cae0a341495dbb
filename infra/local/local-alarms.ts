import type { SqlClient } from '../../shared/db/sql-client';
import { sqlParam } from '../../shared/db/sql-client';
import type { OutboxStats } from '../../shared/outbox/outbox-store';
import { type AlarmThresholds, type ConsumerName, topology } from '../../shared/topology';

/** One consumer's inbox, by state. */
export interface InboxCounts {
  readonly processed: number;
  readonly inProgress: number;
  readonly failed: number;
  readonly dead: number;
}

/** What the local effects have done, read from their own stores. */
export interface EffectCounts {
  readonly indexDocuments: number;
  readonly notificationsSent: number;
  readonly distinctNotifiedEvents: number;
  readonly archivedObjects: number;
}

export type AlarmState = 'OK' | 'ALARM';

/** `GET /ops/status`: the figures the CloudWatch alarms watch on AWS, evaluated locally. */
export interface OpsStatus {
  readonly tasks: Record<string, number>;
  readonly outbox: OutboxStats;
  readonly consumers: Record<ConsumerName, InboxCounts>;
  readonly effects: EffectCounts;
  readonly deadLetters: number;
  readonly alarms: Record<string, AlarmState>;
  readonly relay: { readonly lastRunAt: string | null; readonly errors: number };
}

/** Task counts by status, every status present (zero when none). */
export async function taskCounts(db: SqlClient): Promise<Record<string, number>> {
  const { rows } = await db.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM tasks GROUP BY status',
  );
  const counts: Record<string, number> = { pending_review: 0, approved: 0, rejected: 0, withdrawn: 0 };
  for (const r of rows) counts[r.status] = r.n;
  return counts;
}

export interface AlarmInputs {
  readonly outbox: OutboxStats;
  readonly consumers: Record<ConsumerName, InboxCounts>;
  readonly deadLetters: number;
  readonly relayErrors: number;
  readonly relayLastRunAt: Date | undefined;
  readonly now: Date;
  /** When the runtime started: a relay that has not run yet is not silent before one period. */
  readonly startedAt: Date;
}

/**
 * The topology's alarms evaluated on live figures, mirroring the CloudWatch alarms: a silent
 * relay (no run for two schedule periods) alarms like missing data does on AWS.
 */
export function evaluateAlarms(
  input: AlarmInputs,
  thresholds: AlarmThresholds = topology.alarms,
): Record<string, AlarmState> {
  const state = (breaching: boolean): AlarmState => (breaching ? 'ALARM' : 'OK');
  const silentAfterMs = 2 * topology.relay.scheduleSeconds * 1_000;
  const lastSign = input.relayLastRunAt ?? input.startedAt;
  const alarms: Record<string, AlarmState> = {
    oldestPendingAge: state(input.outbox.oldestPendingAgeSeconds > thresholds.oldestPendingAgeSeconds),
    outboxDead: state(input.outbox.dead >= thresholds.deadEvents),
    relayErrors: state(input.relayErrors >= thresholds.relayErrors),
    relaySilent: state(input.now.getTime() - lastSign.getTime() > silentAfterMs),
    deadLetters: state(input.deadLetters >= thresholds.dlqMessages),
  };
  for (const [name, counts] of Object.entries(input.consumers)) {
    alarms[`${name}InboxDead`] = state(counts.dead >= thresholds.consumerDeadRecords);
  }
  return alarms;
}

/** A row of the latest-events list and of a task's trace. */
export interface EventRow {
  readonly eventId: string;
  readonly eventType: string;
  readonly taskId: string;
  readonly version: number;
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
  status: r.status,
  attempts: r.attempts,
  createdAt: r.created_at.toISOString(),
  deliveredAt: r.delivered_at?.toISOString() ?? null,
  lastError: r.last_error,
});

const eventColumns =
  'event_id, event_type, aggregate_id, aggregate_version, status, attempts, created_at, delivered_at, last_error';

/** The newest outbox events. */
export async function latestEvents(db: SqlClient, limit = 20): Promise<EventRow[]> {
  const { rows } = await db.query<OutboxRow>(
    `SELECT ${eventColumns} FROM outbox ORDER BY created_at DESC LIMIT :limit`,
    { limit: Math.min(Math.max(1, limit), 500) },
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
