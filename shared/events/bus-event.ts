import { type OutboundEvent, toCloudEvent } from './cloud-event';
import { eventSource } from './event-types';

/**
 * The event a Lambda target receives from EventBridge: the fields every event on a bus carries
 * (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-events-structure.html).
 */
export interface BusEvent {
  readonly version: '0';
  readonly id: string;
  readonly 'detail-type': string;
  readonly source: string;
  readonly account: string;
  readonly time: string;
  readonly region: string;
  readonly resources: string[];
  readonly detail: Record<string, unknown>;
}

/** Where a bus is: the account and Region EventBridge writes into every event on it. */
export interface BusIdentity {
  readonly account: string;
  readonly region: string;
}

/** The account and Region the local bus writes into every event (no account of anyone's). */
export const localBusIdentity: BusIdentity = { account: '000000000000', region: 'us-east-1' };

/** An event's `time` as EventBridge writes it: the entry's `Time`, to the second. */
export const eventBridgeTime = (time: Date): string => `${time.toISOString().slice(0, 19)}Z`;

/**
 * The bus event a target received for outbox row `event`, which the relay published as
 * `busEventId`: the same `Source`, `DetailType`, `Detail` (its CloudEvent) and `Time` the relay's
 * PutEvents entry gave, so it routes as that event did and a consumer reads the same payload
 * (the inbox's payload hash is the CloudEvent's). What the delivery audit routes and re-sends.
 */
export function deliveredBusEvent(
  event: OutboundEvent,
  busEventId: string,
  where: BusIdentity,
  source: string = eventSource,
): BusEvent {
  return {
    version: '0',
    id: busEventId,
    'detail-type': event.eventType,
    source,
    account: where.account,
    time: eventBridgeTime(event.createdAt),
    region: where.region,
    resources: [],
    detail: toCloudEvent(event, source) as unknown as Record<string, unknown>,
  };
}
