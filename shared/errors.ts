/**
 * One error type for the whole pipeline, told apart by `code` (the pg-transactional-outbox
 * way): callers switch on the code, never on message text, and the cause travels along.
 */
export type PipelineErrorCode =
  /** Input failed validation; `details` lists the failing fields. */
  | 'VALIDATION'
  /** The addressed entity does not exist. */
  | 'NOT_FOUND'
  /** The entity exists but its state forbids the command; `details.currentStatus` says why. */
  | 'CONFLICT'
  /**
   * An idempotency key already names a different request (another body under the same key):
   * nothing was changed. The IETF draft on the `Idempotency-Key` header answers it 422.
   */
  | 'IDEMPOTENCY_KEY_REUSED'
  /** A database constraint refused the write (never retried). */
  | 'DB_CONSTRAINT'
  /** A database error that may pass on its own (resuming, connection, serialization). */
  | 'DB_TRANSIENT'
  /** Any other database error. */
  | 'DB_ERROR'
  /**
   * The database did not answer a statement in time (the client stopped waiting): it was sent,
   * so it may still run and commit. Never "nothing happened": the caller must find out (read
   * back, or resend under an idempotency key) rather than assume either outcome.
   */
  | 'DB_OUTCOME_UNKNOWN'
  /** Configuration (environment) is invalid: fail the cold start. */
  | 'CONFIG';

/** The pipeline's error: a code union plus structured details safe to show a caller for 4xx codes. */
export class PipelineError extends Error {
  override readonly name = 'PipelineError';
  constructor(
    readonly code: PipelineErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** True when `err` is a PipelineError, optionally of one of `codes`. */
export function isPipelineError(err: unknown, ...codes: PipelineErrorCode[]): err is PipelineError {
  return err instanceof PipelineError && (codes.length === 0 || codes.includes(err.code));
}
