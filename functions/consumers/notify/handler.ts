import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SNSClient } from '@aws-sdk/client-sns';
import { createConsumerHandler } from '../../../shared/consumers/consumer';
import { consumerDeps, parseConsumerConfig } from '../../../shared/consumers/consumer-deps';
import { notifyEffect, SnsNotifier } from '../../../shared/effects/notify';

// Module scope: a bad environment fails the cold start, and clients are built once per container.
const config = parseConsumerConfig('notify');

/** The notify consumer Lambda: tells the assignee (SNS) that their content was approved. */
export const handler = createConsumerHandler({
  ...consumerDeps('notify', config, new DynamoDBClient({})),
  effect: notifyEffect(new SnsNotifier(new SNSClient({}), config.notifyTopic as string)),
});
