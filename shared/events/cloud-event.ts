import { eventSource } from './event-types';

/** An outbox row as the relay hands it to a publisher. */
export interface OutboundEvent {
  readonly eventId: string;
  readonly eventType: string;
  readonly aggregateId: string;
  readonly aggregateVersion: number;
  readonly payload: unknown;
  readonly createdAt: Date;
}

/** The CloudEvents 1.0 structured-mode JSON object for one outbox row. */
export interface CloudEvent {
  readonly specversion: '1.0';
  readonly id: string;
  readonly source: string;
  readonly type: string;
  readonly subject: string;
  readonly time: string;
  readonly datacontenttype: 'application/json';
  readonly data: unknown;
}

/**
 * Builds the CloudEvent for an outbox row: `id` is the outbox event id (the consumers'
 * idempotency identity, stable across re-publishes), `subject` the task id.
 */
export function toCloudEvent(event: OutboundEvent, source: string = eventSource): CloudEvent {
  return {
    specversion: '1.0',
    id: event.eventId,
    source,
    type: event.eventType,
    subject: event.aggregateId,
    time: event.createdAt.toISOString(),
    datacontenttype: 'application/json',
    data: event.payload,
  };
}
