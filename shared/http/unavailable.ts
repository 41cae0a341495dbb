import { isPipelineError } from '../errors';

/**
 * How long a caller is told to wait before it tries again after a 503 (`Retry-After`): long
 * enough for a restarted engine to answer (the local runtime restarts a dead one at once, then
 * backs off), short enough that a client retrying on it notices the recovery soon.
 */
export const retryAfterSeconds = 5;

/**
 * SQLSTATE classes that mean the database cannot serve anyone right now, whatever the request:
 * 08 connection exception, 53 insufficient resources (disk full, out of memory, too many
 * connections), 57 operator intervention (shutting down, starting up), 58 system error (I/O).
 * https://www.postgresql.org/docs/current/errcodes-appendix.html
 */
const unavailableClasses = ['08', '53', '57', '58'];

/**
 * node-postgres puts the server's SQLSTATE in `code`; a failure the server never answered
 * carries none (`''`: "Connection terminated unexpectedly") or the socket's errno (ECONNRESET).
 */
const noAnswer = (sqlState: unknown) =>
  sqlState === '' || (typeof sqlState === 'string' && /^E[A-Z]+$/.test(sqlState));

/** Operating-system errors of a store that is full, read-only, failing or out of descriptors. */
const unavailableErrnos = new Set(['ENOSPC', 'EDQUOT', 'EROFS', 'EIO', 'EMFILE', 'ENFILE', 'ECONNREFUSED']);

/**
 * What makes `err` an outage rather than a fault of the request or of the code: the database
 * or the disk cannot serve it now, and the same request may succeed later. Undefined for
 * anything else. Follows the `cause` chain, so an adapter's error wrapping a driver's still counts.
 *
 * - a `DB_TRANSIENT` PipelineError (refused connection, starting up, too many connections, a
 *   Data API cluster resuming);
 * - a `DB_ERROR` whose SQLSTATE is of a class above, or whose server gave no answer at all
 *   (the connection ended under the statement);
 * - an operating-system error of a full, read-only or failing disk (ENOSPC, EDQUOT, EROFS, EIO).
 */
export function unavailableCause(err: unknown): string | undefined {
  const seen = new Set<unknown>();
  for (let e = err; e !== undefined && e !== null && !seen.has(e); e = (e as { cause?: unknown }).cause) {
    seen.add(e);
    if (isPipelineError(e, 'DB_TRANSIENT')) return 'the database is unavailable';
    if (isPipelineError(e, 'DB_ERROR')) {
      const sqlState = e.details.sqlState;
      if (noAnswer(sqlState) || unavailableClasses.includes(String(sqlState ?? '').slice(0, 2)))
        return 'the database is unavailable';
      return undefined;
    }
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && unavailableErrnos.has(code))
      return `the disk or a store is unavailable (${code})`;
  }
  return undefined;
}
