import { randomUUID } from 'node:crypto';
import type { Notification } from '../../shared/effects/notify';

/** A notification for `eventId` (a fresh one by default), as the notify consumer builds it. */
export function notification(eventId: string = randomUUID()): Notification {
  return {
    eventId,
    taskId: randomUUID(),
    version: 2,
    eventType: 'content.approved',
    title: 'T',
    assignee: 'ana',
    reviewer: 'rita',
    approvedAt: '2026-11-30T00:00:00.000Z',
    message: 'm',
  };
}
