import { afterEach, describe, expect, it, vi } from 'vitest';
import { createSqlClient, parseConfig } from '../../shared/config';
import { DataApiSqlClient } from '../../shared/db/data-api-client';
import { PgSqlClient } from '../../shared/db/pg-client';
import { applicationName, pgTimeouts, schemaOwnerTimeouts } from '../../shared/db/pg-settings';
import { isPipelineError, type PipelineError } from '../../shared/errors';

const dataApiEnv = {
  DB_CLUSTER_ARN: 'arn:aws:rds:eu-west-1:123456789012:cluster:content-pipeline',
  DB_SECRET_ARN: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:content-db-AbCdEf',
  DB_NAME: 'content',
};

function configError(env: Record<string, string | undefined>): PipelineError {
  try {
    parseConfig(env);
  } catch (err) {
    if (isPipelineError(err, 'CONFIG')) return err;
    throw err;
  }
  throw new Error('parseConfig accepted an invalid environment');
}

const fieldPaths = (err: PipelineError) => (err.details.fields as { path: string }[]).map((f) => f.path);

describe('parseConfig reads the database and relay settings from the environment, or fails naming the variables', () => {
  it('reads DATABASE_URL as a pg database and leaves the relay unset', () => {
    const config = parseConfig({ DATABASE_URL: 'postgres://app:pw@127.0.0.1:5432/content' });

    expect(config).toEqual({
      database: { kind: 'pg', url: 'postgres://app:pw@127.0.0.1:5432/content' },
      relayFunctionName: undefined,
      eventBusName: undefined,
    });
  });

  it('reads the cluster ARN, secret ARN and name as a Data API database, and the relay function', () => {
    const config = parseConfig({
      ...dataApiEnv,
      RELAY_FUNCTION_NAME: 'content-relay',
      EVENT_BUS_NAME: 'my-bus',
    });

    expect(config).toEqual({
      database: {
        kind: 'data-api',
        resourceArn: dataApiEnv.DB_CLUSTER_ARN,
        secretArn: dataApiEnv.DB_SECRET_ARN,
        database: 'content',
      },
      relayFunctionName: 'content-relay',
      eventBusName: 'my-bus',
    });
  });

  it('treats empty variables as unset', () => {
    const config = parseConfig({ ...dataApiEnv, DATABASE_URL: '', RELAY_FUNCTION_NAME: ' ' });

    expect(config.database.kind).toBe('data-api');
    expect(config.relayFunctionName).toBeUndefined();
  });

  it('rejects an EVENT_BUS_NAME that is neither a bus name nor a bus ARN', () => {
    const err = configError({ DATABASE_URL: 'postgres://a@h/db', EVENT_BUS_NAME: 'bad name!' });

    expect(fieldPaths(err)).toEqual(['EVENT_BUS_NAME']);
  });

  it('fails with CONFIG naming DATABASE_URL when no database is configured', () => {
    const err = configError({});

    expect(fieldPaths(err)).toEqual(['DATABASE_URL']);
  });

  it('fails when both a URL and Data API settings are given, rather than guess', () => {
    const err = configError({ ...dataApiEnv, DATABASE_URL: 'postgres://localhost/content' });

    expect(err.message).toMatch(/not both/);
  });

  it('names each missing Data API variable', () => {
    const err = configError({ DB_CLUSTER_ARN: dataApiEnv.DB_CLUSTER_ARN });

    expect(fieldPaths(err).sort()).toEqual(['DB_NAME', 'DB_SECRET_ARN']);
  });

  it('rejects a malformed value without echoing it, since a URL may hold a password', () => {
    const err = configError({ DATABASE_URL: 'mysql://app:s3cret@db/content' });

    expect(fieldPaths(err)).toEqual(['DATABASE_URL']);
    expect(JSON.stringify({ message: err.message, details: err.details })).not.toContain('s3cret');
  });
});

describe('createSqlClient builds the adapter the config names', () => {
  it('builds a PgSqlClient for a URL, named for its role and bounded by its timeouts', async () => {
    const db = createSqlClient(parseConfig({ DATABASE_URL: 'postgres://127.0.0.1:1/none' }), 'tasksApi');
    const owner = createSqlClient(parseConfig({ DATABASE_URL: 'postgres://127.0.0.1:1/none' }), 'owner');
    try {
      expect(db).toBeInstanceOf(PgSqlClient);
      const options = (db as PgSqlClient).pool.options as unknown as Record<string, unknown>;
      expect(options).toMatchObject({
        application_name: applicationName('tasksApi'),
        connectionTimeoutMillis: pgTimeouts.connectMs,
        query_timeout: pgTimeouts.queryMs,
        statement_timeout: pgTimeouts.statementMs,
        lock_timeout: pgTimeouts.lockMs,
        idle_in_transaction_session_timeout: pgTimeouts.idleInTransactionMs,
      });
      // Migrations build indexes and wait for each other: minutes, not seconds.
      expect((owner as PgSqlClient).timeouts).toEqual(schemaOwnerTimeouts);
    } finally {
      await db.close();
      await owner.close();
    }
  });

  it('builds a DataApiSqlClient for Data API settings', async () => {
    const db = createSqlClient(parseConfig(dataApiEnv), 'tasksApi');

    expect(db).toBeInstanceOf(DataApiSqlClient);
    await db.close();
  });
});

describe('the tasks-api handler validates its environment at module load', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.resetModules();
  });

  it('fails to load, so the cold start fails, when the environment names no database', async () => {
    for (const name of ['DATABASE_URL', 'DB_CLUSTER_ARN', 'DB_SECRET_ARN', 'DB_NAME']) vi.stubEnv(name, '');
    vi.resetModules();

    await expect(import('../../functions/tasks-api/handler')).rejects.toMatchObject({ code: 'CONFIG' });
  });

  it('loads and exports a handler when the environment is valid', async () => {
    for (const name of ['DB_CLUSTER_ARN', 'DB_SECRET_ARN', 'DB_NAME', 'RELAY_FUNCTION_NAME'])
      vi.stubEnv(name, '');
    vi.stubEnv('DATABASE_URL', 'postgres://127.0.0.1:1/none');
    vi.resetModules();

    const mod = await import('../../functions/tasks-api/handler');

    expect(typeof mod.handler).toBe('function');
  });
});
