import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import middy from '@middy/core';
import { createSqlClient, parseConfig } from '../../shared/config';
import { EventBridgePublisher } from '../../shared/outbox/eventbridge-publisher';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { createRelayInvocation } from '../../shared/outbox/relay-invocation';
import { metricsNamespace } from '../../shared/outbox/relay-metrics';
import { topology } from '../../shared/topology';

// Built once per container; config is validated here so a bad deploy fails on cold start.
const config = parseConfig();
const logger = new Logger({ serviceName: 'outbox-relay' });
const metrics = new Metrics({ namespace: metricsNamespace, serviceName: 'outbox-relay' });
const outbox = new OutboxStore(createSqlClient(config));
const publisher = new EventBridgePublisher(new EventBridgeClient({}), {
  busName: config.eventBusName,
  source: topology.source,
  maxEntries: topology.relay.putEventsMaxEntries,
  maxRequestBytes: topology.relay.maxRequestBytes,
  concurrency: topology.relay.publishConcurrency,
});

/** The outbox relay Lambda: scheduled, and nudged by the tasks API after each commit. */
export const handler = middy(
  createRelayInvocation({ outbox, publisher, settings: topology.relay, logger, metrics }),
)
  .use(injectLambdaContext(logger))
  .use(logMetrics(metrics, { throwOnEmptyMetrics: false }));
