import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import * as z from 'zod';
import { blankIsUnset, type ConfigField, configError, configFields, jsonVariable } from '../env';
import { DynamoInboxStore, type DynamoInboxStoreOptions } from '../inbox/dynamo-inbox-store';
import type { InboxSettings } from '../inbox/settings';
import { metricsNamespace } from '../outbox/relay-metrics';
import type { ConsumerName } from '../topology';
import type { ConsumerHandlerDeps } from './consumer';
import { consumerDimension, consumerEnv, consumerQueueEnv, consumerServiceName } from './contract';
import type { ConsumerDefinition } from './define-consumer';
import { resourceEnvName } from './resources';

type Env = Readonly<Record<string, string | undefined>>;

/** A consumer's settings from its environment, validated. */
export interface ConsumerConfig {
  readonly name: string;
  readonly inboxTable: string;
  /** Each declared table, topic and bucket by its key: the table's name, the topic's ARN, the bucket's name. */
  readonly resources: Readonly<Record<string, string>>;
  /** The consumer's queue on AWS, whose records alone it takes (`createQueueConsumer`). */
  readonly queue: ConsumerQueueConfig;
  /** Its inbox settings and the inbox index's shards, as the stack wrote them from its topology. */
  readonly inbox: ConsumerInboxConfig;
}

/** `INBOX_SETTINGS`: what the inbox does with the consumer's attempts, and how its index is sharded. */
export interface ConsumerInboxConfig extends InboxSettings {
  readonly openIndexShards: number;
}

const count = (min = 0) => z.number().int().min(min);
/** `INBOX_SETTINGS`, checked whole: a setting the stack left out fails the cold start. */
export const inboxSettingsVariable = jsonVariable(
  z.strictObject({
    maxPermanentAttempts: count(1),
    maxEventAgeMs: count(1),
    backoff: z.strictObject({ baseMs: count(), maxMs: count() }),
    leaseMs: count(1),
    leaseGraceMs: count(),
    retentionSeconds: count(1),
    deadRetentionSeconds: count(1),
    maxStoredEventBytes: count(1),
    openIndexShards: count(1),
  }),
);

/** A consumer's queue as its function's environment names it (`consumerQueueEnv`). */
export interface ConsumerQueueConfig {
  readonly url: string;
  readonly arn: string;
  /** The queue's visibility timeout: what confirming a receipt sets it to again. */
  readonly visibilityTimeoutSeconds: number;
}

const tableName = z.string().regex(/^[\w.-]{3,255}$/, 'must be a DynamoDB table name');

/** What each kind's variable must hold. */
const resourceValue = {
  table: tableName,
  topic: z
    .string()
    .regex(/^arn:aws[\w-]*:sns:[\w-]+:\d{12}:[\w-]{1,256}(\.fifo)?$/, 'must be an SNS topic ARN'),
  bucket: z.string().regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'must be an S3 bucket name'),
} as const;

/**
 * Parses and validates `consumer`'s environment: its name (CONSUMER_NAME, when set, must be
 * its own), the inbox table, the variable of each table, topic and bucket it declares
 * (`resourceEnvName`), and its queue (`consumerQueueEnv`). Throws PipelineError CONFIG listing
 * every problem, so a bad deploy fails on cold start. A database resource is reached through the function's database settings
 * (`shared/config.ts`), checked where they are read.
 */
export function parseConsumerConfig(
  consumer: Pick<ConsumerDefinition, 'name' | 'resources'>,
  env: Env = process.env,
): ConsumerConfig {
  const resources = Object.entries(consumer.resources).flatMap(([key, spec]) =>
    spec.kind === 'database' ? [] : [{ key, variable: resourceEnvName(key, spec.kind), kind: spec.kind }],
  );
  const schema = z.object({
    [consumerEnv.consumerName]: blankIsUnset(z.string()),
    [consumerEnv.inboxTable]: blankIsUnset(tableName),
    [consumerEnv.inboxSettings]: blankIsUnset(inboxSettingsVariable),
    ...Object.fromEntries(resources.map((r) => [r.variable, blankIsUnset(resourceValue[r.kind])])),
    [consumerQueueEnv.url]: blankIsUnset(z.url('must be an SQS queue URL')),
    [consumerQueueEnv.arn]: blankIsUnset(
      z.string().regex(/^arn:aws[\w-]*:sqs:[\w-]+:\d{12}:[\w-]{1,80}$/, 'must be an SQS queue ARN'),
    ),
    [consumerQueueEnv.visibilityTimeoutSeconds]: blankIsUnset(
      z.coerce.number('must be a number of seconds').int().min(1).max(43_200),
    ),
  });
  const parsed = schema.safeParse(env);
  const problems: ConfigField[] = parsed.success ? [] : configFields(parsed.error);
  const e = (parsed.success ? parsed.data : {}) as Record<string, unknown>;
  const declared = e[consumerEnv.consumerName];
  if (declared !== undefined && declared !== consumer.name) {
    problems.push({
      path: consumerEnv.consumerName,
      message: `is ${declared}, but this is the ${consumer.name} consumer`,
    });
  }
  if (parsed.success) {
    for (const variable of [
      consumerEnv.inboxTable,
      consumerEnv.inboxSettings,
      ...resources.map((r) => r.variable),
      ...Object.values(consumerQueueEnv),
    ]) {
      if (e[variable] === undefined) problems.push({ path: variable, message: 'required' });
    }
  }
  if (problems.length > 0) throw configError(`${consumer.name} consumer configuration`, problems);
  return {
    name: consumer.name,
    inboxTable: e[consumerEnv.inboxTable] as string,
    inbox: e[consumerEnv.inboxSettings] as ConsumerInboxConfig,
    resources: Object.fromEntries(resources.map((r) => [r.key, e[r.variable] as string])),
    queue: {
      url: e[consumerQueueEnv.url] as string,
      arn: e[consumerQueueEnv.arn] as string,
      visibilityTimeoutSeconds: e[consumerQueueEnv.visibilityTimeoutSeconds] as number,
    },
  };
}

/**
 * The parts every consumer shares, built once per container by its handler: the DynamoDB inbox
 * (on the client the handler made, which its effect may share) with its topology's shard count
 * (`inbox`), its topology's inbox settings and routes, and Powertools Logger and Metrics with
 * the consumer's service name and `Consumer` dimension. Each handler adds its own effect, so a
 * bundle holds only the SDK clients that effect uses.
 */
export function consumerDeps(
  name: ConsumerName,
  config: Pick<ConsumerConfig, 'inboxTable'>,
  dynamo: DynamoDBClient,
  inbox: Omit<DynamoInboxStoreOptions, 'tableName'>,
  settings: InboxSettings,
  routes: ConsumerHandlerDeps['routes'],
): Omit<ConsumerHandlerDeps, 'effect'> {
  const serviceName = consumerServiceName(name);
  return {
    name,
    inbox: new DynamoInboxStore(dynamo, { ...inbox, tableName: config.inboxTable }),
    settings,
    routes,
    logger: new Logger({ serviceName }),
    metrics: new Metrics({
      namespace: metricsNamespace,
      serviceName,
      defaultDimensions: { [consumerDimension]: name },
    }),
  };
}
