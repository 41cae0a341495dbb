import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import * as z from 'zod';
import { blankIsUnset, type ConfigField, configError, configFields } from '../env';
import { DynamoInboxStore, type DynamoInboxStoreOptions } from '../inbox/dynamo-inbox-store';
import { inboxSettingsFor } from '../inbox/settings';
import { metricsNamespace } from '../outbox/relay-metrics';
import { type ConsumerName, consumerNames } from '../topology';
import type { ConsumerHandlerDeps } from './consumer';
import { consumerDimension, consumerEnv, consumerServiceName } from './contract';

type Env = Readonly<Record<string, string | undefined>>;

/** A consumer's settings from its environment, validated. */
export interface ConsumerConfig {
  readonly name: ConsumerName;
  readonly inboxTable: string;
  /** index only. */
  readonly indexTable?: string;
  /** archive only. */
  readonly archiveBucket?: string;
  /** notify only. */
  readonly notifyTopic?: string;
}

const tableName = z.string().regex(/^[\w.-]{3,255}$/, 'must be a DynamoDB table name');

const envSchema = z.object({
  [consumerEnv.consumerName]: blankIsUnset(z.enum(consumerNames)),
  [consumerEnv.inboxTable]: blankIsUnset(tableName),
  [consumerEnv.indexTable]: blankIsUnset(tableName),
  [consumerEnv.archiveBucket]: blankIsUnset(
    z.string().regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'must be an S3 bucket name'),
  ),
  [consumerEnv.notifyTopic]: blankIsUnset(
    z.string().regex(/^arn:aws[\w-]*:sns:[\w-]+:\d{12}:[\w-]{1,256}(\.fifo)?$/, 'must be an SNS topic ARN'),
  ),
});

/** What each consumer needs besides the inbox table. */
const requiredBy: Readonly<Record<ConsumerName, string>> = {
  index: consumerEnv.indexTable,
  notify: consumerEnv.notifyTopic,
  archive: consumerEnv.archiveBucket,
};

/**
 * Parses and validates consumer `name`'s environment (contract.ts names). Throws PipelineError
 * CONFIG listing every problem, so a bad deploy fails on cold start: the inbox table always,
 * and the table, topic or bucket its effect writes to. CONSUMER_NAME, when set, must be `name`.
 */
export function parseConsumerConfig(name: ConsumerName, env: Env = process.env): ConsumerConfig {
  const parsed = envSchema.safeParse(env);
  const problems: ConfigField[] = parsed.success ? [] : configFields(parsed.error);
  const e = (parsed.success ? parsed.data : {}) as Record<string, string | undefined>;
  const declared = e[consumerEnv.consumerName];
  if (declared !== undefined && declared !== name) {
    problems.push({
      path: consumerEnv.consumerName,
      message: `is ${declared}, but this is the ${name} consumer`,
    });
  }
  if (parsed.success) {
    for (const variable of [consumerEnv.inboxTable, requiredBy[name]]) {
      if (e[variable] === undefined) problems.push({ path: variable, message: 'required' });
    }
  }
  if (problems.length > 0) throw configError(`${name} consumer configuration`, problems);
  return {
    name,
    inboxTable: e[consumerEnv.inboxTable] as string,
    indexTable: e[consumerEnv.indexTable],
    archiveBucket: e[consumerEnv.archiveBucket],
    notifyTopic: e[consumerEnv.notifyTopic],
  };
}

/**
 * The parts every consumer shares, built once per container by its handler: the DynamoDB inbox
 * (on the client the handler made, which its effect may share), the topology's inbox settings,
 * and Powertools Logger and Metrics with the consumer's service name and `Consumer` dimension.
 * Each handler adds its own effect, so a bundle holds only the SDK clients that effect uses.
 * `inbox` options other than the table's name (the local runtime's shard count) default to AWS's.
 */
export function consumerDeps(
  name: ConsumerName,
  config: Pick<ConsumerConfig, 'inboxTable'>,
  dynamo: DynamoDBClient,
  inbox: Omit<DynamoInboxStoreOptions, 'tableName'> = {},
): Omit<ConsumerHandlerDeps, 'effect'> {
  const serviceName = consumerServiceName(name);
  return {
    name,
    inbox: new DynamoInboxStore(dynamo, { ...inbox, tableName: config.inboxTable }),
    settings: inboxSettingsFor(name),
    logger: new Logger({ serviceName }),
    metrics: new Metrics({
      namespace: metricsNamespace,
      serviceName,
      defaultDimensions: { [consumerDimension]: name },
    }),
  };
}
