import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { DynamoDBClient, type DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { SNSClient } from '@aws-sdk/client-sns';
import * as z from 'zod';
import { createSqlClient, parseConfig } from '../config';
import type { SqlClient } from '../db/sql-client';
import {
  archiveEffect,
  FileSnapshotArchive,
  S3SnapshotArchive,
  type SnapshotArchive,
} from '../effects/archive';
import { type ContentIndex, DynamoContentIndex, indexEffect } from '../effects/content-index';
import type { ConsumerEffect } from '../effects/effect';
import { FileNotifier, type Notifier, notifyEffect, SnsNotifier } from '../effects/notify';
import { PipelineError } from '../errors';
import { DynamoInboxStore } from '../inbox/dynamo-inbox-store';
import { inboxSettingsFor } from '../inbox/settings';
import { metricsNamespace } from '../outbox/relay-metrics';
import type { ConsumerName } from '../topology';
import type { ConsumerHandlerDeps } from './consumer';
import { consumerDimension, consumerEnv } from './contract';

type Env = Readonly<Record<string, string | undefined>>;

/** A consumer's settings from its environment, validated. */
export interface ConsumerConfig {
  readonly name: ConsumerName;
  readonly inboxTable: string;
  /** index only. */
  readonly indexTable?: string;
  /** archive on AWS only. */
  readonly archiveBucket?: string;
  /** notify on AWS only. */
  readonly notifyTopic?: string;
  /** Set: the local runtime; archive and notify write files here instead of S3 and SNS. */
  readonly dataDir?: string;
  /** From AWS_ENDPOINT_URL_DYNAMODB, else AWS_ENDPOINT_URL (dynalite or DynamoDB Local locally). */
  readonly dynamoEndpoint?: string;
}

const blankIsUnset = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => (typeof v === 'string' && v.trim() === '' ? undefined : v), schema.optional());

const tableName = z.string().regex(/^[\w.-]{3,255}$/, 'must be a DynamoDB table name');

const envSchema = z.object({
  [consumerEnv.consumerName]: blankIsUnset(z.enum(['index', 'notify', 'archive'])),
  [consumerEnv.inboxTable]: blankIsUnset(tableName),
  [consumerEnv.indexTable]: blankIsUnset(tableName),
  [consumerEnv.archiveBucket]: blankIsUnset(
    z.string().regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'must be an S3 bucket name'),
  ),
  [consumerEnv.notifyTopic]: blankIsUnset(
    z.string().regex(/^arn:aws[\w-]*:sns:[\w-]+:\d{12}:[\w-]{1,256}(\.fifo)?$/, 'must be an SNS topic ARN'),
  ),
  [consumerEnv.dataDir]: blankIsUnset(z.string()),
  AWS_ENDPOINT_URL_DYNAMODB: blankIsUnset(z.url()),
  AWS_ENDPOINT_URL: blankIsUnset(z.url()),
});

/**
 * Parses and validates consumer `name`'s environment (contract.ts names). Throws PipelineError
 * CONFIG listing every problem, so a bad deploy fails on cold start: the inbox table always;
 * the index table for index; for archive and notify, the bucket and the topic unless
 * PIPELINE_DATA_DIR selects the local file adapters. CONSUMER_NAME, when set, must be `name`.
 */
export function parseConsumerConfig(name: ConsumerName, env: Env = process.env): ConsumerConfig {
  const problems: { path: string; message: string }[] = [];
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    for (const i of parsed.error.issues)
      problems.push({ path: i.path.map(String).join('.'), message: i.message });
  }
  const e = (parsed.success ? parsed.data : {}) as Record<string, string | undefined>;
  const dataDir = e[consumerEnv.dataDir];
  const require = (variable: string, when: boolean) => {
    if (when && parsed.success && e[variable] === undefined)
      problems.push({ path: variable, message: 'required' });
  };
  const declared = e[consumerEnv.consumerName];
  if (declared !== undefined && declared !== name) {
    problems.push({
      path: consumerEnv.consumerName,
      message: `is ${declared}, but this is the ${name} consumer`,
    });
  }
  require(consumerEnv.inboxTable, true);
  require(consumerEnv.indexTable, name === 'index');
  require(consumerEnv.archiveBucket, name === 'archive' && dataDir === undefined);
  require(consumerEnv.notifyTopic, name === 'notify' && dataDir === undefined);
  if (problems.length > 0) {
    throw new PipelineError(
      'CONFIG',
      `invalid ${name} consumer configuration: ${problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`,
      { fields: problems },
    );
  }
  return {
    name,
    inboxTable: e[consumerEnv.inboxTable] as string,
    indexTable: e[consumerEnv.indexTable],
    archiveBucket: e[consumerEnv.archiveBucket],
    notifyTopic: e[consumerEnv.notifyTopic],
    dataDir,
    dynamoEndpoint: e.AWS_ENDPOINT_URL_DYNAMODB ?? e.AWS_ENDPOINT_URL,
  };
}

/** SDK clients and the tasks database, injectable so the local runtime and tests can share theirs. */
export interface ConsumerClients {
  readonly dynamo?: DynamoDBClient;
  readonly s3?: S3Client;
  readonly sns?: SNSClient;
  /** The tasks database (archive only); defaults to the one DATABASE_URL / DB_* names. */
  readonly db?: SqlClient;
}

/** What {@link buildConsumerDeps} returns: the handler's deps, the parsed config and a way to release it. */
export interface BuiltConsumer extends ConsumerHandlerDeps {
  readonly config: ConsumerConfig;
  /** The effect's adapter, so the local runtime can read what it did (e.g. `FileNotifier.read()`). */
  readonly adapters: {
    readonly index?: ContentIndex;
    readonly notifier?: Notifier;
    readonly archive?: SnapshotArchive;
  };
  /** Closes what the builder opened (the tasks database, SDK clients); not injected ones. */
  close(): Promise<void>;
}

/**
 * Builds a consumer's dependencies from its environment: the DynamoDB inbox always; the
 * effect's adapters on AWS (DynamoDB index, S3 archive, SNS notify), or, when
 * PIPELINE_DATA_DIR is set, the local ones (archive files and notifications.jsonl under it;
 * the index stays on DynamoDB, which is dynalite or DynamoDB Local there). The DynamoDB
 * endpoint comes from AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL as the SDK reads them, but
 * from `env`, so the local runtime can pass its own environment.
 */
export function buildConsumerDeps(
  name: ConsumerName,
  env: Env = process.env,
  clients: ConsumerClients = {},
): BuiltConsumer {
  const config = parseConsumerConfig(name, env);
  const local = config.dataDir !== undefined;
  const owned: (() => Promise<void> | void)[] = [];
  const own = <T extends { destroy(): void }>(client: T): T => {
    owned.push(() => client.destroy());
    return client;
  };
  const localAws: Pick<DynamoDBClientConfig, 'region' | 'credentials'> = local
    ? {
        region: env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? 'us-east-1',
        credentials: {
          accessKeyId: env.AWS_ACCESS_KEY_ID ?? 'local',
          secretAccessKey: env.AWS_SECRET_ACCESS_KEY ?? 'local',
        },
      }
    : {};
  const dynamo =
    clients.dynamo ??
    own(
      new DynamoDBClient({
        ...localAws,
        ...(config.dynamoEndpoint ? { endpoint: config.dynamoEndpoint } : {}),
      }),
    );

  let effect: ConsumerEffect;
  let adapters: BuiltConsumer['adapters'];
  switch (name) {
    case 'index': {
      const index = new DynamoContentIndex(dynamo, config.indexTable as string);
      effect = indexEffect(index);
      adapters = { index };
      break;
    }
    case 'notify': {
      const notifier: Notifier = local
        ? new FileNotifier(config.dataDir as string)
        : new SnsNotifier(clients.sns ?? own(new SNSClient({})), config.notifyTopic as string);
      effect = notifyEffect(notifier);
      adapters = { notifier };
      break;
    }
    case 'archive': {
      const archive: SnapshotArchive = local
        ? new FileSnapshotArchive(config.dataDir as string)
        : new S3SnapshotArchive(clients.s3 ?? own(new S3Client({})), config.archiveBucket as string);
      let db = clients.db;
      if (!db) {
        const opened = createSqlClient(parseConfig(env));
        owned.push(() => opened.close());
        db = opened;
      }
      effect = archiveEffect({ archive, db });
      adapters = { archive };
      break;
    }
  }

  const serviceName = `consumer-${name}`;
  return {
    name,
    config,
    effect,
    adapters,
    inbox: new DynamoInboxStore(dynamo, { tableName: config.inboxTable }),
    settings: inboxSettingsFor(name),
    logger: new Logger({ serviceName }),
    metrics: new Metrics({
      namespace: metricsNamespace,
      serviceName,
      defaultDimensions: { [consumerDimension]: name },
    }),
    async close() {
      for (const release of owned.reverse()) await release();
    },
  };
}
