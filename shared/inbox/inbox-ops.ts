/**
 * The inbox as operators see it: the figures the gauges and the status page read, a record's
 * state for a task's trace, the dead lists and their redrive, and which records exist for the
 * delivery audit. Apart from the hot-path port (`InboxStore`, inbox-store.ts): a consumer never
 * lists or counts, and a store for the consumers need not answer these queries. The DynamoDB
 * adapter (`dynamo-inbox-ops.ts`) reads the operator's index and the table the consumers write.
 */

import type { InboxKey, InboxRecord, InboxStatus } from './inbox-store';

/** One status of a consumer's open records, as the operator's index tells it. */
export interface OpenFigure {
  readonly count: number;
  /**
   * Epoch ms the oldest record of the status ages from (null when there is none): the start of
   * its current lease (`PROCESSING`), its first attempt (`FAILED`: the retry age), its death (`DEAD`).
   */
  readonly oldestSince: number | null;
}

/** One consumer's records in the states an operator watches (all but `PROCESSED`). */
export type OpenFigures = Readonly<Record<Exclude<InboxStatus, 'PROCESSED'>, OpenFigure>>;

/** The counts of {@link OpenFigures}, status by status. */
export function openCounts(figures: OpenFigures): Readonly<Record<keyof OpenFigures, number>> {
  return { PROCESSING: figures.PROCESSING.count, FAILED: figures.FAILED.count, DEAD: figures.DEAD.count };
}

/** One page of records; pass `cursor` back to get the next page. */
export interface InboxPage {
  readonly records: readonly InboxRecord[];
  readonly cursor?: string;
}

/**
 * What the ops API and the gauges ask of the inbox. Failures are the inbox's domain errors
 * (errors.ts), never SDK errors: `NOT_FOUND` and `NOT_DEAD` from a redrive, `STORE_ERROR` else.
 */
export interface InboxOps {
  /** A strongly consistent read of one record. */
  get(key: InboxKey): Promise<InboxRecord | undefined>;
  /**
   * Counts one consumer's `PROCESSING`, `FAILED` and `DEAD` records from the operator's index,
   * with the time the oldest of each ages from: its cost follows the open records, never the
   * history (`PROCESSED` records are not in the index).
   */
  openFigures(consumer: string): Promise<OpenFigures>;
  /**
   * Lists one consumer's `DEAD` records, oldest death first (ties by event id), with their
   * stored events: found through the operator's index, read from the table.
   */
  listDead(
    consumer: string,
    page?: { readonly limit?: number; readonly cursor?: string },
  ): Promise<InboxPage>;
  /**
   * Resets a `DEAD` record to `FAILED`, attempts 0, due now, a fresh first-attempt time and
   * permanent budget, so the next delivery of its event (the caller re-sends `record.event`)
   * runs the effect again. The reset record is owned by the redrive (`leaseOwner`), so the
   * caller can put it back with a fenced `InboxStore.markDead` when the re-send fails.
   * Throws NOT_FOUND or NOT_DEAD.
   */
  redrive(key: InboxKey, now: number): Promise<InboxRecord>;
}

/**
 * Which records exist, whatever their state: what the delivery audit asks of the inbox for each
 * event it checks. Apart from {@link InboxOps}: only the audit needs it, and it reads many
 * keys of every consumer at once (eventually consistent: it looks at events delivered minutes ago).
 */
export interface InboxPresence {
  /** The table keys (`recordKey`, `<consumer>#<eventId>`) of those of `keys` that have a record. */
  present(keys: readonly InboxKey[]): Promise<ReadonlySet<string>>;
}

/**
 * The open records nothing is working on: `FAILED` or `PROCESSING` records of one consumer
 * whose next attempt and lease both ended before `before` and that nothing changed since then.
 * What the delivery audit re-sends (shared/audit/stuck-records.ts): a record whose delivery was
 * lost (a bus journal line damaged, a kill between an inbox redrive's reset and its re-send)
 * would otherwise wait for a retry that never comes. Apart from {@link InboxOps} as
 * {@link InboxPresence} is: only the audit and its route ask it.
 */
export interface InboxStuckRecords {
  /**
   * At most `limit` such records of `consumer`, oldest first per status, read from the
   * operator's index (only entries older than `before`) and then the table.
   */
  stuck(consumer: string, before: number, limit: number): Promise<readonly InboxRecord[]>;
}

/** Whether nothing has worked on `r` since `before` and nothing is due to: no attempt scheduled or leased after it. */
export function isStuck(r: InboxRecord, before: number): boolean {
  return (
    (r.status === 'FAILED' || r.status === 'PROCESSING') &&
    r.updatedAt < before &&
    r.nextAttemptAt < before &&
    r.leaseUntil < before
  );
}
