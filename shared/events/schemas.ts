import * as z from 'zod';
import { eventSource, eventTypes } from './event-types';

/**
 * The event contract: what the outbox stores as `payload`, and what a CloudEvent's `data`
 * carries. Minimal by design (ids, version, a short summary), never the task body: a consumer
 * that needs more reads the task through the tasks repository at the version it was told.
 */
export const contentApprovedData = z.object({
  taskId: z.uuid(),
  version: z.number().int().positive(),
  title: z.string().min(1).max(500),
  assignee: z.string().nullable(),
  reviewer: z.string().min(1),
  approvedAt: z.iso.datetime(),
});
export type ContentApprovedData = z.infer<typeof contentApprovedData>;

export const contentWithdrawnData = z.object({
  taskId: z.uuid(),
  version: z.number().int().positive(),
  title: z.string().min(1).max(500),
  withdrawnBy: z.string().min(1),
  reason: z.string().nullable(),
  withdrawnAt: z.iso.datetime(),
});
export type ContentWithdrawnData = z.infer<typeof contentWithdrawnData>;

export const contentRejectedData = z.object({
  taskId: z.uuid(),
  version: z.number().int().positive(),
  title: z.string().min(1).max(500),
  assignee: z.string().nullable(),
  /** Who rejected it: the caller the platform authenticated. */
  reviewer: z.string().min(1),
  reason: z.string().min(1),
  rejectedAt: z.iso.datetime(),
});
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
