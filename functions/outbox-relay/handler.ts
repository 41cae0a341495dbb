import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import middy from '@middy/core';
import { createSqlClient, parseConfig } from '../../shared/config';
import { EventBridgePublisher } from '../../shared/outbox/eventbridge-publisher';
import { EventBridgeSweepControl } from '../../shared/outbox/eventbridge-sweep-control';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { createRelayInvocation } from '../../shared/outbox/relay-invocation';
import { metricsNamespace, relayServiceName } from '../../shared/outbox/relay-metrics';
import { topology } from '../../shared/topology';

// Built once per container; config is validated here so a bad deploy fails on cold start.
const config = parseConfig();
const logger = new Logger({ serviceName: relayServiceName });
const metrics = new Metrics({ namespace: metricsNamespace, serviceName: relayServiceName });
const outbox = new OutboxStore(createSqlClient(config));
const eventBridge = new EventBridgeClient({});
const publisher = new EventBridgePublisher(eventBridge, {
  busName: config.eventBusName,
  source: topology.source,
  maxEntries: topology.relay.putEventsMaxEntries,
  maxRequestBytes: topology.relay.maxRequestBytes,
  concurrency: topology.relay.publishConcurrency,
});

const sweep = config.busySweepRuleName
  ? new EventBridgeSweepControl(
      eventBridge,
      config.busySweepRuleName,
      topology.relay.busySweepSeconds * 1_000,
    )
  : undefined;

/** The outbox relay Lambda: nudged by the tasks API after each commit, swept on a schedule. */
export const handler = middy(
  createRelayInvocation({ outbox, publisher, settings: topology.relay, logger, metrics, sweep }),
)
  .use(injectLambdaContext(logger))
  .use(logMetrics(metrics, { throwOnEmptyMetrics: false }));
