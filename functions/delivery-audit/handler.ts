import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import * as z from 'zod';
import { emitAuditGauges } from '../../shared/audit/audit-gauges';
import { DeliveryAuditStore } from '../../shared/audit/audit-store';
import { type AuditReport, runDeliveryAudit } from '../../shared/audit/delivery-audit';
import { functionIdentity } from '../../shared/aws/function-identity';
import { sdkClientConfig, withInvocationDeadline } from '../../shared/aws/sdk-client';
import { createSqlClient, parseConfig } from '../../shared/config';
import { consumerEnv, deliveryAuditServiceName } from '../../shared/consumers/contract';
import { parseEnvironment } from '../../shared/env';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import {
  cloudWatchOkAlarms,
  gaugeAlarmsEnv,
  gaugeAlarmsVariable,
} from '../../shared/ops/adapters/aws/ok-alarms';
import { SqsRedelivery } from '../../shared/ops/adapters/aws/sqs-redelivery';
import { consumerQueuesVariable, opsEnv } from '../../shared/ops/ops-config';
import { metricsNamespace } from '../../shared/outbox/relay-metrics';
import type { ConsumerName } from '../../shared/topology';
import { topology } from '../topology';

// Built once per container; a bad environment fails the cold start.
const config = parseConfig();
const env = parseEnvironment(
  z.object({
    [consumerEnv.inboxTable]: z.string().regex(/^[\w.-]{3,255}$/, 'must be a DynamoDB table name'),
    [gaugeAlarmsEnv]: gaugeAlarmsVariable,
    [opsEnv.consumerQueues]: consumerQueuesVariable(topology.consumerNames),
  }),
  process.env,
  'delivery audit configuration',
);
const logger = new Logger({ serviceName: deliveryAuditServiceName });
const metrics = new Metrics({ namespace: metricsNamespace, serviceName: deliveryAuditServiceName });
const store = new DeliveryAuditStore(createSqlClient(config, 'audit'));
const inbox = new DynamoInboxOps(new DynamoDBClient(sdkClientConfig('item')), {
  tableName: env[consumerEnv.inboxTable] as string,
  openIndexShards: topology.inbox.openIndexShards,
});
// A stuck record is re-sent as an inbox redrive re-sends one: a message on its consumer's queue.
const redelivery = new SqsRedelivery(
  new SQSClient(sdkClientConfig()),
  env[opsEnv.consumerQueues] as Record<ConsumerName, string>,
);
const okAlarms = cloudWatchOkAlarms(
  new CloudWatchClient(sdkClientConfig()),
  env[gaugeAlarmsEnv] as Record<string, string> | undefined,
  (message, extra) => logger.warn(message, extra),
);

/**
 * The delivery audit Lambda, run by the relay's safety-sweep schedule (so an idle Aurora wakes
 * once per period for both): one bounded run, then `UndeliveredToConsumer` per consumer.
 */
export const handler = withInvocationDeadline(
  middy(async (_event: unknown, context: Context): Promise<AuditReport> => {
    const report = await runDeliveryAudit({
      topology,
      store,
      inbox,
      bus: functionIdentity(context),
      remainingMs: () => context.getRemainingTimeInMillis(),
      stuck: { inbox, redelivery },
    });
    await emitAuditGauges({ undelivered: report.undelivered, metrics, okAlarms });
    if (Object.values(report.resent).some((n) => n > 0) || report.unsendable > 0) {
      logger.warn('inbox records nothing would retry re-sent', {
        resent: report.resent,
        unsendable: report.unsendable,
      });
    }
    if (Object.values(report.found).some((n) => n > 0)) {
      logger.warn('delivered events missing from a consumer inbox', { found: report.found });
    }
    logger.info('delivery audit run', { ...report });
    return report;
  }).use(injectLambdaContext(logger)),
);
