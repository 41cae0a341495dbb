/**
 * The inbox's domain errors. The DynamoDB adapter turns `ConditionalCheckFailedException` and
 * every other SDK error into one of these, so the state machine and the consumers never look
 * at SDK error names, and each error says what the caller should do (retry later, stop, skip).
 */
export type InboxErrorCode =
  /** Another attempt holds a live lease: fail the invocation so the platform retries later. */
  | 'IN_PROGRESS'
  /** The last attempt failed and its backoff has not passed: retry later. */
  | 'BACKOFF'
  /** A create-only write found a record already there. */
  | 'RECORD_EXISTS'
  /** The record changed between the read and the conditional take-over: someone else moved first. */
  | 'RECORD_CHANGED'
  /** This attempt no longer owns the lease: a newer attempt took the record over. */
  | 'FENCED_OUT'
  /** No record under that key (ops commands). */
  | 'NOT_FOUND'
  /** Redrive of a record that is not `DEAD`. */
  | 'NOT_DEAD'
  /** The store failed for another reason (throttling, network, bad table); `cause` has the SDK error. */
  | 'STORE_ERROR';

/** Base class of every inbox error: switch on `code`, never on the message. */
export class InboxError extends Error {
  override name = 'InboxError';
  constructor(
    readonly code: InboxErrorCode,
    message: string,
    readonly details: Readonly<Record<string, unknown>> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Thrown when a live `PROCESSING` record exists: the invocation fails so Lambda retries it later. */
export class InboxInProgressError extends InboxError {
  override name = 'InboxInProgressError';
  constructor(
    key: { consumer: string; eventId: string },
    readonly retryAfterMs: number,
    options?: { cause?: unknown },
  ) {
    super(
      'IN_PROGRESS',
      `event ${key.eventId} is being processed by another ${key.consumer} attempt; retry in ${retryAfterMs} ms`,
      { ...key, retryAfterMs },
      options,
    );
  }
}

/** Thrown when a `FAILED` record's backoff has not passed: retry later, the inbox will take it then. */
export class InboxBackoffError extends InboxError {
  override name = 'InboxBackoffError';
  constructor(
    key: { consumer: string; eventId: string },
    readonly retryAfterMs: number,
  ) {
    super(
      'BACKOFF',
      `event ${key.eventId} failed recently in ${key.consumer}; next attempt allowed in ${retryAfterMs} ms`,
      { ...key, retryAfterMs },
    );
  }
}

/** A create-only write (`attribute_not_exists`) found an existing record. */
export class InboxRecordExistsError extends InboxError {
  override name = 'InboxRecordExistsError';
  constructor(key: { consumer: string; eventId: string }, options?: { cause?: unknown }) {
    super('RECORD_EXISTS', `inbox record ${key.consumer}/${key.eventId} already exists`, key, options);
  }
}

/** A take-over lost the race: the record is no longer in the state this attempt observed. */
export class InboxRecordChangedError extends InboxError {
  override name = 'InboxRecordChangedError';
  constructor(key: { consumer: string; eventId: string }, options?: { cause?: unknown }) {
    super(
      'RECORD_CHANGED',
      `inbox record ${key.consumer}/${key.eventId} changed under this attempt`,
      key,
      options,
    );
  }
}

/** A write fenced on the lease owner was refused: this attempt's lease was taken over. */
export class InboxFencedOutError extends InboxError {
  override name = 'InboxFencedOutError';
  constructor(
    key: { consumer: string; eventId: string },
    owner: string,
    operation: string,
    options?: { cause?: unknown },
  ) {
    super(
      'FENCED_OUT',
      `${operation} of ${key.consumer}/${key.eventId} refused: ${owner} no longer holds the lease`,
      { ...key, owner, operation },
      options,
    );
  }
}

/** No inbox record under the key an ops command named. */
export class InboxRecordNotFoundError extends InboxError {
  override name = 'InboxRecordNotFoundError';
  constructor(key: { consumer: string; eventId: string }) {
    super('NOT_FOUND', `no inbox record ${key.consumer}/${key.eventId}`, key);
  }
}

/** Redrive refused: only `DEAD` records can be reset. */
export class InboxNotDeadError extends InboxError {
  override name = 'InboxNotDeadError';
  constructor(key: { consumer: string; eventId: string }, status: string) {
    super('NOT_DEAD', `inbox record ${key.consumer}/${key.eventId} is ${status}, not DEAD`, {
      ...key,
      status,
    });
  }
}

/** True when `err` is an InboxError, optionally of one of `codes`. */
export function isInboxError(err: unknown, ...codes: InboxErrorCode[]): err is InboxError {
  return err instanceof InboxError && (codes.length === 0 || codes.includes(err.code));
}
