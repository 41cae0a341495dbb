import type { OutboundEvent } from '../events/cloud-event';

/** What became of one event handed to a publisher. */
export type PublishOutcome =
  | { readonly eventId: string; readonly ok: true; readonly busEventId: string }
  | {
      readonly eventId: string;
      readonly ok: false;
      /** True when the same event may succeed later (throttling, internal failure, whole-call error). */
      readonly retryable: boolean;
      readonly errorCode: string;
      readonly errorMessage: string;
    };

/**
 * The EventPublisher port. `publish` returns exactly one outcome per event, in any order,
 * and does not throw for per-event failures: a failed call is reported on each of its events.
 */
export interface EventPublisher {
  publish(events: readonly OutboundEvent[]): Promise<PublishOutcome[]>;
}
