import type { BusEvent } from '../../../shared/events/bus-event';
import type { DeadLetter } from '../../../shared/ops/ops-ports';

export type { BusEvent } from '../../../shared/events/bus-event';

import type { ConsumerName } from '../../../shared/topology';

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
