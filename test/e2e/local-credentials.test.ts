import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { initCluster, postgresHost, removeLocalPostgres, startServer } from '../../infra/local/postgres';
import { makeCluster } from '../../infra/local/postgres-cluster';
import { postgresDataDir } from '../../infra/local/postgres-data-location';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { migrate } from '../../shared/db/migrate';
import { PgSqlClient } from '../../shared/db/pg-client';
import { freePort } from '../support/embedded-pg';
import { tempDataDir } from '../support/pipeline-client';
import { rawHttp } from '../support/raw-http';

/**
 * The local engines take only the credentials the runtime made for its data directory: no
 * fixed password, no unsigned or wrongly signed call. Before, PostgreSQL took `postgres` /
 * `pipeline` (a superuser, in the code), and the bus and dynalite took any request.
 */

const pgUrl = (port: number, user: string, password: string) =>
  `postgres://${user}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;

/** The SQLSTATE PostgreSQL answers a login with, or 'ok'. */
async function login(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 60_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  } finally {
    await client.end().catch(() => {});
  }
}

const forgedApproval = (taskId: string) => ({
  Source: topology.source,
  DetailType: 'content.approved',
  EventBusName: topology.busName,
  Detail: JSON.stringify({
    specversion: '1.0',
    id: randomUUID(),
    source: topology.source,
    type: 'content.approved',
    subject: taskId,
    time: new Date().toISOString(),
    datacontenttype: 'application/json',
    data: {
      taskId,
      version: 2,
      title: 'forged',
      assignee: null,
      reviewer: 'mallory',
      approvedAt: new Date().toISOString(),
    },
  }),
});

describe('the local engines take only the data directory credentials', () => {
  let runtime: Runtime;
  let dir: string;

  beforeAll(async () => {
    dir = tempDataDir('pipeline-credentials-');
    runtime = await startRuntime({ dataDir: dir, port: 0 });
  }, 240_000);

  afterAll(async () => {
    await runtime?.stop();
    await removeLocalPostgres(join(dir, 'postgres'));
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps them in a file of the data directory only its owner can read, all generated', () => {
    const file = join(dir, 'credentials.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const kept = JSON.parse(readFileSync(file, 'utf8'));
    expect(kept.postgres.superuserPassword).toMatch(/^[\w-]{32}$/);
    expect(kept.postgres.superuserPassword).not.toBe('pipeline');
    expect(kept.aws.accessKeyId).toMatch(/^[A-Z2-7]{20}$/);
    expect(kept.aws.secretAccessKey.length).toBeGreaterThanOrEqual(40);
    expect(runtime.credentials.aws).toEqual(kept.aws);
  });

  it('PostgreSQL refuses the superuser with the fixed password, and the runtime logs in as no superuser', async () => {
    const port = runtime.postgres.port;
    const kept = JSON.parse(readFileSync(join(dir, 'credentials.json'), 'utf8'));

    expect(await login(pgUrl(port, 'postgres', 'pipeline'))).toBe('28P01');
    expect(await login(pgUrl(port, 'postgres', kept.postgres.superuserPassword))).toBe('ok');
    const { rows } = await runtime.db.query<{ rolsuper: boolean; user: string }>(
      'SELECT rolsuper, current_user AS user FROM pg_roles WHERE rolname = current_user',
    );
    expect(rows).toEqual([{ rolsuper: false, user: 'pipeline_owner' }]);
    await expect(runtime.db.query("COPY (SELECT 1) TO PROGRAM 'id'")).rejects.toMatchObject({
      details: { sqlState: '42501' },
    });
  });

  it('the schema owner sees every session’s transaction, which the relay’s count of writers in flight reads', async () => {
    // relay_writers_in_flight (SECURITY DEFINER, the owner's) counts the tasks API's open
    // transactions by pg_stat_activity.xact_start, which PostgreSQL hides from a role that is
    // neither the session's nor pg_read_all_stats: the owner made without it counted 0 always.
    const kept = JSON.parse(readFileSync(join(dir, 'credentials.json'), 'utf8'));
    const other = new pg.Client({
      connectionString: pgUrl(runtime.postgres.port, 'postgres', kept.postgres.superuserPassword),
    });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query('SELECT txid_current()');
      const pid = Number((await other.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid);
      const { rows } = await runtime.db.query<{ open: boolean }>(
        'SELECT xact_start IS NOT NULL AS open FROM pg_stat_activity WHERE pid = :pid',
        { pid },
      );
      expect(rows).toEqual([{ open: true }]);
    } finally {
      await other.query('ROLLBACK').catch(() => undefined);
      await other.end();
    }
  });

  it('the bus refuses an unsigned PutEvents and one signed with other credentials, and delivers neither', async () => {
    const before = { ...runtime.bus.counters };
    const unsigned = await rawHttp(runtime.bus.endpoint, {
      method: 'POST',
      target: '/',
      headers: [
        ['content-type', 'application/x-amz-json-1.1'],
        ['x-amz-target', 'AWSEvents.PutEvents'],
      ],
      body: JSON.stringify({ Entries: [forgedApproval(randomUUID())] }),
    });
    expect(unsigned.status).toBe(403);
    expect(JSON.parse(unsigned.body)).toMatchObject({ __type: 'MissingAuthenticationTokenException' });

    const send = async (credentials: { accessKeyId: string; secretAccessKey: string }) => {
      const client = new EventBridgeClient({
        endpoint: runtime.bus.endpoint,
        region: 'us-east-1',
        credentials: { ...credentials },
        maxAttempts: 1,
      });
      try {
        return await client.send(new PutEventsCommand({ Entries: [forgedApproval(randomUUID())] })).then(
          () => 'accepted',
          (err: Error) => err.name,
        );
      } finally {
        client.destroy();
      }
    };
    expect(await send({ accessKeyId: 'local', secretAccessKey: 'local' })).toBe(
      'UnrecognizedClientException',
    );
    expect(
      await send({ accessKeyId: runtime.credentials.aws.accessKeyId, secretAccessKey: 'a'.repeat(40) }),
    ).toBe('InvalidSignatureException');
    expect(runtime.bus.counters).toEqual(before);
  });

  it('the bus takes a PutEvents signed with the data directory credentials', async () => {
    const client = new EventBridgeClient({
      endpoint: runtime.bus.endpoint,
      region: 'us-east-1',
      credentials: { ...runtime.credentials.aws },
    });
    try {
      // An event no rule routes: accepted, and nothing happens.
      const answer = await client.send(
        new PutEventsCommand({
          Entries: [
            { Source: 'test.owner', DetailType: 'nothing', Detail: '{}', EventBusName: topology.busName },
          ],
        }),
      );
      expect(answer.FailedEntryCount).toBe(0);
    } finally {
      client.destroy();
    }
  });

  it('dynalite refuses a write signed with other credentials, and writes nothing', async () => {
    const table = 'content-pipeline-inbox';
    const key = { pk: { S: `notify#${randomUUID()}` } };
    const other = new DynamoDBClient({
      endpoint: runtime.consumers.dynamo.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      maxAttempts: 1,
    });
    const wrongSecret = new DynamoDBClient({
      endpoint: runtime.consumers.dynamo.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: runtime.credentials.aws.accessKeyId, secretAccessKey: 'b'.repeat(40) },
      maxAttempts: 1,
    });
    const owner = new DynamoDBClient({
      endpoint: runtime.consumers.dynamo.endpoint,
      region: 'us-east-1',
      credentials: { ...runtime.credentials.aws },
    });
    try {
      const put = (client: DynamoDBClient) =>
        client.send(new PutItemCommand({ TableName: table, Item: { ...key, forged: { S: 'yes' } } })).then(
          () => 'written',
          (err: Error & { $metadata?: { httpStatusCode?: number } }) =>
            `${err.name} ${err.$metadata?.httpStatusCode}`,
        );
      expect(await put(other)).toBe('UnrecognizedClientException 400');
      expect(await put(wrongSecret)).toBe('InvalidSignatureException 400');
      const unsigned = await rawHttp(runtime.consumers.dynamo.endpoint, {
        method: 'POST',
        target: '/',
        headers: [
          ['content-type', 'application/x-amz-json-1.0'],
          ['x-amz-target', 'DynamoDB_20120810.PutItem'],
        ],
        body: JSON.stringify({ TableName: table, Item: { ...key, forged: { S: 'yes' } } }),
      });
      expect(unsigned.status).toBe(400);
      expect(JSON.parse(unsigned.body).__type).toMatch(/MissingAuthenticationTokenException$/);

      const read = await owner.send(new GetItemCommand({ TableName: table, Key: key, ConsistentRead: true }));
      expect(read.Item).toBeUndefined();
    } finally {
      for (const c of [other, wrongSecret, owner]) c.destroy();
    }
  });
});

describe('a data directory made with the fixed password of earlier versions', () => {
  let dir: string | undefined;
  let runtime: Runtime | undefined;
  afterAll(async () => {
    await runtime?.stop();
    if (dir) {
      await removeLocalPostgres(join(dir, 'postgres'));
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps working: its superuser moves to a generated password, its data kept, its objects the owner role', async () => {
    dir = tempDataDir('pipeline-legacy-password-');
    // What an earlier version made: initdb with `pipeline`, migrations and data as `postgres`.
    const host = await postgresHost();
    const dataDir = postgresDataDir(resolve(dir, 'postgres'), host.user);
    await makeCluster(
      dataDir,
      (staging) => initCluster(staging, host, 'pipeline'),
      () => {},
    );
    const port = await freePort();
    const server = await startServer(host, { dataDir, port, flags: ['-c', 'listen_addresses=127.0.0.1'] });
    try {
      const db = new PgSqlClient({
        connectionString: pgUrl(port, 'postgres', 'pipeline'),
        maxConnections: 1,
      });
      try {
        await migrate(db);
        await db.query(
          "INSERT INTO tasks (task_id, title, assignee) VALUES ('6f1f7c5e-8a8e-4a43-9a55-7d3b8f7e2a01', 'kept', 'ana')",
        );
      } finally {
        await db.close();
      }
    } finally {
      await server.stop();
    }
    const lines: string[] = [];

    runtime = await startRuntime({ dataDir: dir, port: 0, log: (m) => lines.push(m) });

    expect(lines.join('\n')).toContain('had the fixed password of earlier versions: changed');
    expect(await login(pgUrl(runtime.postgres.port, 'postgres', 'pipeline'))).toBe('28P01');
    const kept = JSON.parse(readFileSync(join(dir, 'credentials.json'), 'utf8'));
    expect(await login(pgUrl(runtime.postgres.port, 'postgres', kept.postgres.superuserPassword))).toBe('ok');
    const { rows } = await runtime.db.query<{ title: string }>('SELECT title FROM tasks');
    expect(rows).toEqual([{ title: 'kept' }]);
    const owners = await runtime.db.query<{ owner: string }>(
      `SELECT DISTINCT pg_get_userbyid(relowner) AS owner FROM pg_class
        WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'S', 'i')`,
    );
    expect(owners.rows).toEqual([{ owner: 'pipeline_owner' }]);
  }, 240_000);
});
