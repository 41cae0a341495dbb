import pg from 'pg';
import { PipelineError } from '../errors';
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
  if (transientStates.has(sqlState) || transientNetworkCodes.has(sqlState)) {
    return new PipelineError('DB_TRANSIENT', message, { sqlState }, { cause: err });
  }
  return new PipelineError('DB_ERROR', message, { sqlState }, { cause: err });
}

const isTransient = (err: unknown) => err instanceof PipelineError && err.code === 'DB_TRANSIENT';

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

async function run<R extends Row>(
  conn: pg.Pool | pg.PoolClient,
  sql: string,
  params?: SqlParams,
): Promise<QueryResult<R>> {
  assertPortableParams(params);
  const { text, names } = toPositional(sql, params);
  try {
    const result = await conn.query<R>({ text, values: names.map((n) => toDriverValue(params?.[n])), types });
    return { rows: result.rows, rowCount: result.rowCount ?? result.rows.length };
  } catch (err) {
    throw translatePgError(err);
  }
}

/**
 * COMMIT, and reject unless it committed. PostgreSQL answers the COMMIT of a transaction that
 * already failed (a statement error the work caught and swallowed) with the command tag
 * ROLLBACK and no error, and node-postgres resolves it: without this check the caller would
 * take a rolled-back transaction for a committed one. A deferred constraint violated at COMMIT
 * is an error from the server and rejects on its own.
 * (https://www.postgresql.org/docs/current/sql-commit.html, Outputs: an aborted transaction's
 * COMMIT acts as ROLLBACK and reports that tag)
 */
async function commit(conn: pg.PoolClient): Promise<void> {
  let answer: pg.QueryResult;
  try {
    answer = await conn.query('COMMIT');
  } catch (err) {
    throw translatePgError(err);
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
  readonly retry?: RetryPolicy;
  readonly retryDeps?: RetryDeps;
}

/** SqlClient over a node-postgres pool: the local runtime, tests, LocalStack. */
export class PgSqlClient implements SqlClient {
  readonly pool: pg.Pool;
  private readonly retry: RetryPolicy;

  constructor(private readonly options: PgClientOptions) {
    this.pool = new pg.Pool({
      connectionString: options.connectionString,
      max: options.maxConnections ?? 10,
    });
    // An idle client's error (server restart) must not crash the process; the next query reconnects.
    this.pool.on('error', () => {});
    this.retry = options.retry ?? { attempts: 5, baseMs: 100, maxMs: 2_000 };
  }

  query<R extends Row = Row>(sql: string, params?: SqlParams): Promise<QueryResult<R>> {
    return withRetry(() => run<R>(this.pool, sql, params), isTransient, this.retry, this.options.retryDeps);
  }

  async transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const conn = await withRetry(
      () => this.pool.connect().catch((err) => Promise.reject(translatePgError(err))),
      isTransient,
      this.retry,
      this.options.retryDeps,
    );
    let broken = false;
    // One statement at a time on the connection, as the Data API demands of a transaction:
    // node-postgres would queue overlapping queries itself, but that queue is deprecated.
    let queue: Promise<unknown> = Promise.resolve();
    let ended = false;
    try {
      await run(conn, 'BEGIN');
      const result = await work({
        query: <R extends Row>(sql: string, params?: SqlParams) => {
          const next = queue.then(() => {
            // A statement issued after the transaction ended would run in autocommit.
            if (ended) throw new Error('the transaction has ended; this statement was not run');
            return run<R>(conn, sql, params);
          });
          queue = next.catch(() => {});
          return next;
        },
      });
      await queue;
      ended = true;
      await commit(conn);
      return result;
    } catch (err) {
      try {
        // After the statements already queued; later ones are refused (see `ended`).
        await queue;
        ended = true;
        await conn.query('ROLLBACK');
      } catch {
        broken = true; // the connection is gone; rollback is implicit server-side
      }
      throw err;
    } finally {
      conn.release(broken);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
