import {
  type ArrayValue,
  BeginTransactionCommand,
  type ColumnMetadata,
  CommitTransactionCommand,
  ExecuteStatementCommand,
  type ExecuteStatementCommandOutput,
  type Field,
  type RDSDataClient,
  RollbackTransactionCommand,
  type SqlParameter,
} from '@aws-sdk/client-rds-data';
import { isServerError, isThrottlingError, isTransientError } from '@smithy/core/retry';
import { PipelineError } from '../errors';
import { backoffDelay, type RetryDeps, type RetryPolicy, sleep, withRetry } from './retry';
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

/**
 * Aurora Serverless v2 resumes from auto-pause in roughly 15 s, sometimes more, and the SDK does
 * not retry DatabaseResumingException: 8 tries with a 10 s ceiling wait ~9–35 s in total.
 */
export const dataApiDefaultRetry: RetryPolicy = { attempts: 8, baseMs: 500, maxMs: 10_000 };

/** Deadlocks and serialization failures roll the statement back, so running it again is safe. */
const transientSqlStates = new Set(['40001', '40P01']);

/**
 * AWS errors the service itself calls passing: translated to DB_TRANSIENT. Only some of them
 * prove the statement did not run (see `notRunErrorNames`); the others (500/503) may hide a
 * statement that did, so the adapter leaves those to the SDK's own retries.
 */
const transientErrorNames = new Set([
  'DatabaseResumingException',
  'DatabaseUnavailableException',
  'ServiceUnavailableError',
  'InternalServerErrorException',
  'ThrottlingException',
  'TooManyRequestsException',
]);

/**
 * A call inside a transaction whose answer never came (a 5xx, a timeout, a dropped connection):
 * it may have run. The SDK would send it again, and inside a transaction that runs it a second
 * time: an approve's `UPDATE … WHERE status = 'pending_review'` resent after it ran matches
 * nothing, and the approve would report "already approved" for an approval that then rolls back.
 */
class AnswerLostError extends Error {
  override readonly name = 'AnswerLostError';
  /**
   * The SDK's failure. Not `cause`: the SDK's retry looks through `cause` (isTransientError
   * follows it) and would send the call again after all.
   */
  constructor(readonly original: Error) {
    super(`${original.name}: ${original.message}`);
  }
}

/** What the SDK's standard retry strategy would send again (@smithy/core/retry's own tests). */
const sdkWouldResend = (err: unknown) => {
  const e = err as Parameters<typeof isTransientError>[0] & { $retryable?: unknown };
  return e?.$retryable !== undefined || isTransientError(e) || isThrottlingError(e) || isServerError(e);
};

/**
 * Keeps the SDK from sending an in-transaction call again: inside its retry loop (the
 * `deserialize` step runs within `finalizeRequest`, where the retry middleware sits), a failure
 * it would resend is replaced by one it does not, carrying the original as its cause.
 */
function sendOnce<C extends { middlewareStack: { add: (...args: never[]) => void } }>(command: C): C {
  (
    command.middlewareStack as unknown as {
      add(mw: (next: (a: unknown) => Promise<unknown>) => (a: unknown) => Promise<unknown>, o: object): void;
    }
  ).add(
    (next) => async (args) => {
      try {
        return await next(args);
      } catch (err) {
        if (!sdkWouldResend(err)) throw err;
        throw new AnswerLostError(err as Error);
      }
    },
    { step: 'deserialize', priority: 'high', name: 'pipelineSendOnceInTransaction' },
  );
  return command;
}

/** Translates a Data API (SDK) error into a PipelineError; the SQLSTATE is only in the message text. */
export function translateDataApiError(err: unknown): PipelineError {
  if (err instanceof PipelineError) return err;
  if (err instanceof AnswerLostError) {
    return new PipelineError(
      'DB_TRANSIENT',
      err.message,
      { awsError: err.original.name, answerLost: true },
      { cause: err.original },
    );
  }
  const e = err as { name?: string; message?: string; $retryable?: { throttling?: boolean } };
  const name = e.name ?? 'Error';
  const message = e.message ?? String(err);
  if (name === 'DatabaseErrorException') {
    const sqlState = /SQLState: ([0-9A-Z]{5})/.exec(message)?.[1];
    if (sqlState?.startsWith('23')) {
      const constraint = /constraint "([^"]+)"/.exec(message)?.[1];
      return new PipelineError('DB_CONSTRAINT', message, { sqlState, constraint }, { cause: err });
    }
    if (sqlState && transientSqlStates.has(sqlState)) {
      return new PipelineError('DB_TRANSIENT', message, { sqlState }, { cause: err });
    }
    return new PipelineError('DB_ERROR', message, { sqlState }, { cause: err });
  }
  if (transientErrorNames.has(name) || e.$retryable?.throttling) {
    return new PipelineError('DB_TRANSIENT', message, { awsError: name }, { cause: err });
  }
  return new PipelineError('DB_ERROR', message, { awsError: name }, { cause: err });
}

/** Errors after which the statement certainly did not run: the cluster was resuming, or the call was throttled. */
const notRunErrorNames = new Set([
  'DatabaseResumingException',
  'ThrottlingException',
  'TooManyRequestsException',
]);

/** Runs of a transaction's work: the first, and two more after a lost answer or a deadlock. */
const transactionAttempts = 3;

/** A statement failure after which the rolled-back transaction can simply be run again. */
const rerunnable = (err: PipelineError) =>
  err.details.answerLost === true ||
  (err.code === 'DB_TRANSIENT' && transientSqlStates.has(String(err.details.sqlState)));

/**
 * Safe to run again: the statement was rolled back (deadlock, serialization) or never ran. A
 * 500/503 is not retried here, since a non-idempotent auto-commit statement may have run.
 */
const isTransient = (err: unknown) =>
  err instanceof PipelineError &&
  err.code === 'DB_TRANSIENT' &&
  (err.details.sqlState !== undefined ||
    notRunErrorNames.has(String(err.details.awsError)) ||
    (err.cause as { $retryable?: { throttling?: boolean } } | undefined)?.$retryable?.throttling === true);

/** `YYYY-MM-DD HH:MM:SS.FFF` in UTC: the only shape the TIMESTAMP hint parses (ISO `T…Z` is refused). */
function formatTimestamp(name: string, value: Date): string {
  if (Number.isNaN(value.getTime())) throw new TypeError(`SQL parameter :${name} is an invalid Date`);
  return value.toISOString().replace('T', ' ').replace('Z', '');
}

function toParameter(name: string, value: SqlValue | undefined): SqlParameter {
  if (value === null || value === undefined) return { name, value: { isNull: true } };
  switch (typeof value) {
    case 'string':
      // No hint: AWS binds it as character varying, which is why uuids need sqlParam.uuid.
      return { name, value: { stringValue: value } };
    case 'number':
      // Beyond 2^53 the value is already inexact; a double keeps it from overflowing a Java long.
      return { name, value: Number.isSafeInteger(value) ? { longValue: value } : { doubleValue: value } };
    case 'boolean':
      return { name, value: { booleanValue: value } };
  }
  switch (value.kind) {
    case 'uuid':
      return { name, value: { stringValue: value.value }, typeHint: 'UUID' };
    case 'timestamp':
      return { name, value: { stringValue: formatTimestamp(name, value.value) }, typeHint: 'TIMESTAMP' };
    case 'json': {
      // JSON.stringify(undefined) is undefined: send NULL, as node-postgres does for the pg adapter.
      const text = JSON.stringify(value.value) as string | undefined;
      return text === undefined
        ? { name, value: { isNull: true } }
        : { name, value: { stringValue: text }, typeHint: 'JSON' };
    }
  }
}

/** Only the names the SQL uses: the scan (and its missing-value error) is the pg adapter's own. */
function toParameters(sql: string, params: SqlParams | undefined): SqlParameter[] {
  assertPortableParams(params);
  const { names } = toPositional(sql, params);
  return names.map((name) => toParameter(name, params?.[name]));
}

const integerTypes = new Set(['int2', 'int4', 'int8', 'oid', 'serial', 'bigserial', 'smallserial']);
const timestampTypes = new Set(['timestamptz', 'timestamp']);
const jsonTypes = new Set(['json', 'jsonb']);
const timestampText = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?$/;

/** The Data API gives timestamps in UTC without offset; the fraction is truncated to ms like node-postgres. */
function parseTimestamp(text: string): Date | string {
  const m = timestampText.exec(text);
  // infinity / BC: no Date can hold them faithfully, so the text goes through unchanged.
  if (!m) return text;
  const [, y, mo, d, h, mi, s, frac = ''] = m;
  const ms = Number(frac.padEnd(3, '0').slice(0, 3));
  return new Date(Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), ms));
}

function decodeString(text: string, typeName: string): unknown {
  if (timestampTypes.has(typeName)) return parseTimestamp(text);
  if (jsonTypes.has(typeName)) return JSON.parse(text);
  // longReturnType STRING, should a caller ever set it.
  if (integerTypes.has(typeName)) return Number(text);
  return text;
}

function decodeArray(array: ArrayValue, elementType: string): unknown[] {
  if (array.arrayValues)
    return array.arrayValues.map((a) => (a === null ? null : decodeArray(a, elementType)));
  if (array.stringValues)
    return array.stringValues.map((s) => (s === null ? null : decodeString(s, elementType)));
  return array.longValues ?? array.doubleValues ?? array.booleanValues ?? [];
}

function decodeField(field: Field, column: ColumnMetadata | undefined): unknown {
  const typeName = column?.typeName?.toLowerCase() ?? '';
  if (field.isNull) return null;
  if (field.stringValue !== undefined) return decodeString(field.stringValue, typeName);
  if (field.longValue !== undefined) return field.longValue;
  if (field.doubleValue !== undefined) return field.doubleValue;
  if (field.booleanValue !== undefined) return field.booleanValue;
  // node-postgres gives bytea as a Buffer.
  if (field.blobValue !== undefined) return Buffer.from(field.blobValue);
  // pgjdbc names array types `_int4`, `_text`, ...
  if (field.arrayValue !== undefined) return decodeArray(field.arrayValue, typeName.replace(/^_/, ''));
  return null;
}

function toResult<R extends Row>(output: ExecuteStatementCommandOutput): QueryResult<R> {
  const columns = output.columnMetadata ?? [];
  const records = output.records ?? [];
  const rows = records.map((record) => {
    const row: Row = {};
    record.forEach((field, i) => {
      const column = columns[i];
      row[column?.label ?? column?.name ?? `?column?${i}`] = decodeField(field, column);
    });
    return row as R;
  });
  // A statement that returns rows (SELECT, ... RETURNING) reports 0 records updated on the Data API,
  // while node-postgres counts the rows: the returned rows are the count in both cases.
  const returnsRows = columns.length > 0 || records.length > 0;
  return { rows, rowCount: returnsRows ? records.length : (output.numberOfRecordsUpdated ?? 0) };
}

/** Every SDK call goes through here so that no AWS error leaves the adapter untranslated. */
async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw translateDataApiError(err);
  }
}

/** Where and how to reach the cluster; the SDK client is built once per Lambda container and shared. */
export interface DataApiClientOptions {
  readonly client: RDSDataClient;
  readonly resourceArn: string;
  readonly secretArn: string;
  readonly database: string;
  readonly retry?: RetryPolicy;
  readonly retryDeps?: RetryDeps;
}

/**
 * SqlClient over the RDS Data API, for Lambdas that must not hold connections to Aurora.
 * Rows decode to what PgSqlClient returns (the contract suite holds both to it). Retries
 * (DB_TRANSIENT only) cover auto-commit statements and BeginTransaction; a statement inside
 * a transaction is never replayed, because the failure may have ended the transaction.
 */
export class DataApiSqlClient implements SqlClient {
  private readonly retry: RetryPolicy;

  constructor(private readonly options: DataApiClientOptions) {
    this.retry = options.retry ?? dataApiDefaultRetry;
  }

  query<R extends Row = Row>(sql: string, params?: SqlParams): Promise<QueryResult<R>> {
    return withRetry(() => this.execute<R>(sql, params), isTransient, this.retry, this.options.retryDeps);
  }

  /**
   * The Data API refuses a second call on a transactionId while one runs, so the executor
   * queues statements (and the final commit or rollback) behind each other: concurrent
   * `tx.query` calls behave as they do on one pg connection.
   */
  async transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.transactionOnce(work);
      } catch (err) {
        const again =
          err instanceof PipelineError && err.details.rolledBack === true && attempt < transactionAttempts;
        if (!again) throw err;
        await (this.options.retryDeps?.sleep ?? sleep)(
          backoffDelay(attempt, this.retry, this.options.retryDeps?.random),
        );
      }
    }
  }

  /**
   * One run of `work` in one transaction. No call inside it is sent twice (see `sendOnce`): a
   * statement whose answer was lost, or that a deadlock or serialization failure rolled back,
   * ends the transaction with a rollback and `details.rolledBack`, and {@link transaction} runs
   * `work` again from the start in a new one (`work` must therefore only talk to the database).
   * A commit whose answer was lost is not run again: it may have committed, and the error says
   * so with `details.commitOutcome: 'unknown'` (callers that can tell, from what they wrote,
   * check; the tasks commands do).
   */
  private async transactionOnce<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const { client, resourceArn, secretArn, database } = this.options;
    const begun = await withRetry(
      () => call(() => client.send(new BeginTransactionCommand({ resourceArn, secretArn, database }))),
      isTransient,
      this.retry,
      this.options.retryDeps,
    );
    const transactionId = begun.transactionId;
    if (!transactionId) throw new PipelineError('DB_ERROR', 'BeginTransaction returned no transactionId');

    let tail: Promise<unknown> = Promise.resolve();
    const serial = <X>(fn: () => Promise<X>): Promise<X> => {
      const next = tail.then(fn, fn);
      tail = next.catch(() => {}); // the caller of `fn` gets its failure; the queue only has to move on
      return next;
    };

    let result: T;
    try {
      result = await work({
        query: <R extends Row = Row>(sql: string, params?: SqlParams) =>
          serial(() => this.execute<R>(sql, params, transactionId)),
      });
    } catch (err) {
      const rollbackError = await serial(() => this.rollback(transactionId));
      if (err instanceof PipelineError) {
        // The original error is the one the caller acts on; a failed rollback travels with it.
        if (rollbackError) err.details.rollbackError = rollbackError;
        else if (rerunnable(err)) err.details.rolledBack = true;
      }
      throw err;
    }
    try {
      await serial(() =>
        call(() =>
          client.send(sendOnce(new CommitTransactionCommand({ resourceArn, secretArn, transactionId }))),
        ),
      );
    } catch (err) {
      if (err instanceof PipelineError && err.details.answerLost === true) {
        err.details.commitOutcome = 'unknown';
        throw err;
      }
      const rollbackError = await serial(() => this.rollback(transactionId));
      if (rollbackError && err instanceof PipelineError) err.details.rollbackError = rollbackError;
      throw err;
    }
    return result;
  }

  /** Nothing to release: the Data API is stateless HTTP, and the SDK client belongs to the caller. */
  async close(): Promise<void> {}

  private async execute<R extends Row>(sql: string, params?: SqlParams, transactionId?: string) {
    const parameters = toParameters(sql, params);
    const { client, resourceArn, secretArn, database } = this.options;
    const command = new ExecuteStatementCommand({
      resourceArn,
      secretArn,
      database,
      sql,
      parameters,
      transactionId,
      includeResultMetadata: true,
    });
    const output = await call(() => client.send(transactionId ? sendOnce(command) : command));
    return toResult<R>(output);
  }

  /**
   * Returns (not throws) a rollback failure. TransactionNotFoundException means there is nothing
   * left to roll back: a failed commit ends the transaction, and Aurora drops one idle for 3 minutes.
   */
  private async rollback(transactionId: string): Promise<PipelineError | undefined> {
    const { client, resourceArn, secretArn } = this.options;
    try {
      await call(() =>
        client.send(new RollbackTransactionCommand({ resourceArn, secretArn, transactionId })),
      );
      return undefined;
    } catch (err) {
      const cause = (err as PipelineError).cause as { name?: string } | undefined;
      return cause?.name === 'TransactionNotFoundException' ? undefined : (err as PipelineError);
    }
  }
}
