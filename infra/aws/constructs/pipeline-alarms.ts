import { ArnFormat, Duration, type RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import {
  Alarm,
  ComparisonOperator,
  type IMetric,
  Metric,
  Stats,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { IEventBus } from 'aws-cdk-lib/aws-events';
import { PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Key } from 'aws-cdk-lib/aws-kms';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { type ITopic, Subscription, SubscriptionProtocol, Topic } from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import {
  auditMetricNames,
  consumerMetricNames,
  inboxGaugeMetricNames,
} from '../../../shared/consumers/contract';
import type { InboxHealthThresholds } from '../../../shared/inbox/settings';
import { alarmIds } from '../../../shared/ops/alarm-ids';
import { metricsNamespace, relayMetricNames } from '../../../shared/outbox/relay-metrics';
import type { AlarmThresholds, ConsumerName } from '../../../shared/topology';

/** The metric dimensions each emitter's Powertools `Metrics` writes (its `service` included). */
export interface PipelineMetricDimensions {
  readonly relay: Readonly<Record<string, string>>;
  readonly consumer: (name: ConsumerName) => Readonly<Record<string, string>>;
  /** The inbox gauges' dimensions for one consumer, or (undefined) for all of them together. */
  readonly inboxGauge: (name?: ConsumerName) => Readonly<Record<string, string>>;
  /** The delivery audit's dimensions for one consumer, or (undefined) for all of them together. */
  readonly audit: (name?: ConsumerName) => Readonly<Record<string, string>>;
}

/** A queue that must stay empty, with a short name for its alarm. */
export interface WatchedQueue {
  readonly name: string;
  readonly queue: IQueue;
}

export interface PipelineAlarmsProps {
  /** `topology.alarms`. */
  readonly thresholds: AlarmThresholds;
  readonly dimensions: PipelineMetricDimensions;
  readonly relayFunction: IFunction;
  /** The inbox gauges: if they stop, the inbox alarms (missing data ignored) would go quiet. */
  readonly gaugesFunction: IFunction;
  /** The oldest-lease and retry-age thresholds (`inboxHealthThresholds`). */
  readonly inboxThresholds: InboxHealthThresholds;
  /** The delivery audit: its errors alarm, and while it fails the undelivered alarms get no data. */
  readonly auditFunction: IFunction;
  /** The relay's safety sweep period: `relay-silent` alarms after `relaySilentSweeps` of them without a report. */
  readonly relaySweep: Duration;
  /** Every rule-target DLQ and the consumers' dead letters. */
  readonly queues: readonly WatchedQueue[];
  /** Subscribed by email when given (the owner confirms the subscription). */
  readonly email?: string;
  /** Of the topic's KMS key: a retained key goes on costing $1/month after `cdk destroy`. */
  readonly removalPolicy: RemovalPolicy;
  /**
   * A topic of the user's to send the alarms to instead of one of ours. Its access policy must
   * let `cloudwatch.amazonaws.com` publish to it, and its KMS key (if any) let CloudWatch use
   * it: an imported topic's policy cannot be changed from here
   * (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Notify_Users_Alarm_Changes.html).
   * @default a topic of its own, encrypted with a key of its own
   */
  readonly existingTopic?: ITopic;
}

/**
 * Lets `fn` read these alarms' states and nothing else: DescribeAlarms takes alarm ARNs as
 * resources (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatch.html).
 * The gauges, the audit and the ops API read the alarms they report on.
 */
export function allowDescribeAlarms(fn: IFunction, alarmNames: readonly string[]): void {
  const stack = Stack.of(fn);
  fn.addToRolePolicy(
    new PolicyStatement({
      actions: ['cloudwatch:DescribeAlarms'],
      resources: alarmNames.map((name) =>
        stack.formatArn({
          service: 'cloudwatch',
          resource: 'alarm',
          resourceName: name,
          arnFormat: ArnFormat.COLON_RESOURCE_NAME,
        }),
      ),
    }),
  );
}

/** An alarm's name: the stack's name, then its id (`ContentPipeline-sandbox-relay-silent`). */
export const alarmName = (stackName: string, alarmId: string): string => `${stackName}-${alarmId}`;

/** The pipeline's metrics in one place, so the alarms and the dashboard plot the same series. */
export class PipelineMetrics {
  constructor(
    private readonly thresholds: AlarmThresholds,
    private readonly dimensions: PipelineMetricDimensions,
  ) {}

  private get period(): Duration {
    return Duration.seconds(this.thresholds.periodSeconds);
  }

  relay(name: keyof typeof relayMetricNames, statistic: string = Stats.MAXIMUM): Metric {
    return new Metric({
      namespace: metricsNamespace,
      metricName: relayMetricNames[name],
      dimensionsMap: { ...this.dimensions.relay },
      statistic,
      period: this.period,
    });
  }

  /**
   * One of the inbox gauges, as the inbox gauges function emits it every gauge period: a
   * consumer's, or (consumer undefined) all consumers' together, the largest age or the count's sum.
   */
  inboxGauge(consumer: ConsumerName | undefined, name: keyof typeof inboxGaugeMetricNames): Metric {
    return new Metric({
      namespace: metricsNamespace,
      metricName: inboxGaugeMetricNames[name],
      dimensionsMap: { ...this.dimensions.inboxGauge(consumer) },
      statistic: Stats.MAXIMUM,
      period: Duration.seconds(this.thresholds.gaugePeriodSeconds),
    });
  }

  /**
   * `UndeliveredToConsumer` of a consumer, or (undefined) of all of them together, as the
   * delivery audit emits it after each run (each sweep period). Its alarm's period is the
   * gauges': the point of a run lands in one of them.
   */
  undelivered(consumer?: ConsumerName): Metric {
    return new Metric({
      namespace: metricsNamespace,
      metricName: auditMetricNames.undelivered,
      dimensionsMap: { ...this.dimensions.audit(consumer) },
      statistic: Stats.MAXIMUM,
      period: Duration.seconds(this.thresholds.gaugePeriodSeconds),
    });
  }

  consumer(consumer: ConsumerName, name: keyof typeof consumerMetricNames): Metric {
    return new Metric({
      namespace: metricsNamespace,
      metricName: consumerMetricNames[name],
      dimensionsMap: { ...this.dimensions.consumer(consumer) },
      statistic: Stats.SUM,
      period: this.period,
    });
  }

  /**
   * A rule metric. The rule's name is passed as written, not as `rule.ruleName`: on a custom
   * bus CloudFormation's `Ref` of a rule is `bus|rule`, which is not the `RuleName` dimension.
   */
  rule(bus: IEventBus, ruleName: string, metricName: string): Metric {
    return new Metric({
      namespace: 'AWS/Events',
      metricName,
      dimensionsMap: { EventBusName: bus.eventBusName, RuleName: ruleName },
      statistic: Stats.SUM,
      period: this.period,
    });
  }

  queueDepth(queue: IQueue): Metric {
    return queue.metricApproximateNumberOfMessagesVisible({ statistic: Stats.MAXIMUM, period: this.period });
  }
}

/**
 * Every way an event can be late or lost, alarmed to one SNS topic: the oldest pending outbox
 * event, a relay that stopped reporting (missing data breaches), dead outbox events, relay
 * errors, the consumers' DEAD inbox records, oldest lease and retry age, events the delivery
 * audit found undelivered, and every rule DLQ and the consumers' dead letters when not empty
 * (which is where a rule's failed invocations go). Thresholds come from the topology.
 *
 * Gauges that are sent only now and then (the relay reports after each run, an idle pipeline is
 * swept hourly; the inbox gauges every few minutes; SQS stops sending an idle queue's metrics)
 * keep their alarm's state between data points (missing data ignored): an alarm about dead
 * records or queued messages stays in ALARM until a point below the threshold arrives, that is
 * until someone redrove or discarded them.
 */
export class PipelineAlarms extends Construct {
  /** Where every alarm and OK goes: ours, or the user's (`existingTopic`). */
  public readonly topic: ITopic;
  public readonly metrics: PipelineMetrics;
  public readonly oldestPendingAge: Alarm;
  public readonly relaySilent: Alarm;
  public readonly outboxDead: Alarm;
  public readonly relayErrors: Alarm;
  public readonly gaugesErrors: Alarm;
  public readonly inboxDead: Alarm;
  public readonly oldestLease: Alarm;
  public readonly retryAge: Alarm;
  public readonly undelivered: Alarm;
  public readonly auditErrors: Alarm;
  public readonly queueNotEmpty: ReadonlyMap<string, Alarm>;
  public readonly all: readonly Alarm[];

  constructor(scope: Construct, id: string, props: PipelineAlarmsProps) {
    super(scope, id);
    const t = props.thresholds;
    const prefix = Stack.of(this).stackName;
    this.metrics = new PipelineMetrics(t, props.dimensions);

    let ownTopic: Topic | undefined;
    if (props.existingTopic) {
      this.topic = props.existingTopic;
    } else {
      ownTopic = this.ownTopic(props.removalPolicy);
      this.topic = ownTopic;
    }
    if (props.email) {
      const subscription = ownTopic
        ? ownTopic.addSubscription(new EmailSubscription(props.email))
        : // Here, not under the user's topic's construct, which may live in another stack.
          new Subscription(this, 'EmailSubscription', {
            topic: this.topic,
            protocol: SubscriptionProtocol.EMAIL,
            endpoint: props.email,
          });
      Validations.of(subscription).acknowledge({
        id: 'Serverless-SNSRedrivePolicy',
        reason:
          'Email to a person: an undeliverable alarm mail shows in NumberOfNotificationsFailed and in the alarm history; a DLQ of alarm mails would need an alarm of its own.',
      });
    }
    const action = new SnsAction(this.topic);
    const all: Alarm[] = [];

    const alarm = (
      alarmId: string,
      description: string,
      metric: IMetric,
      threshold: number,
      opts: {
        comparison?: ComparisonOperator;
        evaluationPeriods?: number;
        datapointsToAlarm?: number;
        missing?: TreatMissingData;
      } = {},
    ): Alarm => {
      const a = new Alarm(this, alarmId, {
        alarmName: alarmName(prefix, alarmId),
        alarmDescription: description,
        metric,
        threshold,
        comparisonOperator: opts.comparison ?? ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: opts.evaluationPeriods ?? 1,
        datapointsToAlarm: opts.datapointsToAlarm,
        treatMissingData: opts.missing ?? TreatMissingData.NOT_BREACHING,
      });
      a.addAlarmAction(action);
      a.addOkAction(action);
      all.push(a);
      return a;
    };

    this.oldestPendingAge = alarm(
      alarmIds.oldestPendingAge,
      `An outbox event has waited more than ${t.oldestPendingAgeSeconds} s (the relay reports after every run; between runs the alarm keeps its state).`,
      this.metrics.relay('oldestPendingAge'),
      t.oldestPendingAgeSeconds,
      {
        comparison: ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: t.evaluationPeriods,
        datapointsToAlarm: t.datapointsToAlarm,
        missing: TreatMissingData.IGNORE,
      },
    );
    this.relaySilent = alarm(
      alarmIds.relaySilent,
      `The outbox relay has not reported for ${t.relaySilentSweeps} sweep periods: it stopped running (missing data breaches).`,
      this.metrics.relay('oldestPendingAge', Stats.SAMPLE_COUNT).with({ period: props.relaySweep }),
      1,
      {
        comparison: ComparisonOperator.LESS_THAN_THRESHOLD,
        evaluationPeriods: t.relaySilentSweeps,
        missing: TreatMissingData.BREACHING,
      },
    );
    this.outboxDead = alarm(
      alarmIds.outboxDead,
      'Outbox events are dead (never published): inspect and redrive with the ops CLI.',
      this.metrics.relay('dead'),
      t.deadEvents,
      { missing: TreatMissingData.IGNORE },
    );
    this.relayErrors = alarm(
      alarmIds.relayErrors,
      'The outbox relay function failed.',
      props.relayFunction.metricErrors({ statistic: Stats.SUM, period: Duration.seconds(t.periodSeconds) }),
      t.relayErrors,
    );

    this.gaugesErrors = alarm(
      alarmIds.inboxGaugesErrors,
      'The inbox gauges function failed: while it fails, the inbox alarms get no data and keep their state.',
      props.gaugesFunction.metricErrors({
        statistic: Stats.SUM,
        period: Duration.seconds(t.gaugePeriodSeconds),
      }),
      1,
    );

    // One alarm for every consumer, as for the two ages below: the gauges send the sum of DEAD
    // records without the Consumer dimension, each consumer's count beside it for the dashboard,
    // `/ops/status` and the CLI, which say whose. CloudWatch bills each alarm.
    this.inboxDead = alarm(
      alarmIds.inboxDead,
      'A consumer has DEAD inbox records: npx pipeline status shows whose; inspect and redrive with npx pipeline inbox dead (docs/operations.md "Is anything stuck?").',
      this.metrics.inboxGauge(undefined, 'dead'),
      t.inboxDeadRecords,
      { missing: TreatMissingData.IGNORE },
    );
    // The design's other two inbox figures, one alarm each for every consumer (the gauges send
    // the largest age without the Consumer dimension): `npx pipeline status` says whose.
    const limits = props.inboxThresholds;
    this.oldestLease = alarm(
      alarmIds.inboxOldestLease,
      `An attempt of a consumer has held its inbox record more than ${limits.oldestLeaseSeconds} s: stuck mid-effect, or killed with nothing left to take its record over. npx pipeline status shows whose (docs/operations.md "Is anything stuck?").`,
      this.metrics.inboxGauge(undefined, 'oldestLease'),
      limits.oldestLeaseSeconds,
      { comparison: ComparisonOperator.GREATER_THAN_THRESHOLD, missing: TreatMissingData.IGNORE },
    );
    this.retryAge = alarm(
      alarmIds.inboxRetryAge,
      `A FAILED inbox record was first attempted more than ${limits.retryAgeSeconds} s ago and still waits for a retry that succeeds. npx pipeline status shows whose (docs/operations.md "Is anything stuck?").`,
      this.metrics.inboxGauge(undefined, 'retryAge'),
      limits.retryAgeSeconds,
      { comparison: ComparisonOperator.GREATER_THAN_THRESHOLD, missing: TreatMissingData.IGNORE },
    );

    // What no other alarm sees: a rule disabled or changed by hand, a target misconfigured, a
    // dead letter that expired, an inbox record deleted (shared/audit/delivery-audit.ts).
    this.undelivered = alarm(
      alarmIds.undelivered,
      'The delivery audit found delivered events with no record in a consumer inbox: list them with `npx pipeline audit`, re-send them with `npx pipeline audit --redrive` once the cause is fixed.',
      this.metrics.undelivered(),
      t.undeliveredEvents,
      { missing: TreatMissingData.IGNORE },
    );
    this.auditErrors = alarm(
      alarmIds.auditErrors,
      'The delivery audit function failed: while it fails, the undelivered alarms get no data and keep their state.',
      props.auditFunction.metricErrors({ statistic: Stats.SUM, period: Duration.seconds(t.periodSeconds) }),
      1,
    );

    const queueNotEmpty = new Map<string, Alarm>();
    for (const { name, queue } of props.queues) {
      queueNotEmpty.set(
        name,
        alarm(
          alarmIds.queueNotEmpty(name),
          `Undelivered events are waiting in ${name}.`,
          this.metrics.queueDepth(queue),
          t.dlqMessages,
          { missing: TreatMissingData.IGNORE },
        ),
      );
    }
    this.queueNotEmpty = queueNotEmpty;

    // No alarm on a rule's FailedInvocations (it stays a graph on the dashboard; AWS metrics cost
    // nothing, an alarm $0.10 a month). Every rule target has a dead-letter queue, so an
    // invocation that failed for good lands in that rule's DLQ, whose queue-not-empty alarm above
    // stays in ALARM until someone redrives it; a FailedInvocations alarm would page for the same
    // event and clear itself a period later. An invocation that could not even be sent to its DLQ
    // (InvocationsFailedToBeSentToDlq) never reached the consumer's inbox, which is what the
    // delivery audit's `undelivered` alarm finds.
    // https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-monitoring.html
    // https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html
    this.all = all;
  }

  /** The alarm topic when the user brings none: encrypted, and open to this stack's alarms only. */
  private ownTopic(removalPolicy: RemovalPolicy): Topic {
    // CloudWatch may use the key and publish to the topic for this stack's alarms only: the
    // confused-deputy conditions of docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Notify_Users_Alarm_Changes.html
    // (a topic policy replaces SNS's default policy, so without this statement nothing may publish).
    const stack = Stack.of(this);
    const prefix = stack.stackName;
    const cloudwatch = new ServicePrincipal('cloudwatch.amazonaws.com');
    const ourAlarms = {
      StringEquals: { 'aws:SourceAccount': stack.account },
      ArnLike: {
        'aws:SourceArn': stack.formatArn({
          service: 'cloudwatch',
          resource: 'alarm',
          resourceName: `${prefix}-*`,
          arnFormat: ArnFormat.COLON_RESOURCE_NAME,
        }),
      },
    };
    // CloudWatch cannot publish to a topic under the AWS managed SNS key: a key of our own
    // whose policy lets CloudWatch use it.
    const key = new Key(this, 'TopicKey', {
      description: 'Encrypts the content pipeline alarm topic',
      enableKeyRotation: true,
      removalPolicy,
      pendingWindow: Duration.days(7),
    });
    key.addToResourcePolicy(
      new PolicyStatement({
        principals: [cloudwatch],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
        conditions: ourAlarms,
      }),
    );
    const topic = new Topic(this, 'Topic', {
      displayName: 'Content pipeline alarms',
      masterKey: key,
      enforceSSL: true,
    });
    topic.addToResourcePolicy(
      new PolicyStatement({
        sid: 'CloudWatchAlarmsOfThisStack',
        principals: [cloudwatch],
        actions: ['sns:Publish'],
        resources: [topic.topicArn],
        conditions: ourAlarms,
      }),
    );
    return topic;
  }
}
