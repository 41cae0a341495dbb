import type { OpenFigures } from './inbox-ops';

/**
 * One consumer's inbox as an operator watches it, the design's three figures among them: the
 * DEAD count, the oldest `PROCESSING` lease and the retry age of the oldest `FAILED` record.
 * The ops status, the inbox gauges and the local alarms all read it from here.
 */
export interface InboxHealth {
  readonly inProgress: number;
  readonly failed: number;
  readonly dead: number;
  /**
   * Seconds the oldest in-flight attempt has held its record (its lease began then): a consumer
   * stuck mid-effect, or killed with nothing left to take its record over. Null when none is in flight.
   */
  readonly oldestLeaseSeconds: number | null;
  /** Seconds since the first attempt of the oldest `FAILED` record waiting for its next; null when none. */
  readonly oldestRetryAgeSeconds: number | null;
}

const ageSeconds = (since: number | null, now: number): number | null =>
  since === null ? null : Math.max(0, Math.floor((now - since) / 1000));

/** {@link InboxHealth} of the figures the operator's index gave, at epoch ms `now`. */
export function inboxHealth(open: OpenFigures, now: number): InboxHealth {
  return {
    inProgress: open.PROCESSING.count,
    failed: open.FAILED.count,
    dead: open.DEAD.count,
    oldestLeaseSeconds: ageSeconds(open.PROCESSING.oldestSince, now),
    oldestRetryAgeSeconds: ageSeconds(open.FAILED.oldestSince, now),
  };
}
