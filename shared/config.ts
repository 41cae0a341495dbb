import { RDSDataClient } from '@aws-sdk/client-rds-data';
import * as z from 'zod';
import { sdkClientConfig } from './aws/sdk-client';
import { DataApiSqlClient } from './db/data-api-client';
import { PgSqlClient } from './db/pg-client';
import { applicationName, type ConnectionHolder, timeoutsOf } from './db/pg-settings';
import type { SqlClient } from './db/sql-client';
import { blankIsUnset, parseEnvironment } from './env';
import { PipelineError } from './errors';

/** Where the database is: a postgres:// URL (local, LocalStack, tests) or Aurora through the RDS Data API. */
export type DatabaseConfig =
  | { readonly kind: 'pg'; readonly url: string }
  | {
      readonly kind: 'data-api';
      readonly resourceArn: string;
      readonly secretArn: string;
      readonly database: string;
    };

/** The settings the functions read from their environment, already validated. */
export interface AppConfig {
  readonly database: DatabaseConfig;
  /** The relay function the API nudges after a commit; unset means no nudge (the schedule runs it). */
  readonly relayFunctionName: string | undefined;
  /** The custom bus the relay publishes to (`EVENT_BUS_NAME`); unset, the relay's topology's bus. */
  readonly eventBusName: string | undefined;
  /** The relay's wake queue (SQS), for runs woken later or at once; unset: the schedule only. */
  readonly relayWakeQueueUrl: string | undefined;
}

const envSchema = z
  .object({
    DATABASE_URL: blankIsUnset(z.string().regex(/^postgres(?:ql)?:\/\/\S+$/, 'must be a postgres:// URL')),
    DB_CLUSTER_ARN: blankIsUnset(
      z.string().regex(/^arn:aws[\w-]*:rds:[\w-]+:\d{12}:cluster:\S+$/, 'must be an RDS cluster ARN'),
    ),
    DB_SECRET_ARN: blankIsUnset(
      z
        .string()
        .regex(/^arn:aws[\w-]*:secretsmanager:[\w-]+:\d{12}:secret:\S+$/, 'must be a Secrets Manager ARN'),
    ),
    DB_NAME: blankIsUnset(
      z.string().regex(/^[A-Za-z_][A-Za-z0-9_$]{0,62}$/, 'must be a PostgreSQL database name'),
    ),
    EVENT_BUS_NAME: blankIsUnset(
      z
        .string()
        .regex(
          /^(?:[\w.\-/]{1,256}|arn:aws[\w-]*:events:[\w-]+:\d{12}:event-bus\/[\w.\-/]+)$/,
          'must be an event bus name or ARN',
        ),
    ),
    RELAY_FUNCTION_NAME: blankIsUnset(
      z.string().regex(/^[\w:.-]{1,170}$/, 'must be a Lambda function name or ARN'),
    ),
    RELAY_WAKE_QUEUE_URL: blankIsUnset(z.url({ protocol: /^https?$/, error: 'must be an SQS queue URL' })),
  })
  .superRefine((env, ctx) => {
    const dataApi = [env.DB_CLUSTER_ARN, env.DB_SECRET_ARN, env.DB_NAME];
    const anyDataApi = dataApi.some((v) => v !== undefined);
    if (env.DATABASE_URL !== undefined && anyDataApi) {
      ctx.addIssue({
        code: 'custom',
        path: ['DATABASE_URL'],
        message: 'set either DATABASE_URL or DB_CLUSTER_ARN + DB_SECRET_ARN + DB_NAME, not both',
      });
    } else if (env.DATABASE_URL === undefined && !anyDataApi) {
      ctx.addIssue({
        code: 'custom',
        path: ['DATABASE_URL'],
        message: 'required (or DB_CLUSTER_ARN + DB_SECRET_ARN + DB_NAME for the Data API)',
      });
    } else if (anyDataApi) {
      for (const name of ['DB_CLUSTER_ARN', 'DB_SECRET_ARN', 'DB_NAME'] as const) {
        if (env[name] === undefined) {
          ctx.addIssue({
            code: 'custom',
            path: [name],
            message: 'required with the other Data API settings',
          });
        }
      }
    }
  });

/**
 * Parses and validates the environment. Call it at module scope in a handler so a bad deploy
 * fails on cold start with every problem listed, not on the first request that touches it.
 * Throws PipelineError CONFIG (`details.fields`); values are never echoed, since
 * DATABASE_URL may hold a password.
 */
export function parseConfig(env: Readonly<Record<string, string | undefined>> = process.env): AppConfig {
  const e = parseEnvironment(envSchema, env, 'configuration');
  const database: DatabaseConfig =
    e.DATABASE_URL !== undefined
      ? { kind: 'pg', url: e.DATABASE_URL }
      : {
          kind: 'data-api',
          // superRefine guarantees all three are set when DATABASE_URL is not.
          resourceArn: e.DB_CLUSTER_ARN ?? '',
          secretArn: e.DB_SECRET_ARN ?? '',
          database: e.DB_NAME ?? '',
        };
  return {
    database,
    relayFunctionName: e.RELAY_FUNCTION_NAME,
    eventBusName: e.EVENT_BUS_NAME,
    relayWakeQueueUrl: e.RELAY_WAKE_QUEUE_URL,
  };
}

/**
 * Builds the SqlClient adapter the config names, so handlers never choose an adapter themselves.
 * `holder` is the function's database role (`owner` for migrations): on a postgres:// URL its
 * pool's timeouts and `application_name` (`pg-settings.ts`); the Data API has its own bounds.
 */
export function createSqlClient(config: Pick<AppConfig, 'database'>, holder: ConnectionHolder): SqlClient {
  const db = config.database;
  switch (db.kind) {
    case 'pg':
      // A bundle built for Aurora (PipelineFunction defines this as 'data-api') leaves
      // node-postgres out: esbuild drops this branch, and with it every import of pg.
      if (process.env.PIPELINE_SQL_ADAPTER !== 'data-api')
        return new PgSqlClient({
          connectionString: db.url,
          applicationName: applicationName(holder),
          timeouts: timeoutsOf(holder),
        });
      throw new PipelineError(
        'CONFIG',
        'this function was built for the RDS Data API: set DB_CLUSTER_ARN, DB_SECRET_ARN and DB_NAME, not DATABASE_URL',
      );
    case 'data-api':
      return new DataApiSqlClient({
        client: new RDSDataClient(sdkClientConfig('statement')),
        resourceArn: db.resourceArn,
        secretArn: db.secretArn,
        database: db.database,
      });
  }
}
