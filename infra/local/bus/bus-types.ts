import type { DeadLetter } from '../../../shared/ops/ops-ports';
import type { ConsumerName } from '../../../shared/topology';

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

/** A target of an event: the consumer one rule sends it to. */
export interface BusTarget {
  readonly rule: string;
  readonly consumer: ConsumerName;
}

/** One event on its way to one target, from its first attempt until it succeeds or is dead-lettered. */
export interface TargetDelivery extends BusTarget {
  readonly event: BusEvent;
  readonly firstAttemptAt: number;
}

/** A dead letter of the local bus: the ops API's `DeadLetter`, with the event as the bus keeps it. */
export interface BusDeadLetter extends Omit<DeadLetter, 'event'> {
  readonly event: BusEvent;
}

/** What the bus has done since it started, for tests and benchmarks. */
export interface BusCounters {
  accepted: number;
  rejected: number;
  delivered: number;
  retried: number;
  deadLettered: number;
}
