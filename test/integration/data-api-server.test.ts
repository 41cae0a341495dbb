import { randomUUID } from 'node:crypto';
import {
  BeginTransactionCommand,
  CommitTransactionCommand,
  ExecuteStatementCommand,
  type ExecuteStatementCommandInput,
  RDSDataClient,
  RollbackTransactionCommand,
} from '@aws-sdk/client-rds-data';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  type DataApiServer,
  type DataApiServerOptions,
  startDataApiServer,
} from '../support/data-api-server';
import { createTestDatabase } from '../support/database';

type Sdk = { name: string; message: string; $metadata: { httpStatusCode?: number } };

/** The local endpoint must fail where AWS fails: a friendlier one hides bugs until deploy. */
describe('local Data API endpoint behaves like AWS', () => {
  let server: DataApiServer;
  let client: RDSDataClient;
  let url: string;
  let drop: () => Promise<void>;

  const execute = (input: Omit<ExecuteStatementCommandInput, 'resourceArn' | 'secretArn'>) =>
    client.send(
      new ExecuteStatementCommand({ resourceArn: server.resourceArn, secretArn: server.secretArn, ...input }),
    );
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => expect.fail('expected a rejection'),
      (e: Sdk) => e,
    );
  const arns = () => ({ resourceArn: server.resourceArn, secretArn: server.secretArn });
  const limitedArns = (limited: DataApiServer) => ({
    resourceArn: limited.resourceArn,
    secretArn: limited.secretArn,
  });

  beforeAll(async () => {
    const created = await createTestDatabase({ migrated: false });
    url = created.url;
    drop = created.drop;
    server = await startDataApiServer(url);
    client = new RDSDataClient({
      endpoint: server.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    await execute({ sql: 'CREATE TABLE t (id uuid PRIMARY KEY, at timestamptz, n int)' });
  });
  afterAll(async () => {
    client.destroy();
    await server.close();
    await drop();
  });
  beforeEach(async () => {
    await execute({ sql: 'TRUNCATE t' });
  });

  it('binds a bare stringValue as character varying, so it does not go into a uuid column', async () => {
    const err = await failure(
      execute({
        sql: 'INSERT INTO t (id) VALUES (:id)',
        parameters: [{ name: 'id', value: { stringValue: randomUUID() } }],
      }),
    );
    expect(err.name).toBe('DatabaseErrorException');
    expect(err.$metadata.httpStatusCode).toBe(400);
    expect(err.message).toMatch(/column "id" is of type uuid but expression is of type character varying/);
    expect(err.message).toMatch(/SQLState: 42804$/);
  });

  it('accepts a uuid with the UUID hint or an explicit cast', async () => {
    const hinted = await execute({
      sql: 'INSERT INTO t (id) VALUES (:id)',
      parameters: [{ name: 'id', value: { stringValue: randomUUID() }, typeHint: 'UUID' }],
    });
    const cast = await execute({
      sql: 'INSERT INTO t (id) VALUES (:id::uuid)',
      parameters: [{ name: 'id', value: { stringValue: randomUUID() } }],
    });
    expect([hinted.numberOfRecordsUpdated, cast.numberOfRecordsUpdated]).toEqual([1, 1]);
  });

  it('refuses an ISO timestamp with the TIMESTAMP hint and takes YYYY-MM-DD HH:MM:SS.FFF', async () => {
    const insert = (at: string) =>
      execute({
        sql: 'INSERT INTO t (id, at) VALUES (gen_random_uuid(), :at)',
        parameters: [{ name: 'at', value: { stringValue: at }, typeHint: 'TIMESTAMP' }],
      });
    const err = await failure(insert('2024-02-03T04:05:06.789Z'));
    expect(err.$metadata.httpStatusCode).toBe(400);
    expect(err.message).toMatch(/Parse Error for TimeStamp/);

    await insert('2024-02-03 04:05:06.789');
    const read = await execute({ sql: 'SELECT at FROM t' });
    expect(read.records).toEqual([[{ stringValue: '2024-02-03 04:05:06.789' }]]);
  });

  it('refuses more than one statement per call', async () => {
    const err = await failure(execute({ sql: 'SELECT 1; SELECT 2' }));
    expect(err.name).toBe('ValidationException');
    expect(err.message).toBe("Multistatements aren't supported.");
    expect(err.$metadata.httpStatusCode).toBe(400);
  });

  it('refuses array parameters', async () => {
    const err = await failure(
      execute({
        sql: 'SELECT :ids AS ids',
        parameters: [{ name: 'ids', value: { arrayValue: { longValues: [1, 2] } } }],
      }),
    );
    expect(err.name).toBe('ValidationException');
    expect(err.message).toBe('Array parameters are not supported');
  });

  it('reports SQL errors as DatabaseErrorException with position and SQLState', async () => {
    const err = await failure(execute({ sql: 'SELECT * FROM nope' }));
    expect(err.name).toBe('DatabaseErrorException');
    expect(err.message).toBe('ERROR: relation "nope" does not exist; Position: 15; SQLState: 42P01');
  });

  it('formats values as AWS does: timestamps in UTC without T or offset, numeric as text, json as text', async () => {
    const out = await execute({
      sql: `SELECT '2024-02-03 04:05:06.5+02'::timestamptz AS ts, '2024-02-03 04:05:06'::timestamp AS plain,
                   7::int8 AS big, 2::int4 AS small, 1.50::numeric(6,2) AS num, 0.25::float8 AS f, true AS b,
                   NULL::text AS nothing, '{"a": 1}'::jsonb AS doc, ARRAY['x', 'y'] AS tags, ARRAY[1, 2] AS ids,
                   '\\x0102'::bytea AS bin, :label AS label`,
      parameters: [{ name: 'label', value: { stringValue: 'hi' } }],
    });
    expect(out.records).toEqual([
      [
        { stringValue: '2024-02-03 02:05:06.5' },
        { stringValue: '2024-02-03 04:05:06' },
        { longValue: 7 },
        { longValue: 2 },
        { stringValue: '1.50' },
        { doubleValue: 0.25 },
        { booleanValue: true },
        { isNull: true },
        { stringValue: '{"a": 1}' },
        { arrayValue: { stringValues: ['x', 'y'] } },
        { arrayValue: { longValues: [1, 2] } },
        { blobValue: new Uint8Array([1, 2]) },
        { stringValue: 'hi' },
      ],
    ]);
    expect(out.columnMetadata).toBeUndefined();
    expect(out.numberOfRecordsUpdated).toBe(0);
  });

  it('describes columns only when asked, with pgjdbc type names', async () => {
    const out = await execute({
      sql: 'SELECT id AS key, at, n, ARRAY[1] AS list FROM t',
      includeResultMetadata: true,
    });
    expect(out.columnMetadata?.map((c) => [c.name, c.label, c.typeName, c.type, c.tableName])).toEqual([
      ['key', 'key', 'uuid', 1111, 't'],
      ['at', 'at', 'timestamptz', 93, 't'],
      ['n', 'n', 'int4', 4, 't'],
      ['list', 'list', '_int4', 2003, ''],
    ]);
  });

  it('returns formattedRecords, not records, for formatRecordsAs JSON', async () => {
    const out = await execute({
      sql: `SELECT 1 AS one, 1.50::numeric(6,2) AS num, '2024-02-03 04:05:06+00'::timestamptz AS ts,
                   '{"a": 1}'::jsonb AS doc, NULL::int AS nothing, ARRAY[true] AS flags`,
      formatRecordsAs: 'JSON',
    });
    expect(out.records).toBeUndefined();
    expect(JSON.parse(out.formattedRecords ?? 'null')).toEqual([
      { one: 1, num: '1.50', ts: '2024-02-03 04:05:06', doc: '{"a": 1}', nothing: null, flags: [true] },
    ]);
  });

  it('counts updated records for writes and none for statements returning rows', async () => {
    const write = await execute({
      sql: 'INSERT INTO t (id, n) VALUES (gen_random_uuid(), 1), (gen_random_uuid(), 2)',
    });
    const returning = await execute({ sql: 'UPDATE t SET n = n + 1 RETURNING n' });
    expect(write.numberOfRecordsUpdated).toBe(2);
    expect(returning.numberOfRecordsUpdated).toBe(0);
    expect(returning.records).toHaveLength(2);
  });

  it('commits and rolls back transactions, invisible to others until committed', async () => {
    const begin = () => client.send(new BeginTransactionCommand({ ...arns(), database: server.database }));
    const insert = (transactionId: string, n: number) =>
      execute({
        sql: 'INSERT INTO t (id, n) VALUES (gen_random_uuid(), :n)',
        transactionId,
        parameters: [{ name: 'n', value: { longValue: n } }],
      });

    const kept = (await begin()).transactionId as string;
    await insert(kept, 1);
    expect((await execute({ sql: 'SELECT n FROM t' })).records).toEqual([]);
    const committed = await client.send(new CommitTransactionCommand({ ...arns(), transactionId: kept }));
    expect(committed.transactionStatus).toBe('Transaction Committed');

    const dropped = (await begin()).transactionId as string;
    await insert(dropped, 2);
    const rolledBack = await client.send(
      new RollbackTransactionCommand({ ...arns(), transactionId: dropped }),
    );
    expect(rolledBack.transactionStatus).toBe('Rollback Complete');

    expect((await execute({ sql: 'SELECT n FROM t' })).records).toEqual([[{ longValue: 1 }]]);
  });

  it('answers TransactionNotFoundException for an unknown or finished transaction', async () => {
    const unknown = await failure(execute({ sql: 'SELECT 1', transactionId: 'not-a-transaction' }));
    expect(unknown.name).toBe('TransactionNotFoundException');
    expect(unknown.$metadata.httpStatusCode).toBe(404);

    const { transactionId } = await client.send(new BeginTransactionCommand(arns()));
    await client.send(new CommitTransactionCommand({ ...arns(), transactionId }));
    const again = await failure(client.send(new RollbackTransactionCommand({ ...arns(), transactionId })));
    expect(again.name).toBe('TransactionNotFoundException');
  });

  it('refuses a second call on a transaction while one is running', async () => {
    const { transactionId } = await client.send(new BeginTransactionCommand(arns()));
    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE t IN ACCESS EXCLUSIVE MODE');
      const blocked = execute({ sql: 'SELECT count(*) FROM t', transactionId });
      // Wait until the first call really waits on the lock, then overlap it: PostgreSQL tells of
      // a lock wait only in pg_stat_activity, so the test reads it (within vitest.config's poll
      // bound). Inside a transaction pg_stat_activity is a snapshot taken once, so each look
      // clears it first.
      await expect
        .poll(async () => {
          await locker.query('SELECT pg_stat_clear_snapshot()');
          const { rows } = await locker.query(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'SELECT count(*) FROM t%'",
          );
          return rows[0].n;
        })
        .toBe(1);
      const err = await failure(execute({ sql: 'SELECT 1', transactionId }));
      expect(err.name).toBe('DatabaseErrorException');
      expect(err.message).toBe('Transaction is still running a query');
      await locker.query('COMMIT');
      expect((await blocked).records).toEqual([[{ longValue: 0 }]]);
    } finally {
      await locker.end();
      await client.send(new RollbackTransactionCommand({ ...arns(), transactionId }));
    }
  });

  /** A second endpoint on the same database, with AWS's time limits shortened. */
  async function withLimits(
    options: Pick<DataApiServerOptions, 'statementTimeoutMs' | 'transactionIdleMs' | 'idleTimer'>,
    use: (send: RDSDataClient, limited: DataApiServer) => Promise<void>,
  ) {
    const limited = await startDataApiServer(url, options);
    const sdk = new RDSDataClient({
      endpoint: limited.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    try {
      await use(sdk, limited);
    } finally {
      sdk.destroy();
      await limited.close();
    }
  }

  it('cancels a statement past the timeout with StatementTimeoutException', async () => {
    await withLimits({ statementTimeoutMs: 200 }, async (sdk, limited) => {
      const err = await failure(
        sdk.send(new ExecuteStatementCommand({ ...limitedArns(limited), sql: 'SELECT pg_sleep(30)' })),
      );
      expect(err.name).toBe('StatementTimeoutException');
      expect(err.$metadata.httpStatusCode).toBe(400);
    });
  });

  it('rolls back a transaction left idle and forgets it', async () => {
    // The idle timers the endpoint arms, fired by the test: "idle past the limit" is a state the
    // test reaches, not a time it waits through (a call on a busy machine may take the limit).
    const timers: { fire: () => void; ms: number; armed: boolean }[] = [];
    const idleTimer = (fire: () => void, ms: number) => {
      const timer = { fire, ms, armed: true };
      timers.push(timer);
      return () => {
        timer.armed = false;
      };
    };
    await withLimits({ transactionIdleMs: 500, idleTimer }, async (sdk, limited) => {
      const { transactionId } = await sdk.send(new BeginTransactionCommand(limitedArns(limited)));
      await sdk.send(
        new ExecuteStatementCommand({
          ...limitedArns(limited),
          sql: 'INSERT INTO t (id) VALUES (gen_random_uuid())',
          transactionId,
        }),
      );
      // Each call re-armed the transaction's one timer at the idle limit; it runs out now.
      const armed = timers.filter((t) => t.armed);
      expect(armed.map((t) => t.ms)).toEqual([500]);
      armed[0]?.fire();
      const err = await failure(
        sdk.send(new ExecuteStatementCommand({ ...limitedArns(limited), sql: 'SELECT 1', transactionId })),
      );
      expect(err.name).toBe('TransactionNotFoundException');
      expect((await execute({ sql: 'SELECT id FROM t' })).records).toEqual([]);
    });
  });

  it('answers injected failures as AWS would, then serves again', async () => {
    server.failNext(1, { name: 'DatabaseResumingException', operation: 'Execute' });
    const err = await failure(execute({ sql: 'SELECT 1' }));
    expect(err.name).toBe('DatabaseResumingException');
    expect(err.$metadata.httpStatusCode).toBe(400);
    expect(err.message).toContain('is resuming after being auto-paused');
    expect((await execute({ sql: 'SELECT 1 AS one' })).records).toEqual([[{ longValue: 1 }]]);
  });
});
