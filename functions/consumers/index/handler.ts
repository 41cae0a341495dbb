import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { createConsumerHandler } from '../../../shared/consumers/consumer';
import { consumerDeps, parseConsumerConfig } from '../../../shared/consumers/consumer-deps';
import { DynamoContentIndex, indexEffect } from '../../../shared/effects/content-index';

// Module scope: a bad environment fails the cold start, and clients are built once per container.
const config = parseConsumerConfig('index');
const dynamo = new DynamoDBClient({});

/** The index consumer Lambda: keeps the content-index table at each task's latest version. */
export const handler = createConsumerHandler({
  ...consumerDeps('index', config, dynamo),
  effect: indexEffect(new DynamoContentIndex(dynamo, config.indexTable as string)),
});
