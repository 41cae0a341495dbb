import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { sdkClientConfig, withInvocationDeadline } from '../aws/sdk-client';
import type { FunctionRole } from '../db/roles';
import type { SqlClient } from '../db/sql-client';
import { eventSource } from '../events/event-types';
import { rulesFor } from '../topology';
import { SqsQueueReceipts } from './adapters/aws/sqs-queue-receipts';
import { createConsumerHandler } from './consumer';
import { consumerDeps, parseConsumerConfig } from './consumer-deps';
import type { ConsumerDefinition, EffectFactory } from './define-consumer';
import type { Publisher, ResourceSpec, ResourceSpecs, WriteOnceStore } from './resources';

/** How a Lambda function reaches each kind of resource but tables (its DynamoDB client does). */
export interface LambdaAdapters {
  readonly topic: (topicArn: string) => Publisher;
  readonly bucket: (bucketName: string) => WriteOnceStore;
  /** The database as the resource's role (its pool named and bounded for it). */
  readonly database: (role: FunctionRole) => SqlClient;
}

/**
 * The adapters a consumer's handler passes: one for each kind it declares besides tables. They
 * are passed rather than imported here so that a bundle holds only the SDK clients its own
 * resources use (esbuild bundles whatever a module imports).
 */
export type AdaptersFor<R extends ResourceSpecs> = Pick<
  LambdaAdapters,
  Extract<R[keyof R]['kind'], keyof LambdaAdapters>
>;

/**
 * A consumer's Lambda handler, as its folder's `handler.ts` exports it: the environment checked
 * (a bad deploy fails the cold start), one DynamoDB client for the inbox and its tables, each
 * declared resource made a port, and the effect built from them once per container.
 */
export function lambdaConsumer<R extends ResourceSpecs>(
  consumer: ConsumerDefinition<string, R>,
  effect: EffectFactory<R>,
  adapters: AdaptersFor<R>,
) {
  const config = parseConsumerConfig(consumer);
  const dynamo = new DynamoDBClient(sdkClientConfig('item'));
  const all = adapters as Partial<LambdaAdapters>;
  const portOf = (key: string, spec: ResourceSpec): unknown => {
    const name = config.resources[key] as string;
    switch (spec.kind) {
      case 'table':
        return { client: dynamo, tableName: name };
      case 'topic':
        return need(all.topic, key, spec.kind)(name);
      case 'bucket':
        return need(all.bucket, key, spec.kind)(name);
      case 'database':
        return need(all.database, key, spec.kind)(spec.role);
    }
  };
  const ports = Object.fromEntries(
    Object.entries(consumer.resources).map(([key, spec]) => [key, portOf(key, spec)]),
  ) as Parameters<EffectFactory<R>>[0];
  // Its inbox settings as the stack wrote them from its topology; the rules it may be delivered
  // by follow from its own subscriptions (a topology's rules route each type to its subscribers).
  const { name } = consumer;
  const { openIndexShards, ...settings } = config.inbox;
  const routes = { source: eventSource, rules: rulesFor([consumer]) };
  const { queue } = config;
  return withInvocationDeadline(
    createConsumerHandler(
      { ...consumerDeps(name, config, dynamo, { openIndexShards }, settings, routes), effect: effect(ports) },
      {
        queueArn: queue.arn,
        // The item limits, as for the inbox's writes: a failed message's hide records how the
        // work went, so it must still run after a hung effect used the invocation's budget up to
        // the request reserve (else the message waits out the queue's timeout, not its backoff).
        receipts: new SqsQueueReceipts(new SQSClient(sdkClientConfig('item')), {
          url: queue.url,
          visibilityTimeoutSeconds: queue.visibilityTimeoutSeconds,
        }),
        policy: consumer.policy,
      },
    ),
  );
}

function need<T>(adapter: T | undefined, key: string, kind: string): T {
  if (adapter === undefined)
    throw new Error(`resource ${key} is a ${kind}, and the handler passed no ${kind} adapter`);
  return adapter;
}
