import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Context } from 'aws-lambda';
import * as z from 'zod';
import { sdkClientConfig, withInvocationDeadline } from '../../shared/aws/sdk-client';
import { consumerEnv, inboxGaugesServiceName } from '../../shared/consumers/contract';
import { parseEnvironment } from '../../shared/env';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { emitInboxGauges } from '../../shared/inbox/inbox-gauges';
import {
  cloudWatchOkAlarms,
  gaugeAlarmsEnv,
  gaugeAlarmsVariable,
} from '../../shared/ops/adapters/aws/ok-alarms';
import { metricsNamespace } from '../../shared/outbox/relay-metrics';
import { topology } from '../topology';

const env = parseEnvironment(
  z.object({
    [consumerEnv.inboxTable]: z.string().regex(/^[\w.-]{3,255}$/, 'must be a DynamoDB table name'),
    [gaugeAlarmsEnv]: gaugeAlarmsVariable,
  }),
  process.env,
  'inbox gauges configuration',
);
const inbox = new DynamoInboxOps(new DynamoDBClient(sdkClientConfig('item')), {
  tableName: env[consumerEnv.inboxTable] as string,
  openIndexShards: topology.inbox.openIndexShards,
});
const metrics = new Metrics({ namespace: metricsNamespace, serviceName: inboxGaugesServiceName });
const logger = new Logger({ serviceName: inboxGaugesServiceName });
const okAlarms = cloudWatchOkAlarms(
  new CloudWatchClient(sdkClientConfig()),
  env[gaugeAlarmsEnv] as Record<string, string> | undefined,
  (message, extra) => logger.warn(message, extra),
);

/**
 * The inbox gauges Lambda (every `topology.alarms.gaugePeriodSeconds`): per consumer, DEAD and
 * FAILED records, the oldest lease and the oldest retry age.
 */
export const handler = withInvocationDeadline((_event: unknown, _context: Context) =>
  emitInboxGauges({ inbox, metrics, consumers: topology.consumerNames, okAlarms }),
);
