/**
 * The inbox port: one record per (consumer, event id) that decides whether this delivery of an
 * event may run the consumer's side effect. The state machine (`process-once.ts`) drives it;
 * the DynamoDB adapter (`dynamo-inbox-store.ts`) implements it on AWS DynamoDB, dynalite and
 * DynamoDB Local alike. Every time is passed in by the caller (epoch milliseconds), so a test
 * clock controls leases and backoff and the store itself never reads a clock.
 */

import type { FailureKind } from './failure-kind';

/** Lifecycle of a record. `PROCESSED` and `DEAD` are final until an ops redrive. */
export type InboxStatus = 'PROCESSING' | 'PROCESSED' | 'FAILED' | 'DEAD';

/** All statuses, in lifecycle order (stats and ops pages list them in this order). */
export const inboxStatuses: readonly InboxStatus[] = ['PROCESSING', 'PROCESSED', 'FAILED', 'DEAD'];

/** A record's identity (the table keys it as `<consumer>#<eventId>`): each consumer dedupes only its own side effects. */
export interface InboxKey {
  readonly consumer: string;
  readonly eventId: string;
}

/** A record as the domain sees it. */
export interface InboxRecord extends InboxKey {
  readonly status: InboxStatus;
  /** Attempts started so far (claims), the current one included. */
  readonly attempts: number;
  /**
   * Epoch ms of the first attempt (reset by an ops redrive of a `DEAD` record): transient
   * failures are retried until the event is the consumer's maximum event age past this.
   */
  readonly firstAttemptAt: number;
  /** Attempts that failed permanently so far: the record goes `DEAD` at the consumer's budget. */
  readonly permanentFailures: number;
  /** How the last failed attempt failed, when one did. */
  readonly lastFailure?: FailureKind;
  /** The attempt that holds (or last held) the lease; unique per attempt, so it is the fencing token. */
  readonly leaseOwner: string;
  /** Epoch ms; a `PROCESSING` record whose lease is past may be taken over. */
  readonly leaseUntil: number;
  /** Epoch ms; a `FAILED` record may be taken over from then on. */
  readonly nextAttemptAt: number;
  /** Hash of the CloudEvent as first received; another payload under the same id is poison. */
  readonly payloadHash: string;
  readonly eventType: string;
  readonly taskId: string | null;
  /** The EventBridge event as received, for redrive (a string when it was too large to keep whole). */
  readonly event: unknown;
  readonly receivedAt: number;
  readonly updatedAt: number;
  readonly lastError?: string;
  /** Epoch seconds: DynamoDB TTL deletes the record some time after this (finished records only). */
  readonly expiresAt?: number;
  /** Set on records written for poison events; their key carries a `#poison#` suffix. */
  readonly poison?: boolean;
  /** The CloudEvent id a poison record was received under, when it had one. */
  readonly cloudEventId?: string | null;
}

/** What `begin` writes when no record exists: a fresh `PROCESSING` record at attempt 1. */
export interface NewInboxRecord extends InboxKey {
  readonly owner: string;
  readonly leaseUntil: number;
  readonly payloadHash: string;
  readonly eventType: string;
  readonly taskId: string | null;
  readonly event: unknown;
  readonly now: number;
}

/** The outcome of `begin`: either this attempt created the record, or the record that was already there. */
export type BeginResult =
  | { readonly created: true; readonly record: InboxRecord }
  | { readonly created: false; readonly record: InboxRecord };

/** The state a take-over or a fenced write expects to find (optimistic concurrency). */
export interface ExpectedState {
  readonly status: InboxStatus;
  readonly leaseOwner: string;
}

/** A poison event, recorded `DEAD` at once with the reason. */
export interface PoisonRecord extends InboxKey {
  readonly cloudEventId: string | null;
  readonly taskId: string | null;
  readonly eventType: string;
  readonly payloadHash: string;
  readonly reason: string;
  readonly event: unknown;
  readonly now: number;
  readonly expiresAt: number;
}

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

/** A failed attempt, as `InboxStore.fail` records it. */
export interface InboxFailure {
  readonly now: number;
  /**
   * The record's first attempt (epoch ms, as the attempt read it): the operator's index orders
   * `FAILED` records by it, so the oldest retry's age is read without reading the records.
   */
  readonly firstAttemptAt: number;
  readonly error: string;
  readonly nextAttemptAt: number;
  readonly kind: FailureKind;
  /** The record's permanent failures, this one counted. */
  readonly permanentFailures: number;
}

/** Why and when a record goes `DEAD`, as `InboxStore.markDead` records it. */
export interface InboxDeath {
  readonly now: number;
  readonly reason: string;
  readonly expiresAt: number;
  /** When set, a `PROCESSING` record's lease must have run out by then. */
  readonly leaseLapsedBy?: number;
}

/**
 * The inbox store. Conditional writes throw the inbox's domain errors (errors.ts), never SDK
 * errors: `RECORD_CHANGED` from a lost take-over, `FENCED_OUT` from a write by an attempt that
 * lost its lease, `RECORD_EXISTS` from a create-only write.
 */
export interface InboxStore {
  /**
   * Creates a `PROCESSING` record owned by `record.owner` if none exists, in one write that
   * also returns the record that was there before, so a duplicate costs exactly one call.
   * Never changes an existing record. A `PROCESSING` record already held by `record.owner` is
   * this attempt's own write, resent by the SDK after it landed: it counts as created.
   */
  begin(record: NewInboxRecord): Promise<BeginResult>;
  /**
   * Takes a `FAILED` record whose backoff passed, or a `PROCESSING` record whose lease
   * expired, over for `owner`: attempts + 1, a new lease. Throws RECORD_CHANGED when the record
   * is no longer in `expected` state or not yet due, unless it is already `owner`'s (a resend).
   * Fenced writes (`complete`, `fail`, `markDead`) likewise succeed when their resend finds the
   * state they write already there under the same owner.
   */
  takeOver(
    key: InboxKey,
    expected: ExpectedState,
    claim: { readonly owner: string; readonly leaseUntil: number; readonly now: number },
  ): Promise<InboxRecord>;
  /** Extends the lease of `owner`'s live attempt. Throws FENCED_OUT when the lease was lost. */
  renew(key: InboxKey, owner: string, leaseUntil: number, now: number): Promise<void>;
  /** `PROCESSING` -> `PROCESSED`, fenced on `owner`, TTL set. Throws FENCED_OUT. */
  complete(
    key: InboxKey,
    owner: string,
    at: { readonly now: number; readonly expiresAt: number },
  ): Promise<void>;
  /** `PROCESSING` -> `FAILED` with the next allowed attempt time, fenced on `owner`. Throws FENCED_OUT. */
  fail(key: InboxKey, owner: string, failure: InboxFailure): Promise<void>;
  /**
   * -> `DEAD` from exactly the `expected` state, TTL set. Throws FENCED_OUT when it changed.
   * With `leaseLapsedBy`, a `PROCESSING` record's lease must also have run out by then, in the
   * write itself: a heartbeat that renewed it after the caller's read keeps the attempt alive.
   */
  markDead(key: InboxKey, expected: ExpectedState, death: InboxDeath): Promise<void>;
  /** Writes a poison record `DEAD`; throws RECORD_EXISTS when it is already recorded `DEAD`. */
  recordPoison(record: PoisonRecord): Promise<void>;
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
   * runs the effect again. Throws NOT_FOUND or NOT_DEAD.
   */
  redrive(key: InboxKey, now: number): Promise<InboxRecord>;
}

/**
 * Which records exist, whatever their state: what the delivery audit asks of the inbox for each
 * event it checks. Apart from {@link InboxStore}: only the audit needs it, and it reads many
 * keys of every consumer at once (eventually consistent: it looks at events delivered minutes ago).
 */
export interface InboxPresence {
  /** The table keys (`recordKey`, `<consumer>#<eventId>`) of those of `keys` that have a record. */
  present(keys: readonly InboxKey[]): Promise<ReadonlySet<string>>;
}
