import { type Duration, type RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { consumerEnv, inboxGaugesServiceName } from '../../../shared/consumers/contract';
import { gaugeAlarmsEnv } from '../../../shared/ops/adapters/aws/ok-alarms';
import type { InboxTable } from './inbox-table';
import { allowDescribeAlarms } from './pipeline-alarms';
import { PipelineFunction } from './pipeline-function';

export interface InboxGaugesProps {
  readonly inbox: InboxTable;
  /**
   * The alarms the gauges feed, by alarm id (`inboxGaugeAlarmIds`: inbox-dead,
   * inbox-oldest-lease and inbox-retry-age): a zero is sent only while its alarm is not OK.
   */
  readonly alarmNames: Readonly<Record<string, string>>;
  /** How often the gauges are read: the period of their alarms. */
  readonly period: Duration;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/**
 * Reads each consumer's inbox figures every `period` from the inbox's sparse index (a few small
 * Queries, never the database, so an idle Aurora stays paused): DEAD and FAILED counts, the
 * oldest `PROCESSING` lease and the oldest retry age, emitted as gauges, so their alarms stay in
 * ALARM until the records are redriven, taken over or expire. A zero is sent only while its
 * alarm is not OK (it reads their states), so an idle, healthy pipeline pays for no gauge metric.
 */
export class InboxGauges extends Construct {
  public readonly function: PipelineFunction;
  public readonly schedule: Rule;

  constructor(scope: Construct, id: string, props: InboxGaugesProps) {
    super(scope, id);
    this.function = new PipelineFunction(this, 'Function', {
      entry: 'functions/inbox-gauges/handler.ts',
      serviceName: inboxGaugesServiceName,
      description: 'Inbox figures per consumer (DEAD, FAILED, oldest lease, retry age) for their alarms',
      environment: {
        [consumerEnv.inboxTable]: props.inbox.table.tableName,
        [gaugeAlarmsEnv]: Stack.of(this).toJsonString(props.alarmNames),
      },
      memorySize: 256,
      timeout: props.period,
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    props.inbox.grantCountOpen(this.function);
    allowDescribeAlarms(this.function, Object.values(props.alarmNames));
    this.function.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: props.period });
    this.schedule = new Rule(this, 'Schedule', {
      description: 'Reads the inbox figures for their alarms',
      schedule: Schedule.rate(props.period),
      targets: [new LambdaFunction(this.function, { retryAttempts: 0 })],
    });
    const why =
      'A gauge run carries no payload: a failed run is redone by the next one, and the inbox alarms keep their state meanwhile.';
    Validations.of(this.function).acknowledge(
      { id: 'Serverless-LambdaAsyncFailureDestination', reason: why },
      { id: 'Serverless-LambdaDLQ', reason: why },
    );
    Validations.of(this.schedule).acknowledge({ id: 'Serverless-EventBusDLQ', reason: why });
  }
}
