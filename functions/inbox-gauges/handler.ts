import { Metrics } from '@aws-lambda-powertools/metrics';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import * as z from 'zod';
import { consumerEnv, inboxGaugesServiceName } from '../../shared/consumers/contract';
import { parseEnvironment } from '../../shared/env';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { emitInboxGauges } from '../../shared/inbox/inbox-gauges';
import { metricsNamespace } from '../../shared/outbox/relay-metrics';
import { type ConsumerName, topology } from '../../shared/topology';

const env = parseEnvironment(
  z.object({
    [consumerEnv.inboxTable]: z.string().regex(/^[\w.-]{3,255}$/, 'must be a DynamoDB table name'),
  }),
  process.env,
  'inbox gauges configuration',
);
const inbox = new DynamoInboxStore(new DynamoDBClient({}), {
  tableName: env[consumerEnv.inboxTable] as string,
});
const metrics = new Metrics({ namespace: metricsNamespace, serviceName: inboxGaugesServiceName });

/** The inbox gauges Lambda (every `topology.alarms.gaugePeriodSeconds`): DEAD records per consumer. */
export const handler = () =>
  emitInboxGauges({ inbox, metrics, consumers: Object.keys(topology.consumers) as ConsumerName[] });
