import type { AuditState, ListedFinding } from '../audit/audit-store';
import { HttpError } from '../http/error-responses';
import type { ConsumerName } from '../topology';
import { type OpsContext, opsListLimits } from './ops-context';
import { type EventRow, taskEvents, taskExists } from './ops-queries';

/** `GET /ops/audit`: the audit's state and its open findings, oldest delivery first. */
export interface AuditListing extends AuditState {
  readonly undelivered: Record<ConsumerName, number>;
  readonly findings: readonly ListedFinding[];
}

/** One consumer's inbox state for an event, as a task's trace shows it. */
export interface TraceEntry {
  readonly status: string;
  readonly attempts: number;
  readonly lastError: string | null;
  readonly updatedAt: string;
}

/** A task's way through the pipeline: its events, and each consumer's inbox state for each. */
export interface TaskTrace {
  readonly taskId: string;
  readonly events: readonly (EventRow & { readonly consumers: Record<ConsumerName, TraceEntry | null> })[];
}

/** A task's trace, `GET /ops/tasks/{taskId}/trace`, and the audit's listing, `GET /ops/audit`. */
export function createOpsTrace(ctx: OpsContext) {
  const { db, inbox, audits, consumerNames, auditGraceSeconds } = ctx;

  async function trace(taskId: string): Promise<TaskTrace> {
    if (!(await taskExists(db, taskId))) throw new HttpError(404, `no task ${taskId}`);
    const events = await taskEvents(db, taskId);
    return {
      taskId,
      events: await Promise.all(
        events.map(async (e) => {
          const entries = await Promise.all(
            consumerNames.map(async (c) => {
              const r = await inbox.get({ consumer: c, eventId: e.eventId });
              const entry: TraceEntry | null = r
                ? {
                    status: r.status,
                    attempts: r.attempts,
                    lastError: r.lastError ?? null,
                    updatedAt: new Date(r.updatedAt).toISOString(),
                  }
                : null;
              return [c, entry] as const;
            }),
          );
          return { ...e, consumers: Object.fromEntries(entries) as Record<ConsumerName, TraceEntry | null> };
        }),
      ),
    };
  }

  async function auditListing(consumer: ConsumerName | undefined): Promise<AuditListing> {
    const [state, undelivered, findings] = await Promise.all([
      audits.state(auditGraceSeconds),
      audits.undeliveredCounts(consumerNames),
      audits.list(opsListLimits.audit, { consumer }),
    ]);
    return { ...state, undelivered, findings };
  }

  return { trace, auditListing };
}
