import { Aws, Duration, Stack } from 'aws-cdk-lib';
import type { RestApi } from 'aws-cdk-lib/aws-apigateway';
import {
  type Alarm,
  AlarmStatusWidget,
  Dashboard,
  GraphWidget,
  type HorizontalAnnotation,
  MathExpression,
  SingleValueWidget,
  Stats,
  TextWidget,
} from 'aws-cdk-lib/aws-cloudwatch';
import type { IEventBus } from 'aws-cdk-lib/aws-events';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import type { InboxHealthThresholds } from '../../../shared/inbox/settings';
import { relayMetricNames } from '../../../shared/outbox/relay-metrics';
import type { AlarmThresholds, ConsumerName } from '../../../shared/topology';
import type { PipelineMetrics, WatchedQueue } from './pipeline-alarms';

export interface PipelineDashboardProps {
  readonly metrics: PipelineMetrics;
  readonly thresholds: AlarmThresholds;
  readonly relayFunction: IFunction;
  readonly consumers: readonly { readonly name: ConsumerName; readonly function: IFunction }[];
  readonly queues: readonly WatchedQueue[];
  readonly bus: IEventBus;
  readonly rules: readonly { readonly name: string; readonly physicalName: string }[];
  readonly api: RestApi;
  readonly alarms: readonly Alarm[];
  /** The delivery audit function. */
  readonly auditFunction: IFunction;
  /** The oldest-lease and retry-age thresholds, drawn on their graphs. */
  readonly inboxThresholds: InboxHealthThresholds;
}

const width = 8;
const height = 6;

/**
 * One CloudWatch dashboard with the figures an operator needs: alarm states, the relay's
 * backlog and throughput, each consumer's outcomes, queue depths, rule deliveries and the API.
 */
export class PipelineDashboard extends Construct {
  public readonly dashboard: Dashboard;
  /** Console link to the dashboard. */
  public readonly url: string;

  constructor(scope: Construct, id: string, props: PipelineDashboardProps) {
    super(scope, id);
    const m = props.metrics;
    const period = Duration.seconds(props.thresholds.periodSeconds);
    const name = `${Stack.of(this).stackName}-pipeline`;
    this.dashboard = new Dashboard(this, 'Dashboard', { dashboardName: name });
    this.url = `https://${Aws.REGION}.console.aws.amazon.com/cloudwatch/home?region=${Aws.REGION}#dashboards:name=${name}`;

    const consumerGraph = (title: string, metric: Parameters<PipelineMetrics['consumer']>[1]) =>
      new GraphWidget({
        title,
        width,
        height,
        left: props.consumers.map((c) => m.consumer(c.name, metric).with({ label: c.name })),
      });

    this.dashboard.addWidgets(
      new TextWidget({
        markdown:
          '# Content pipeline\nOutbox relay → EventBridge → consumers. Missing relay data means the relay is silent: the age alarm treats it as breaching.',
        width: 24,
        height: 2,
      }),
    );
    this.dashboard.addWidgets(
      new AlarmStatusWidget({ title: 'Alarms', alarms: [...props.alarms], width: 24 }),
    );
    this.dashboard.addWidgets(
      new GraphWidget({
        title: 'Oldest pending event age (s)',
        width,
        height,
        left: [m.relay('oldestPendingAge')],
        leftAnnotations: [
          { value: props.thresholds.oldestPendingAgeSeconds, label: 'alarm' } satisfies HorizontalAnnotation,
        ],
      }),
      new GraphWidget({
        title: 'Outbox: pending and dead',
        width,
        height,
        left: [
          // The relay sends PendingEvents only while above zero (shared/outbox/relay-metrics.ts):
          // FILL draws the hours without a point as 0 instead of a gap.
          // https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html
          new MathExpression({
            expression: 'FILL(pending, 0)',
            usingMetrics: { pending: m.relay('pending') },
            label: relayMetricNames.pending,
            period,
          }),
          m.relay('dead'),
        ],
      }),
      new GraphWidget({
        title: 'Relay: published / failed / dead-lettered',
        width,
        height,
        left: [
          m.relay('published', Stats.SUM),
          m.relay('failed', Stats.SUM),
          m.relay('newlyDead', Stats.SUM),
        ],
      }),
    );
    this.dashboard.addWidgets(
      new GraphWidget({
        title: 'Relay: leases taken over / fenced out / purged',
        width,
        height,
        left: [
          m.relay('expiredLeases', Stats.SUM),
          m.relay('fencedOut', Stats.SUM),
          m.relay('purged', Stats.SUM),
        ],
      }),
      new GraphWidget({
        title: 'Relay function',
        width,
        height,
        left: [
          props.relayFunction.metricInvocations({ period }),
          props.relayFunction.metricErrors({ period }),
          props.relayFunction.metricThrottles({ period }),
        ],
        right: [props.relayFunction.metricDuration({ period, statistic: Stats.MAXIMUM })],
      }),
      // Graphs only, no alarm (infra/aws/constructs/pipeline-alarms.ts says why): a failed
      // invocation lands in the rule's DLQ, one that could not be sent there is what the
      // delivery audit finds. AWS/Events metrics cost nothing to keep or draw.
      // https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-monitoring.html
      new GraphWidget({
        title: 'Rule deliveries',
        width,
        height,
        left: props.rules.flatMap((rule) => [
          m.rule(props.bus, rule.physicalName, 'Invocations').with({ label: `${rule.name} invocations` }),
          m.rule(props.bus, rule.physicalName, 'FailedInvocations').with({ label: `${rule.name} failed` }),
          m
            .rule(props.bus, rule.physicalName, 'InvocationsFailedToBeSentToDlq')
            .with({ label: `${rule.name} not sent to its DLQ` }),
        ]),
      }),
    );
    this.dashboard.addWidgets(
      consumerGraph('Consumers: processed', 'processed'),
      consumerGraph('Consumers: duplicates skipped', 'duplicate'),
      consumerGraph('Consumers: failed attempts', 'failed'),
    );
    this.dashboard.addWidgets(
      new GraphWidget({
        title: 'Consumers: DEAD records in the inbox',
        width,
        height,
        left: props.consumers.map((c) => m.inboxGauge(c.name, 'dead').with({ label: c.name })),
      }),
      consumerGraph('Consumers: poison events', 'poison'),
      new GraphWidget({
        title: 'Consumer functions: errors',
        width,
        height,
        left: props.consumers.map((c) => c.function.metricErrors({ period, label: `${c.name} errors` })),
      }),
    );
    // The design's third way to fail silently: the inbox's own state machine stuck while the
    // transport looks consumed (docs/operations.md "Is anything stuck?").
    const annotations = (of: (t: InboxHealthThresholds) => number): HorizontalAnnotation[] => [
      { value: of(props.inboxThresholds), label: 'alarm' },
    ];
    this.dashboard.addWidgets(
      new GraphWidget({
        title: 'Consumers: oldest PROCESSING lease (s)',
        width,
        height,
        left: props.consumers.map((c) => m.inboxGauge(c.name, 'oldestLease').with({ label: c.name })),
        leftAnnotations: annotations((t) => t.oldestLeaseSeconds),
      }),
      new GraphWidget({
        title: 'Consumers: oldest FAILED record’s retry age (s)',
        width,
        height,
        left: props.consumers.map((c) => m.inboxGauge(c.name, 'retryAge').with({ label: c.name })),
        leftAnnotations: annotations((t) => t.retryAgeSeconds),
      }),
      new GraphWidget({
        title: 'Consumers: FAILED records waiting for a retry',
        width,
        height,
        left: props.consumers.map((c) => m.inboxGauge(c.name, 'failed').with({ label: c.name })),
      }),
    );
    this.dashboard.addWidgets(
      new GraphWidget({
        title: 'Delivery audit: delivered events missing from each inbox',
        width: 16,
        height,
        left: props.consumers.map((c) => m.undelivered(c.name).with({ label: c.name })),
        leftAnnotations: [{ value: props.thresholds.undeliveredEvents, label: 'alarm' }],
      }),
      new GraphWidget({
        title: 'Delivery audit function',
        width,
        height,
        left: [
          props.auditFunction.metricInvocations({ period }),
          props.auditFunction.metricErrors({ period }),
        ],
        right: [props.auditFunction.metricDuration({ period, statistic: Stats.MAXIMUM })],
      }),
    );
    this.dashboard.addWidgets(
      new SingleValueWidget({
        title: 'Undelivered messages (rule DLQs and the consumers’ dead letters)',
        width: 16,
        height,
        metrics: props.queues.map((q) => m.queueDepth(q.queue).with({ label: q.name })),
      }),
      new GraphWidget({
        title: 'Tasks API',
        width,
        height,
        left: [
          props.api.metricCount({ period }),
          props.api.metricClientError({ period }),
          props.api.metricServerError({ period }),
        ],
        right: [props.api.metricLatency({ period, statistic: Stats.percentile(99) })],
      }),
    );
  }
}
