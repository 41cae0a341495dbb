import { AsyncLocalStorage } from 'node:async_hooks';
import { connect } from 'node:net';
import pg from 'pg';
import { isPipelineError, PipelineError } from '../errors';
import { type PgTimeouts, pgTimeouts } from './pg-settings';
import { type RetryDeps, type RetryPolicy, withRetry } from './retry';
import {
  assertPortableParams,
  type QueryResult,
  type Row,
  type SqlClient,
  type SqlExecutor,
  type SqlParams,
  type SqlValue,
  toPositional,
} from './sql-client';

/** SQLSTATEs after which the statement certainly did not take effect and a retry is safe. */
const transientStates = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '57P03', // cannot_connect_now (starting up)
  '53300', // too_many_connections
  '55P03', // lock_not_available: lock_timeout ended the wait, the statement was not applied
]);
const transientNetworkCodes = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']);

/** Translates a node-postgres error into a PipelineError carrying the SQLSTATE. */
export function translatePgError(err: unknown): PipelineError {
  if (err instanceof PipelineError) return err;
  const e = err as { code?: string; message?: string; constraint?: string };
  const sqlState = e.code ?? '';
  const message = e.message ?? String(err);
  if (sqlState.startsWith('23')) {
    return new PipelineError(
      'DB_CONSTRAINT',
      message,
      { sqlState, constraint: e.constraint },
      { cause: err },
    );
  }
  if (sqlState === '55P03') {
    // A wait that ran out is not tried again at once: it would only wait as long again.
    return new PipelineError('DB_TRANSIENT', message, { sqlState, timedOut: 'lock' }, { cause: err });
  }
  if (transientStates.has(sqlState) || transientNetworkCodes.has(sqlState)) {
    return new PipelineError('DB_TRANSIENT', message, { sqlState }, { cause: err });
  }
  return new PipelineError('DB_ERROR', message, { sqlState }, { cause: err });
}

/**
 * A SQLSTATE-shaped code: the server answered with an ErrorResponse (and the connection still
 * works). Not a five-letter errno that looks like one (EPIPE, EPERM): no SQLSTATE class starts
 * with E (https://www.postgresql.org/docs/current/errcodes-appendix.html).
 */
const serverAnswered = (err: unknown) => {
  const code = String((err as { code?: unknown }).code ?? '');
  return /^[0-9A-Z]{5}$/.test(code) && !code.startsWith('E');
};

/** pg-pool's errors for a wait for a connection (new or pooled) that ran out of `connectionTimeoutMillis`. */
const connectTimeoutMessages = new Set([
  'timeout exceeded when trying to connect',
  'Connection terminated due to connection timeout',
]);

/**
 * A failure to get a connection: no statement was sent, so nothing happened, whatever the
 * error. A server that refused the login with a SQLSTATE says why (a wrong password, too many
 * connections, starting up); anything else (a wait that ran out, a socket that closed during the
 * startup) is SQLSTATE 08001, sqlclient_unable_to_establish_sqlconnection, and transient: a
 * 503 with Retry-After. A timeout is not retried in the adapter: its caller already waited.
 */
function connectFailure(err: unknown, waitedMs: number, timeouts: PgTimeouts): PipelineError {
  if (serverAnswered(err)) return translatePgError(err);
  const message = (err as { message?: unknown }).message;
  const timedOut =
    connectTimeoutMessages.has(String(message)) || (timeouts.connectMs > 0 && waitedMs >= timeouts.connectMs);
  return new PipelineError(
    'DB_TRANSIENT',
    timedOut
      ? `could not connect to the database within ${timeouts.connectMs / 1_000} s; no statement was sent`
      : `could not connect to the database (${String(message ?? err)}); no statement was sent`,
    { sqlState: '08001', ...(timedOut ? { timedOut: 'connect' } : {}) },
    { cause: err },
  );
}

/**
 * A statement's failure. One the server never answered within `queryMs` (node-postgres'
 * `query_timeout`) was sent and may still run and commit when the server goes on: its outcome
 * is unknown, and saying "nothing happened" (a 503, a retry) could make a second task.
 */
function statementFailure(err: unknown, waitedMs: number, timeouts: PgTimeouts): PipelineError {
  if (serverAnswered(err)) return translatePgError(err);
  const message = String((err as { message?: unknown }).message ?? '');
  if (message === 'Query read timeout' || (timeouts.queryMs > 0 && waitedMs >= timeouts.queryMs)) {
    return new PipelineError(
      'DB_OUTCOME_UNKNOWN',
      `the database did not answer within ${timeouts.queryMs / 1_000} s; the statement may still take effect`,
      { timedOut: 'statement' },
      { cause: err },
    );
  }
  return translatePgError(err);
}

/** Transient and worth another try at once: not a wait that ran out (a connect, a lock), which would only wait again. */
const isTransient = (err: unknown) =>
  err instanceof PipelineError && err.code === 'DB_TRANSIENT' && err.details.timedOut === undefined;

function toDriverValue(value: SqlValue | undefined): unknown {
  if (value === null || value === undefined || typeof value !== 'object') return value ?? null;
  switch (value.kind) {
    case 'uuid':
      return value.value;
    case 'timestamp':
      return value.value.toISOString();
    case 'json':
      return JSON.stringify(value.value);
  }
}

// Decode like the Data API adapter does: int8 as a number (our counters stay far below 2^53),
// numeric as a string (scale kept), everything else node-postgres' defaults.
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === pg.types.builtins.INT8) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format);
  },
};

/**
 * A connection checked out of the pool, until `release`. While it is out, an error event of the
 * client (its socket ended) marks it broken instead of going unheard: node-postgres emits one even
 * when a query is in flight, and an EventEmitter's unheard 'error' ends the process.
 */
interface Checkout {
  readonly conn: pg.PoolClient;
  /** Whether the connection can no longer be trusted (its socket failed, a statement got no answer). */
  broken: boolean;
  /** Whether a statement was sent on it and not answered yet. */
  sending: boolean;
  /** Dropped by its scope (ConnectionScope.drop): a statement it was sending may still run. */
  dropped: boolean;
  release(): void;
}

/**
 * Asks the server to cancel the statement a connection's backend runs: a CancelRequest on a new
 * connection, naming the backend by the process id and secret key it gave at startup, which
 * takes no login and no privilege
 * (https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-FLOW-CANCELING-REQUESTS).
 * Sent when the client stops waiting for an answer: a backend that cannot run now (stopped, or
 * its machine frozen) is signalled by the postmaster and cancels the statement once it runs
 * again, instead of completing it (a lease taken, a row written) for a caller long gone. Best
 * effort, as the protocol says of it: not awaited, bounded by `waitMs` (a stopped postmaster
 * takes no connection), and a statement that already finished, or one sent to a backend that was
 * idle (PostgreSQL drops a cancel that arrives between statements), is not undone.
 */
function requestCancel(conn: pg.PoolClient, waitMs: number): void {
  // node-postgres keeps BackendKeyData on the client, untyped; host and port as it connected.
  const { processID, secretKey, host, port } = conn as unknown as {
    processID?: number | null;
    secretKey?: number | null;
    host?: string;
    port?: number;
  };
  if (typeof processID !== 'number' || typeof secretKey !== 'number' || !host || !port) return;
  const request = Buffer.alloc(16);
  request.writeInt32BE(16, 0);
  request.writeInt32BE(80877102, 4); // the cancel request code
  request.writeInt32BE(processID, 8);
  request.writeInt32BE(secretKey, 12);
  const socket = host.startsWith('/') ? connect(`${host}/.s.PGSQL.${port}`) : connect(port, host);
  socket.setTimeout(Math.max(1, waitMs), () => socket.destroy());
  socket.on('error', () => socket.destroy());
  // The server reads the request and closes the connection without a word.
  socket.on('connect', () => socket.end(request));
  socket.on('close', () => socket.destroy());
}

/**
 * A statement's failure, and what it leaves of the connection: one the server did not answer
 * breaks it, and one the client stopped waiting for is cancelled on the server (best effort).
 */
function sendFailure(out: Checkout, err: unknown, waitedMs: number, timeouts: PgTimeouts): PipelineError {
  if (!serverAnswered(err)) out.broken = true;
  if (out.dropped && !serverAnswered(err)) {
    // Its cancel was asked for already, by the drop.
    return new PipelineError(
      'DB_OUTCOME_UNKNOWN',
      'the work was given up with this statement unanswered; the statement may still take effect',
      { dropped: true },
      { cause: err },
    );
  }
  const failure = statementFailure(err, waitedMs, timeouts);
  if (isPipelineError(failure, 'DB_OUTCOME_UNKNOWN')) requestCancel(out.conn, timeouts.connectMs);
  return failure;
}

/** The scope of the work running now, if it runs in one (see {@link ConnectionScope}). */
const scopes = new AsyncLocalStorage<ConnectionScope>();

/**
 * The connections one piece of work holds, so that whoever gives up on the work (the local relay
 * runner at a run's deadline, as Lambda ends an invocation at its timeout) can drop them: the
 * statements they wait on fail at once and the pools make fresh connections for the next work,
 * instead of a hung backend holding the work and its connection until the statement's own
 * deadline. Everything `run` starts belongs to the scope, callbacks and timers included
 * (AsyncLocalStorage carries it: https://nodejs.org/api/async_context.html), whichever
 * PgSqlClient it checks connections out of.
 */
export class ConnectionScope {
  private readonly held = new Set<Checkout>();

  /** Runs `work` in this scope. */
  run<T>(work: () => Promise<T>): Promise<T> {
    return scopes.run(this, work);
  }

  /** @internal A connection the scope's work checked out, until it is released. */
  hold(out: Checkout): void {
    this.held.add(out);
  }

  /** @internal */
  letGo(out: Checkout): void {
    this.held.delete(out);
  }

  /**
   * Ends every connection the work holds now: a statement in flight fails at once (node-postgres
   * destroys the socket of a client ended with a query active) and is cancelled on the server
   * (best effort, see requestCancel), and each connection goes back to its pool as broken, which
   * removes it. What the work checks out afterwards is fresh. Returns the server process ids of
   * the dropped connections: a backend that cannot run now and was sent its statement while idle
   * would still run it once it can, unless the caller has the server end it
   * (`pg_terminate_backend`, which needs a privilege the pool's role may not have).
   */
  drop(waitMs = pgTimeouts.connectMs): number[] {
    const pids: number[] = [];
    for (const out of this.held) {
      out.broken = true;
      out.dropped = true;
      if (out.sending) requestCancel(out.conn, waitMs);
      // node-postgres keeps the BackendKeyData's process id on the client, untyped.
      const pid = (out.conn as unknown as { processID?: number | null }).processID;
      if (typeof pid === 'number') pids.push(pid);
      out.conn.end().catch(() => {});
    }
    this.held.clear();
    return pids;
  }
}

async function checkout(pool: pg.Pool, timeouts: PgTimeouts): Promise<Checkout> {
  const started = performance.now();
  let conn: pg.PoolClient;
  try {
    conn = await pool.connect();
  } catch (err) {
    throw connectFailure(err, performance.now() - started, timeouts);
  }
  const scope = scopes.getStore();
  const out: Checkout = {
    conn,
    broken: false,
    sending: false,
    dropped: false,
    release() {
      scope?.letGo(out);
      conn.removeListener('error', onError);
      // A broken connection is dropped (pg-pool ends it; ending a client with a query in flight
      // destroys its socket), so the pool's next statement gets a fresh one.
      conn.release(out.broken);
    },
  };
  const onError = () => {
    out.broken = true;
  };
  conn.on('error', onError);
  scope?.hold(out);
  return out;
}

/** Sends one statement on a checked-out connection; a failure the server did not answer breaks it. */
async function send<R extends Row>(
  out: Checkout,
  sql: string,
  params: SqlParams | undefined,
  timeouts: PgTimeouts,
): Promise<QueryResult<R>> {
  assertPortableParams(params);
  const { text, names } = toPositional(sql, params);
  const started = performance.now();
  out.sending = true;
  try {
    const result = await out.conn.query<R>({
      text,
      values: names.map((n) => toDriverValue(params?.[n])),
      types,
    });
    return { rows: result.rows, rowCount: result.rowCount ?? result.rows.length };
  } catch (err) {
    throw sendFailure(out, err, performance.now() - started, timeouts);
  } finally {
    out.sending = false;
  }
}

/**
 * COMMIT, and reject unless it committed. PostgreSQL answers the COMMIT of a transaction that
 * already failed (a statement error the work caught and swallowed) with the command tag
 * ROLLBACK and no error, and node-postgres resolves it: without this check the caller would
 * take a rolled-back transaction for a committed one. A deferred constraint violated at COMMIT
 * is an error from the server and rejects on its own; a COMMIT never answered may have
 * committed (DB_OUTCOME_UNKNOWN).
 * (https://www.postgresql.org/docs/current/sql-commit.html, Outputs: an aborted transaction's
 * COMMIT acts as ROLLBACK and reports that tag)
 */
async function commit(out: Checkout, timeouts: PgTimeouts): Promise<void> {
  const started = performance.now();
  let answer: pg.QueryResult;
  out.sending = true;
  try {
    answer = await out.conn.query('COMMIT');
  } catch (err) {
    throw sendFailure(out, err, performance.now() - started, timeouts);
  } finally {
    out.sending = false;
  }
  if (answer.command !== 'COMMIT') {
    throw new PipelineError(
      'DB_ERROR',
      `COMMIT was answered ${answer.command}: the transaction had failed and was rolled back, nothing was committed`,
      { sqlState: '25P02', command: answer.command },
    );
  }
}

export interface PgClientOptions {
  readonly connectionString: string;
  readonly maxConnections?: number;
  /**
   * Connect, statement, lock and idle-in-transaction timeouts over the defaults.
   * @default pgTimeouts (`pg-settings.ts`)
   */
  readonly timeouts?: Partial<PgTimeouts>;
  /**
   * The connections' `application_name` (`applicationName(...)`), which `pg_stat_activity`
   * shows: who holds which backend. @default none
   */
  readonly applicationName?: string;
  readonly retry?: RetryPolicy;
  readonly retryDeps?: RetryDeps;
}

/**
 * SqlClient over a node-postgres pool: the local runtime, tests, LocalStack. Every connection
 * has the timeouts of `pg-settings.ts` (or the options'): a server that stops answering turns
 * into an error within seconds, never a wait as long as the hang.
 */
export class PgSqlClient implements SqlClient {
  readonly pool: pg.Pool;
  /** The timeouts its connections have. */
  readonly timeouts: PgTimeouts;
  private readonly retry: RetryPolicy;

  constructor(private readonly options: PgClientOptions) {
    const timeouts = { ...pgTimeouts, ...options.timeouts };
    this.timeouts = timeouts;
    // Options of node-postgres' Client, which pg-pool passes on: `connectionTimeoutMillis` and
    // `query_timeout` are the client's own; `statement_timeout`, `lock_timeout` and
    // `idle_in_transaction_session_timeout` are sent in the startup message, so they hold for the
    // whole session without a statement of ours (https://node-postgres.com/apis/client).
    // 0 leaves a timeout off, as both node-postgres and PostgreSQL read it.
    this.pool = new pg.Pool({
      connectionString: options.connectionString,
      max: options.maxConnections ?? 10,
      application_name: options.applicationName,
      connectionTimeoutMillis: timeouts.connectMs,
      query_timeout: timeouts.queryMs,
      statement_timeout: timeouts.statementMs,
      lock_timeout: timeouts.lockMs,
      idle_in_transaction_session_timeout: timeouts.idleInTransactionMs,
    });
    // An idle client's error (server restart) must not crash the process; the next query reconnects.
    this.pool.on('error', () => {});
    this.retry = options.retry ?? { attempts: 5, baseMs: 100, maxMs: 2_000 };
  }

  query<R extends Row = Row>(sql: string, params?: SqlParams): Promise<QueryResult<R>> {
    return withRetry(
      async () => {
        const out = await checkout(this.pool, this.timeouts);
        try {
          return await send<R>(out, sql, params, this.timeouts);
        } finally {
          out.release();
        }
      },
      isTransient,
      this.retry,
      this.options.retryDeps,
    );
  }

  async transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const out = await withRetry(
      () => checkout(this.pool, this.timeouts),
      isTransient,
      this.retry,
      this.options.retryDeps,
    );
    // One statement at a time on the connection, as the Data API demands of a transaction:
    // node-postgres would queue overlapping queries itself, but that queue is deprecated.
    let queue: Promise<unknown> = Promise.resolve();
    let ended = false;
    try {
      await send(out, 'BEGIN', undefined, this.timeouts).catch((err: unknown) => {
        throw beforeCommit(err);
      });
      const result = await work({
        query: <R extends Row>(sql: string, params?: SqlParams) => {
          const next = queue.then(async () => {
            // A statement issued after the transaction ended would run in autocommit.
            if (ended) throw new Error('the transaction has ended; this statement was not run');
            try {
              return await send<R>(out, sql, params, this.timeouts);
            } catch (err) {
              throw beforeCommit(err);
            }
          });
          queue = next.catch(() => {});
          return next;
        },
      });
      await queue;
      ended = true;
      await commit(out, this.timeouts);
      return result;
    } catch (err) {
      // After the statements already queued; later ones are refused (see `ended`).
      await queue;
      ended = true;
      if (!out.broken) {
        try {
          await out.conn.query('ROLLBACK');
        } catch {
          out.broken = true; // the connection is gone; rollback is implicit server-side
        }
      }
      throw err;
    } finally {
      out.release();
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/**
 * A statement of a transaction that got no answer: its COMMIT was never sent and the connection
 * is dropped, so the server rolls the transaction back (once it runs again): nothing committed.
 */
function beforeCommit(err: unknown): unknown {
  if (!isPipelineError(err, 'DB_OUTCOME_UNKNOWN')) return err;
  return new PipelineError(
    'DB_ERROR',
    `${err.message}; the transaction was not committed: its connection was dropped before COMMIT`,
    { sqlState: '08006', timedOut: 'statement' },
    { cause: err },
  );
}
