/**
 * The inbox's hot-path port: one record per (consumer, event id) that decides whether this
 * delivery of an event may run the consumer's side effect. The state machine (`process-once.ts`)
 * drives it, and it holds only the writes that machine makes; what operators read and redrive is
 * another port (`inbox-ops.ts`), so a store for the consumers need not answer ops queries. The
 * DynamoDB adapter (`dynamo-inbox-store.ts`) implements it on AWS DynamoDB, dynalite and DynamoDB
 * Local alike. Every time is passed in by the caller (epoch milliseconds), so a test clock
 * controls leases and backoff and the store itself never reads a clock.
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
  /** The CloudEvent's `subject`: what the event is about (the pipeline's task id), for traces and dead lists. */
  readonly subject: string | null;
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
  readonly subject: string | null;
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
  readonly subject: string | null;
  readonly eventType: string;
  readonly payloadHash: string;
  readonly reason: string;
  readonly event: unknown;
  readonly now: number;
  readonly expiresAt: number;
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
 * The inbox store: the few primitives the state machine needs (begin, take over, renew,
 * complete, fail, dead, poison), as Powertools' persistence layer holds only what its
 * idempotency handler calls (https://docs.aws.amazon.com/powertools/typescript/latest/api/modules/_aws-lambda-powertools_idempotency.persistence.html).
 * Listing and counting for operators is `InboxOps` (inbox-ops.ts). Conditional writes throw the
 * inbox's domain errors (errors.ts), never SDK errors: `RECORD_CHANGED` from a lost take-over,
 * `FENCED_OUT` from a write by an attempt that lost its lease, `RECORD_EXISTS` from a
 * create-only write.
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
}
