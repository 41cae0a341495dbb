import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { SQSClient } from '@aws-sdk/client-sqs';
import middy from '@middy/core';
import { sdkClientConfig, withInvocationDeadline } from '../../shared/aws/sdk-client';
import { createSqlClient, parseConfig } from '../../shared/config';
import { EventBridgePublisher } from '../../shared/outbox/eventbridge-publisher';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { RelayCircuitStore } from '../../shared/outbox/relay-circuit';
import { createRelayInvocation, type RelayWakeups } from '../../shared/outbox/relay-invocation';
import { RelayLeaseStore } from '../../shared/outbox/relay-lease';
import { metricsNamespace, relayServiceName } from '../../shared/outbox/relay-metrics';
import { SqsRelayWakeups } from '../../shared/outbox/sqs-wakeups';
import { topology } from '../topology';

// Built once per container; config is validated here so a bad deploy fails on cold start.
const config = parseConfig();
const logger = new Logger({ serviceName: relayServiceName });
const metrics = new Metrics({ namespace: metricsNamespace, serviceName: relayServiceName });
const db = createSqlClient(config, 'relay');
const publisher = new EventBridgePublisher(new EventBridgeClient(sdkClientConfig()), {
  busName: config.eventBusName ?? topology.busName,
  source: topology.source,
  maxEntries: topology.relay.putEventsMaxEntries,
  maxRequestBytes: topology.relay.maxRequestBytes,
  concurrency: topology.relay.publishConcurrency,
});
// Without a wake queue (a stack that has none), rows due later wait for the schedule.
const wakeups: RelayWakeups = config.relayWakeQueueUrl
  ? new SqsRelayWakeups(new SQSClient(sdkClientConfig()), config.relayWakeQueueUrl)
  : { wakeAfter: async () => {} };

/** The outbox relay Lambda: nudged by the tasks API, woken through its queue, swept on a schedule. */
export const handler = withInvocationDeadline(
  middy(
    createRelayInvocation({
      outbox: new OutboxStore(db),
      lease: new RelayLeaseStore(db),
      circuit: new RelayCircuitStore(db),
      publisher,
      settings: topology.relay,
      wakeups,
      logger,
      metrics,
    }),
  )
    .use(injectLambdaContext(logger))
    .use(logMetrics(metrics, { throwOnEmptyMetrics: false })),
);
