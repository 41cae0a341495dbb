import * as z from 'zod';
import { type EventType, eventSource, eventTypes } from './event-types';

/** One field of an event's payload: its contract (zod) and how the task change's statement builds it (SQL). */
interface PayloadField<S extends z.ZodType> {
  readonly schema: S;
  /** An expression over the `tasks` row the change's UPDATE returned. */
  readonly sql: string;
}
type PayloadFields = Readonly<Record<string, PayloadField<z.ZodType>>>;
type ShapeOf<F extends PayloadFields> = { readonly [K in keyof F]: F[K]['schema'] };

const field = <S extends z.ZodType>(schema: S, sql: string): PayloadField<S> => ({ schema, sql });

/** ISO-8601 in UTC with milliseconds, as `Date.prototype.toISOString` writes it (the contract's `z.iso.datetime()`). */
const isoUtc = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

function shapeOf<F extends PayloadFields>(fields: F): ShapeOf<F> {
  return Object.fromEntries(Object.entries(fields).map(([name, f]) => [name, f.schema])) as ShapeOf<F>;
}

/**
 * Each event's payload, declared once: per field, its contract and the SQL that builds it from
 * the changed task row. The zod schemas below and the statements of `shared/tasks/task-store.ts`
 * (`payloadSql`) are both made from this, so the object the database writes into the outbox and
 * the one a consumer parses cannot drift apart (a property test runs them over generated tasks).
 * Minimal by design (ids, version, a short summary), never the task body: a consumer that needs
 * more reads the task through the tasks repository at the version it was told.
 */
export const eventPayloads = {
  [eventTypes.approved]: {
    taskId: field(z.uuid(), 'task_id'),
    version: field(z.number().int().positive(), 'version'),
    title: field(z.string().min(1).max(500), 'title'),
    assignee: field(z.string().nullable(), 'assignee'),
    reviewer: field(z.string().min(1), 'reviewer'),
    approvedAt: field(z.iso.datetime(), isoUtc('approved_at')),
  },
  [eventTypes.withdrawn]: {
    taskId: field(z.uuid(), 'task_id'),
    version: field(z.number().int().positive(), 'version'),
    title: field(z.string().min(1).max(500), 'title'),
    withdrawnBy: field(z.string().min(1), 'withdrawn_by'),
    reason: field(z.string().nullable(), 'withdraw_reason'),
    withdrawnAt: field(z.iso.datetime(), isoUtc('withdrawn_at')),
  },
  [eventTypes.rejected]: {
    taskId: field(z.uuid(), 'task_id'),
    version: field(z.number().int().positive(), 'version'),
    title: field(z.string().min(1).max(500), 'title'),
    assignee: field(z.string().nullable(), 'assignee'),
    /** Who rejected it: the caller the platform authenticated. */
    reviewer: field(z.string().min(1), 'reviewer'),
    reason: field(z.string().min(1), 'reject_reason'),
    rejectedAt: field(z.iso.datetime(), isoUtc('rejected_at')),
  },
} as const satisfies Readonly<Record<EventType, PayloadFields>>;

/** The `jsonb_build_object(...)` expression of an event type's payload (`eventPayloads`). */
export function payloadSql(type: EventType): string {
  const fields: PayloadFields = eventPayloads[type];
  return `jsonb_build_object(${Object.entries(fields)
    .map(([name, f]) => `'${name}', ${f.sql}`)
    .join(', ')})`;
}

export const contentApprovedData = z.object(shapeOf(eventPayloads[eventTypes.approved]));
export type ContentApprovedData = z.infer<typeof contentApprovedData>;

export const contentWithdrawnData = z.object(shapeOf(eventPayloads[eventTypes.withdrawn]));
export type ContentWithdrawnData = z.infer<typeof contentWithdrawnData>;

export const contentRejectedData = z.object(shapeOf(eventPayloads[eventTypes.rejected]));
export type ContentRejectedData = z.infer<typeof contentRejectedData>;

const envelope = {
  specversion: z.literal('1.0'),
  id: z.uuid(),
  source: z.literal(eventSource),
  subject: z.uuid(),
  time: z.iso.datetime(),
  datacontenttype: z.literal('application/json'),
};

/**
 * A CloudEvents 1.0 JSON object as the pipeline publishes it in an EventBridge `Detail`. Its
 * `subject` is the task the event is about, and must be `data.taskId`: the inbox keeps the
 * subject with each record, and the operator's tools find a task's records by it.
 */
export const pipelineCloudEvent = z
  .discriminatedUnion('type', [
    z.object({ ...envelope, type: z.literal(eventTypes.approved), data: contentApprovedData }),
    z.object({ ...envelope, type: z.literal(eventTypes.withdrawn), data: contentWithdrawnData }),
    z.object({ ...envelope, type: z.literal(eventTypes.rejected), data: contentRejectedData }),
  ])
  .superRefine((event, ctx) => {
    if (event.subject !== event.data.taskId) {
      ctx.addIssue({
        code: 'custom',
        path: ['subject'],
        message: `${event.subject} disagrees with data.taskId ${event.data.taskId}`,
      });
    }
  });
export type PipelineCloudEvent = z.infer<typeof pipelineCloudEvent>;
