import { ArnFormat, type Duration, type RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { consumerEnv, inboxGaugesServiceName } from '../../../shared/consumers/contract';
import type { ConsumerName } from '../../../shared/topology';
import type { InboxTable } from './inbox-table';
import { PipelineFunction } from './pipeline-function';

export interface InboxGaugesProps {
  readonly inbox: InboxTable;
  /** Each consumer's inbox-dead alarm: a gauge of zero is sent only while that alarm is not OK. */
  readonly alarmNames: Readonly<Record<ConsumerName, string>>;
  /** How often the gauges are counted: the period of the inbox-dead alarms. */
  readonly period: Duration;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/**
 * Counts each consumer's DEAD inbox records every `period` from the inbox's sparse index (a
 * few small Queries, never the database, so an idle Aurora stays paused) and emits them as
 * gauges, so an inbox-dead alarm stays in ALARM until the records are redriven or expire. A
 * zero is sent only while that alarm is not OK (it reads their states), so an idle, healthy
 * pipeline pays for no gauge metric.
 */
export class InboxGauges extends Construct {
  public readonly function: PipelineFunction;
  public readonly schedule: Rule;

  constructor(scope: Construct, id: string, props: InboxGaugesProps) {
    super(scope, id);
    this.function = new PipelineFunction(this, 'Function', {
      entry: 'functions/inbox-gauges/handler.ts',
      serviceName: inboxGaugesServiceName,
      description: 'Counts DEAD inbox records per consumer for their alarms',
      environment: {
        [consumerEnv.inboxTable]: props.inbox.table.tableName,
        INBOX_DEAD_ALARMS: Stack.of(this).toJsonString(props.alarmNames),
      },
      memorySize: 256,
      timeout: props.period,
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    props.inbox.grantCountOpen(this.function);
    const stack = Stack.of(this);
    this.function.addToRolePolicy(
      new PolicyStatement({
        actions: ['cloudwatch:DescribeAlarms'],
        resources: Object.values(props.alarmNames).map((name) =>
          stack.formatArn({
            service: 'cloudwatch',
            resource: 'alarm',
            resourceName: name,
            arnFormat: ArnFormat.COLON_RESOURCE_NAME,
          }),
        ),
      }),
    );
    this.function.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: props.period });
    this.schedule = new Rule(this, 'Schedule', {
      description: 'Counts DEAD inbox records for the inbox-dead alarms',
      schedule: Schedule.rate(props.period),
      targets: [new LambdaFunction(this.function, { retryAttempts: 0 })],
    });
    const why =
      'A gauge run carries no payload: a failed run is redone by the next one, and the inbox-dead alarms keep their state meanwhile.';
    Validations.of(this.function).acknowledge(
      { id: 'Serverless-LambdaAsyncFailureDestination', reason: why },
      { id: 'Serverless-LambdaDLQ', reason: why },
    );
    Validations.of(this.schedule).acknowledge({ id: 'Serverless-EventBusDLQ', reason: why });
  }
}
