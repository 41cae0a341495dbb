import {
  BeginTransactionCommand,
  CommitTransactionCommand,
  DatabaseErrorException,
  DatabaseResumingException,
  ExecuteStatementCommand,
  InternalServerErrorException,
  RDSDataClient,
  RollbackTransactionCommand,
  ServiceUnavailableError,
  TransactionNotFoundException,
} from '@aws-sdk/client-rds-data';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  DataApiSqlClient,
  dataApiDefaultRetry,
  translateDataApiError,
} from '../../shared/db/data-api-client';
import type { RetryPolicy } from '../../shared/db/retry';
import { sqlParam } from '../../shared/db/sql-client';
import { PipelineError } from '../../shared/errors';
import { elapse, useFakeTime } from '../support/fake-time';

const rds = mockClient(RDSDataClient);
const target = { resourceArn: 'arn:aws:rds:eu-west-1:1:cluster:c', secretArn: 'arn:secret', database: 'app' };
const $metadata = {};

const resuming = () =>
  new DatabaseResumingException({
    message: 'The Aurora DB instance arn:aws:rds:eu-west-1:1:cluster:c is resuming after being auto-paused.',
    $metadata,
  });
const sqlError = (text: string) => new DatabaseErrorException({ message: text, $metadata });

/** A client whose sleeps are recorded instead of waited; random() = 1 takes the top of each jitter window. */
function makeClient(retry?: RetryPolicy) {
  const delays: number[] = [];
  const db = new DataApiSqlClient({
    client: new RDSDataClient({ region: 'eu-west-1' }),
    ...target,
    retry,
    retryDeps: {
      sleep: async (ms) => {
        delays.push(ms);
      },
      random: () => 1,
    },
  });
  return { db, delays };
}

describe('DataApiSqlClient', () => {
  beforeEach(() => {
    rds.reset();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('retries a resuming cluster with growing delays, then returns the rows', async () => {
    rds
      .on(ExecuteStatementCommand)
      .rejectsOnce(resuming())
      .rejectsOnce(resuming())
      .rejectsOnce(resuming())
      .resolves({ columnMetadata: [{ label: 'one', typeName: 'int4' }], records: [[{ longValue: 1 }]] });
    const { db, delays } = makeClient();

    const result = await db.query('SELECT 1 AS one');

    expect(result).toEqual({ rows: [{ one: 1 }], rowCount: 1 });
    expect(rds.commandCalls(ExecuteStatementCommand)).toHaveLength(4);
    expect(delays).toEqual([500, 1_000, 2_000]);
  });

  it("gives up after the policy's attempts with DB_TRANSIENT carrying the AWS error", async () => {
    rds.on(ExecuteStatementCommand).rejects(resuming());
    const { db, delays } = makeClient();

    const err = await db.query('SELECT 1').catch((e: unknown) => e);

    expect(err).toBeInstanceOf(PipelineError);
    expect(err).toMatchObject({ code: 'DB_TRANSIENT', details: { awsError: 'DatabaseResumingException' } });
    expect((err as PipelineError).cause).toBeInstanceOf(DatabaseResumingException);
    expect(rds.commandCalls(ExecuteStatementCommand)).toHaveLength(dataApiDefaultRetry.attempts);
    expect(delays).toHaveLength(dataApiDefaultRetry.attempts - 1);
    // Tens of seconds at the top of the jitter: an Aurora resume takes ~15 s, sometimes more.
    expect(delays.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(30_000);
  });

  it('does not replay a statement after a 500: it may have run (the SDK retried already)', async () => {
    rds
      .on(ExecuteStatementCommand)
      .rejects(new InternalServerErrorException({ message: 'internal error', $metadata }));
    const { db, delays } = makeClient();

    const err = await db
      .query('INSERT INTO tasks (task_id) VALUES (:id)', { id: sqlParam.uuid('x') })
      .catch((e: unknown) => e);

    expect(err).toMatchObject({
      code: 'DB_TRANSIENT',
      details: { awsError: 'InternalServerErrorException' },
    });
    expect(rds.commandCalls(ExecuteStatementCommand)).toHaveLength(1);
    expect(delays).toEqual([]);
  });

  it('does not retry a duplicate key and reports it as DB_CONSTRAINT', async () => {
    rds
      .on(ExecuteStatementCommand)
      .rejects(
        sqlError(
          'ERROR: duplicate key value violates unique constraint "tasks_pkey"; Detail: Key (task_id)=(x) already exists.; SQLState: 23505',
        ),
      );
    const { db, delays } = makeClient();

    const err = await db
      .query('INSERT INTO tasks (task_id) VALUES (:id)', { id: sqlParam.uuid('x') })
      .catch((e) => e);

    expect(err).toMatchObject({
      code: 'DB_CONSTRAINT',
      details: { sqlState: '23505', constraint: 'tasks_pkey' },
    });
    expect((err as PipelineError).cause).toBeInstanceOf(DatabaseErrorException);
    expect(rds.commandCalls(ExecuteStatementCommand)).toHaveLength(1);
    expect(delays).toEqual([]);
  });

  it('rolls back and rethrows when the work throws, without committing', async () => {
    rds.on(BeginTransactionCommand).resolves({ transactionId: 'tx-1' });
    rds.on(ExecuteStatementCommand).resolves({ numberOfRecordsUpdated: 1 });
    rds.on(RollbackTransactionCommand).resolves({ transactionStatus: 'Rollback Complete' });
    const { db } = makeClient();
    const boom = new Error('boom');

    const attempt = db.transaction(async (tx) => {
      await tx.query('DELETE FROM tasks');
      throw boom;
    });

    await expect(attempt).rejects.toBe(boom);
    expect(rds.commandCalls(ExecuteStatementCommand)[0]?.args[0].input.transactionId).toBe('tx-1');
    expect(
      rds.commandCalls(
        RollbackTransactionCommand,
        { transactionId: 'tx-1', resourceArn: target.resourceArn, secretArn: target.secretArn },
        true,
      ),
    ).toHaveLength(1);
    expect(rds.commandCalls(CommitTransactionCommand)).toHaveLength(0);
  });

  it('commits when the work resolves', async () => {
    rds.on(BeginTransactionCommand).resolves({ transactionId: 'tx-2' });
    rds.on(ExecuteStatementCommand).resolves({ numberOfRecordsUpdated: 1 });
    rds.on(CommitTransactionCommand).resolves({ transactionStatus: 'Transaction Committed' });
    const { db } = makeClient();

    const out = await db.transaction(async (tx) => (await tx.query('DELETE FROM tasks')).rowCount);

    expect(out).toBe(1);
    expect(rds.commandCalls(CommitTransactionCommand, { transactionId: 'tx-2' })).toHaveLength(1);
    expect(rds.commandCalls(RollbackTransactionCommand)).toHaveLength(0);
  });

  it('reports a failed commit even when the rollback finds the transaction gone', async () => {
    rds.on(BeginTransactionCommand).resolves({ transactionId: 'tx-3' });
    rds.on(ExecuteStatementCommand).resolves({ numberOfRecordsUpdated: 1 });
    rds.on(CommitTransactionCommand).rejects(sqlError('ERROR: could not serialize access; SQLState: 40001'));
    rds
      .on(RollbackTransactionCommand)
      .rejects(new TransactionNotFoundException({ message: 'Transaction tx-3 is not found', $metadata }));
    const { db } = makeClient();

    const err = await db.transaction((tx) => tx.query('DELETE FROM tasks')).catch((e: unknown) => e);

    expect(err).toMatchObject({ code: 'DB_TRANSIENT', details: { sqlState: '40001' } });
    expect((err as PipelineError).details.rollbackError).toBeUndefined();
    expect(rds.commandCalls(RollbackTransactionCommand)).toHaveLength(1);
  });

  it('retries BeginTransaction but never a statement inside the transaction', async () => {
    rds.on(BeginTransactionCommand).rejectsOnce(resuming()).resolves({ transactionId: 'tx-4' });
    rds.on(ExecuteStatementCommand).rejects(resuming());
    rds.on(RollbackTransactionCommand).resolves({});
    const { db, delays } = makeClient();

    const err = await db.transaction((tx) => tx.query('DELETE FROM tasks')).catch((e: unknown) => e);

    expect(err).toMatchObject({ code: 'DB_TRANSIENT' });
    expect(rds.commandCalls(BeginTransactionCommand)).toHaveLength(2);
    expect(rds.commandCalls(ExecuteStatementCommand)).toHaveLength(1);
    expect(delays).toHaveLength(1);
  });

  it('runs the statements of one transaction one at a time', async () => {
    const time = useFakeTime();
    let running = 0;
    let mostAtOnce = 0;
    rds.on(BeginTransactionCommand).resolves({ transactionId: 'tx-5' });
    rds.on(ExecuteStatementCommand).callsFake(async () => {
      running++;
      mostAtOnce = Math.max(mostAtOnce, running);
      // Each statement takes 1 ms of fake time: long enough for another to start meanwhile.
      await elapse(1, undefined);
      running--;
      return { numberOfRecordsUpdated: 1 };
    });
    rds.on(CommitTransactionCommand).resolves({});
    const { db } = makeClient();

    const done = db.transaction((tx) =>
      Promise.all([1, 2, 3].map((n) => tx.query('DELETE FROM t WHERE n = :n', { n }))),
    );
    await time.advance(3);
    await done;

    expect(rds.commandCalls(ExecuteStatementCommand)).toHaveLength(3);
    expect(mostAtOnce).toBe(1);
  });

  it('sends only the parameters the SQL names, typed as the Data API needs them', async () => {
    rds.on(ExecuteStatementCommand).resolves({ numberOfRecordsUpdated: 1 });
    const { db } = makeClient();

    await db.query(
      'UPDATE t SET a = :s, b = :i, c = :f, d = :yes, e = :none, f = :id, g = :at, h = :doc, i = :s',
      {
        s: 'text',
        i: 42,
        f: 1.5,
        yes: true,
        none: null,
        id: sqlParam.uuid('6a1f1f0e-8a8f-4c44-9d5b-0d1f6f0a3c11'),
        at: sqlParam.timestamp(new Date('2024-02-03T04:05:06.007Z')),
        doc: sqlParam.json({ a: [1] }),
        unused: 'never sent',
      },
    );

    const input = rds.commandCalls(ExecuteStatementCommand)[0]?.args[0].input;
    expect(input).toMatchObject({ ...target, includeResultMetadata: true });
    expect(input?.transactionId).toBeUndefined();
    expect(input?.parameters).toEqual([
      { name: 's', value: { stringValue: 'text' } },
      { name: 'i', value: { longValue: 42 } },
      { name: 'f', value: { doubleValue: 1.5 } },
      { name: 'yes', value: { booleanValue: true } },
      { name: 'none', value: { isNull: true } },
      { name: 'id', value: { stringValue: '6a1f1f0e-8a8f-4c44-9d5b-0d1f6f0a3c11' }, typeHint: 'UUID' },
      { name: 'at', value: { stringValue: '2024-02-03 04:05:06.007' }, typeHint: 'TIMESTAMP' },
      { name: 'doc', value: { stringValue: '{"a":[1]}' }, typeHint: 'JSON' },
    ]);
  });

  it('decodes fields by column type name, keyed by label', async () => {
    rds.on(ExecuteStatementCommand).resolves({
      columnMetadata: [
        { name: 'seq', label: 'seq', typeName: 'serial' },
        { name: 'n', label: 'big', typeName: 'int8' },
        { name: 'price', label: 'price', typeName: 'numeric' },
        { name: 'at', label: 'at', typeName: 'timestamptz' },
        { name: 'doc', label: 'doc', typeName: 'jsonb' },
        { name: 'gone', label: 'gone', typeName: 'text' },
        { name: 'tags', label: 'tags', typeName: '_text' },
      ],
      records: [
        [
          { longValue: 7 },
          { stringValue: '9007199254740991' },
          { stringValue: '1.50' },
          { stringValue: '2024-02-03 04:05:06.78' },
          { stringValue: '{"a":{"b":null}}' },
          { isNull: true },
          { arrayValue: { stringValues: ['x'] } },
        ],
      ],
      numberOfRecordsUpdated: 0,
    });
    const { db } = makeClient();

    const { rows, rowCount } = await db.query('UPDATE t SET x = 1 RETURNING *');

    expect(rows).toEqual([
      {
        seq: 7,
        big: 9007199254740991,
        price: '1.50',
        at: new Date('2024-02-03T04:05:06.780Z'),
        doc: { a: { b: null } },
        gone: null,
        tags: ['x'],
      },
    ]);
    expect(rowCount).toBe(1);
  });

  it.each([
    [sqlError('ERROR: deadlock detected; SQLState: 40P01'), 'DB_TRANSIENT'],
    [sqlError('ERROR: new row violates check constraint "c"; SQLState: 23514'), 'DB_CONSTRAINT'],
    [sqlError('ERROR: syntax error at or near "x"; Position: 1; SQLState: 42601'), 'DB_ERROR'],
    [new ServiceUnavailableError({ message: 'unavailable', $metadata }), 'DB_TRANSIENT'],
    [Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }), 'DB_TRANSIENT'],
    [new TransactionNotFoundException({ message: 'Transaction t is not found', $metadata }), 'DB_ERROR'],
  ])('translates %s into %s', (err, code) => {
    const translated = translateDataApiError(err);
    expect(translated.code).toBe(code);
    expect(translated.cause).toBe(err);
  });
});
