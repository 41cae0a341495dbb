import { defineEffect } from '#shared/consumers/define-consumer';
import type { ConsumerEffect } from '#shared/consumers/effect';
import type { Publisher, TopicMessage } from '#shared/consumers/resources';
import { eventTypes } from '#shared/events/event-types';
import type { PipelineCloudEvent } from '#shared/events/schemas';
import { callerDisplayName } from '#shared/http/caller';
import { notify } from './consumer';

/**
 * One notification: who should hear about which decision (an approval or a rejection, with its
 * reason). `eventId` is its idempotency key; `reviewer` is who decided, as a person reads it
 * (`callerDisplayName`): subscribers are told a name, never the reviewer's IAM ARN.
 */
export type Notification = {
  readonly eventId: string;
  readonly taskId: string;
  readonly version: number;
  readonly title: string;
  readonly assignee: string | null;
  readonly reviewer: string;
  readonly message: string;
} & (
  | { readonly eventType: typeof eventTypes.approved; readonly approvedAt: string }
  | {
      readonly eventType: typeof eventTypes.rejected;
      readonly rejectedAt: string;
      readonly reason: string;
    }
);

/**
 * The notification for an approval or a rejection (the events routed to notify): the assignee
 * hears that their content goes out, or why it does not.
 */
export function notificationFor(event: PipelineCloudEvent): Notification {
  if (event.type === eventTypes.rejected) {
    const d = event.data;
    const reviewer = callerDisplayName(d.reviewer);
    return {
      eventId: event.id,
      taskId: d.taskId,
      version: d.version,
      eventType: event.type,
      title: d.title,
      assignee: d.assignee,
      reviewer,
      rejectedAt: d.rejectedAt,
      reason: d.reason,
      message: `"${d.title}" was rejected by ${reviewer}: ${d.reason}${d.assignee ? `; assigned to ${d.assignee}` : ''}`,
    };
  }
  if (event.type !== eventTypes.approved) {
    throw new TypeError(`notify has no notification for ${event.type}`);
  }
  const d = event.data;
  const reviewer = callerDisplayName(d.reviewer);
  return {
    eventId: event.id,
    taskId: d.taskId,
    version: d.version,
    eventType: event.type,
    title: d.title,
    assignee: d.assignee,
    reviewer,
    approvedAt: d.approvedAt,
    message: `"${d.title}" was approved by ${reviewer}${d.assignee ? `; assigned to ${d.assignee}` : ''}`,
  };
}

/**
 * The topic message of a notification: the event id is its idempotency key (a FIFO topic
 * dedupes on it for 5 minutes; subscribers of a standard topic dedupe on the `eventId`
 * attribute), the task id its group (one task's notifications stay in order on a FIFO topic).
 */
export function messageFor(n: Notification): TopicMessage {
  return {
    id: n.eventId,
    group: n.taskId,
    subject: `${n.eventType === eventTypes.rejected ? 'Rejected: ' : 'Approved: '}${n.title}`,
    body: n,
    attributes: {
      eventId: n.eventId,
      taskId: n.taskId,
      eventType: n.eventType,
      assignee: n.assignee,
      reviewer: n.reviewer,
    },
  };
}

/** The notify consumer's effect: send the decision's notification once per topic's own dedupe. */
export function notifyEffect(publisher: Publisher): ConsumerEffect {
  return async (event) => {
    const outcome = await publisher.publish(messageFor(notificationFor(event)));
    return { outcome };
  };
}

/** The notify consumer's effect over its notification topic (SNS on AWS, a JSON-lines file locally). */
export const effect = defineEffect(notify, ({ notifications }) => notifyEffect(notifications));
