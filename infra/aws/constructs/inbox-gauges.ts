import { type Duration, type RemovalPolicy, Validations } from 'aws-cdk-lib';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { consumerEnv, inboxGaugesServiceName } from '../../../shared/consumers/contract';
import type { InboxTable } from './inbox-table';
import { PipelineFunction } from './pipeline-function';

export interface InboxGaugesProps {
  readonly inbox: InboxTable;
  /** How often the gauges are counted: the period of the inbox-dead alarms. */
  readonly period: Duration;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/**
 * Counts each consumer's DEAD inbox records every `period` from the inbox's sparse index (a
 * few small Queries, never the database, so an idle Aurora stays paused) and emits them as
 * gauges, so an inbox-dead alarm stays in ALARM until the records are redriven or expire.
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
      environment: { [consumerEnv.inboxTable]: props.inbox.table.tableName },
      memorySize: 256,
      timeout: props.period,
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    props.inbox.grantCountOpen(this.function);
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
