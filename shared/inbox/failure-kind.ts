import { isServerError, isThrottlingError, isTransientError } from '@smithy/core/retry';
import { isPipelineError, type PipelineErrorCode } from '../errors';

/**
 * How the inbox judges a failed attempt. `transient`: it may pass on its own (throttling, 5xx,
 * timeouts, a connection that dropped), so it is retried with capped backoff until the
 * consumer's maximum event age. `permanent`: trying again cannot help (validation, a 4xx other
 * than throttling, a bug), so it goes `DEAD` after the consumer's small permanent budget.
 */
export type FailureKind = 'transient' | 'permanent';

/**
 * An error that says itself that it may pass on its own: the inbox retries it as transient. For
 * failures no SDK classifies (the local runtime's injected faults are one).
 */
export class TransientError extends Error {
  override name = 'TransientError';
}

/** PipelineError codes that name a failure retrying cannot fix. */
const permanentCodes = new Set<PipelineErrorCode>([
  'VALIDATION',
  'NOT_FOUND',
  'CONFLICT',
  'IDEMPOTENCY_KEY_REUSED',
  'DB_CONSTRAINT',
  'CONFIG',
]);

/**
 * SQLSTATE classes of failures that pass: connection exceptions (08), transaction rollbacks such
 * as deadlocks and serialization failures (40), insufficient resources (53), operator
 * intervention such as a shutdown, a restart or a statement timeout (57), system errors (58),
 * and a lock not available (55P03). https://www.postgresql.org/docs/current/errcodes-appendix.html
 */
const transientSqlStateClasses = new Set(['08', '40', '53', '57', '58']);
const transientSqlStates = new Set(['55P03']);

/**
 * Node.js and undici error codes of a connection or a resource that failed for now; the SDK's
 * own list (`isTransientError`) covers the common socket ones and is consulted first. The I/O
 * ones pass once the disk, the mount or the descriptors are back: a full disk or quota (ENOSPC,
 * EDQUOT), a file system remounted read-only by the kernel or an operator (EROFS), a failing
 * device or an NFS server gone (EIO, ESTALE), a process out of descriptors or memory (EMFILE,
 * ENFILE, ENOMEM, ENOBUFS), a resource busy or interrupted (EBUSY, ETXTBSY, EAGAIN, EINTR).
 * Not EACCES, EPERM, ENOENT or EISDIR: a permission or a path that is wrong stays wrong until a
 * person changes it.
 */
const transientErrnoCodes = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EMFILE',
  'ENFILE',
  'EBUSY',
  'EAGAIN',
  'EWOULDBLOCK',
  'EINTR',
  'ENOSPC',
  'EDQUOT',
  'EROFS',
  'EIO',
  'ESTALE',
  'ENOMEM',
  'ENOBUFS',
  'ETXTBSY',
]);

/**
 * AWS errors the SDK leaves to the caller that still pass on their own (Data API statement
 * timeouts), and a call given up at its invocation's deadline (`InvocationDeadlineError` of
 * shared/aws/sdk-client.ts: the SDK does not retry it, the next invocation may pass).
 */
const transientAwsNames = new Set([
  'StatementTimeoutException',
  'DatabaseResumingException',
  'InvocationDeadlineError',
]);

interface ErrorShape {
  readonly name?: unknown;
  readonly code?: unknown;
  readonly cause?: unknown;
  readonly $metadata?: { readonly httpStatusCode?: number };
}

/**
 * Classifies the error an effect threw, following its `cause` chain (effects wrap SDK errors).
 * The AWS SDK's own classification decides for SDK errors (https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html):
 * throttling, transient and 5xx errors are transient, other 4xx permanent. Database errors are
 * judged by their code and SQLSTATE; a database error without one is the client or the
 * connection failing, not the server refusing. Anything else is permanent: a failure nobody
 * knows to pass on its own needs a person after a few tries.
 */
export function failureKind(err: unknown): FailureKind {
  let current: unknown = err;
  for (let depth = 0; depth < 10 && current !== undefined && current !== null; depth++) {
    const verdict = judge(current);
    if (verdict) return verdict;
    current = (current as ErrorShape).cause;
  }
  return 'permanent';
}

/** The verdict one error in the chain gives on its own, or undefined to look at its cause. */
function judge(err: unknown): FailureKind | undefined {
  if (err instanceof TransientError) return 'transient';
  if (typeof err !== 'object') return undefined;
  const e = err as ErrorShape;
  if (isPipelineError(err)) {
    // A statement the database never answered: an effect is idempotent, so it is tried again.
    if (err.code === 'DB_TRANSIENT' || err.code === 'DB_OUTCOME_UNKNOWN') return 'transient';
    if (permanentCodes.has(err.code)) return 'permanent';
    if (err.code === 'DB_ERROR') {
      const fromCause = err.cause === undefined ? undefined : failureKind(err.cause);
      if (fromCause === 'transient') return 'transient';
      const sqlState = typeof err.details.sqlState === 'string' ? err.details.sqlState : '';
      if (sqlState) return sqlStateKind(sqlState);
      // No SQLSTATE and no HTTP status: the server never answered.
      return (err.cause as ErrorShape | undefined)?.$metadata?.httpStatusCode ? 'permanent' : 'transient';
    }
  }
  if (isSdkTransient(e)) return 'transient';
  if (typeof e.name === 'string' && transientAwsNames.has(e.name)) return 'transient';
  if (typeof e.code === 'string') {
    if (transientErrnoCodes.has(e.code) || e.code.startsWith('UND_ERR_')) return 'transient';
    if (/^[0-9A-Z]{5}$/.test(e.code)) return sqlStateKind(e.code);
  }
  const status = e.$metadata?.httpStatusCode;
  if (status !== undefined && status >= 400 && status < 500) return 'permanent';
  return undefined;
}

/**
 * The SDK's own retry classification. Not its clock-skew list: the SDK corrects the skew and
 * retries within the call, so an AccessDeniedException that still reaches us is permanent.
 */
function isSdkTransient(e: ErrorShape): boolean {
  // The smithy classifiers read `name`, `code`, `$retryable` and `$metadata` off any object.
  const sdk = e as Parameters<typeof isTransientError>[0];
  return isThrottlingError(sdk) || isTransientError(sdk) || isServerError(sdk);
}

function sqlStateKind(sqlState: string): FailureKind {
  return transientSqlStateClasses.has(sqlState.slice(0, 2)) || transientSqlStates.has(sqlState)
    ? 'transient'
    : 'permanent';
}
