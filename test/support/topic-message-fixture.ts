import { randomUUID } from 'node:crypto';
import type { TopicMessage } from '../../shared/consumers/resources';

/** A topic message with idempotency key `id` (a fresh one by default), shaped as an effect publishes one. */
export function topicMessage(id: string = randomUUID()): TopicMessage {
  const taskId = randomUUID();
  return {
    id,
    group: taskId,
    subject: 'Approved: T',
    body: { eventId: id, taskId, version: 2, title: 'T', message: 'm' },
    attributes: { eventId: id, taskId, assignee: null },
  };
}
