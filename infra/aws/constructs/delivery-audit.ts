import { Duration, type RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import type { Rule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { consumerEnv, deliveryAuditServiceName } from '../../../shared/consumers/contract';
import { gaugeAlarmsEnv } from '../../../shared/ops/adapters/aws/ok-alarms';
import { opsEnv } from '../../../shared/ops/ops-config';
import type { AuditSettings, ConsumerName } from '../../../shared/topology';
import type { DatabaseAccess } from './database';
import type { InboxTable } from './inbox-table';
import { allowDescribeAlarms } from './pipeline-alarms';
import { PipelineFunction } from './pipeline-function';

export interface DeliveryAuditProps {
  /** The audit's own database role (`functionRoles.audit`): reads delivered rows, keeps its cursor and findings. */
  readonly database: DatabaseAccess;
  readonly inbox: InboxTable;
  /**
   * Each consumer's queue: the audit re-sends an inbox record nothing will retry by sending its
   * event there, as the consumer's rules do (shared/audit/stuck-records.ts).
   */
  readonly consumerQueues: Readonly<Record<ConsumerName, IQueue>>;
  /** `topology.audit`: the Lambda timeout. */
  readonly audit: AuditSettings;
  /**
   * The scheduled rule whose ticks run the audit: the relay's safety sweep, so that the audit
   * and the sweep wake an idle Aurora Serverless v2 cluster together, once per period.
   */
  readonly schedule: Rule;
  /**
   * The `undelivered` alarm, by alarm id: a point of zero is sent only while it is not OK (as
   * the inbox gauges do), so a healthy pipeline pays for no audit metric.
   */
  readonly alarmNames: Readonly<Record<string, string>>;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/**
 * The delivery audit on AWS: a function on the relay's schedule that checks that every event
 * the relay delivered reached every consumer the topology's rules route it to
 * (`shared/audit/delivery-audit.ts`), and emits `UndeliveredToConsumer` per consumer. It reads
 * the outbox as its own role through the Data API and asks the inbox which records exist
 * (BatchGetItem of exact keys, every consumer's), nothing else of either.
 */
export class DeliveryAudit extends Construct {
  public readonly function: PipelineFunction;

  constructor(scope: Construct, id: string, props: DeliveryAuditProps) {
    super(scope, id);
    const stack = Stack.of(this);
    this.function = new PipelineFunction(this, 'Function', {
      entry: 'functions/delivery-audit/handler.ts',
      serviceName: deliveryAuditServiceName,
      description: 'Checks that every delivered event reached every consumer its rules route it to',
      environment: {
        ...props.database.environment,
        [consumerEnv.inboxTable]: props.inbox.table.tableName,
        [gaugeAlarmsEnv]: stack.toJsonString(props.alarmNames),
        [opsEnv.consumerQueues]: stack.toJsonString(
          Object.fromEntries(Object.entries(props.consumerQueues).map(([c, q]) => [c, q.queueUrl])),
        ),
      },
      memorySize: 256,
      timeout: Duration.seconds(props.audit.timeoutSeconds),
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    props.database.grant(this.function);
    props.inbox.grantPresence(this.function);
    // The stuck records: their index entries (Query), the records (BatchGetItem, above), and
    // their re-send.
    props.inbox.grantCountOpen(this.function);
    // SendMessage only (SqsRedelivery sends by URL and reads nothing of the queue); the queues are
    // SQS-encrypted, so there is no key to grant.
    this.function.addToRolePolicy(
      new PolicyStatement({
        actions: ['sqs:SendMessage'],
        resources: Object.values(props.consumerQueues).map((q) => q.queueArn),
      }),
    );
    allowDescribeAlarms(this.function, Object.values(props.alarmNames));
    // A failed run is redone by the next tick from the cursor it kept; Lambda's retries would
    // only queue behind the audit's lease.
    this.function.configureAsyncInvoke({
      retryAttempts: 0,
      maxEventAge: Duration.seconds(props.audit.timeoutSeconds),
    });
    props.schedule.addTarget(new LambdaFunction(this.function, { retryAttempts: 0 }));
    const why =
      'An audit run carries no payload: a failed run is redone by the next tick from the cursor it keeps, its errors alarm (delivery-audit-errors), and its findings stay until a run finds their records.';
    Validations.of(this.function).acknowledge(
      { id: 'Serverless-LambdaAsyncFailureDestination', reason: why },
      { id: 'Serverless-LambdaDLQ', reason: why },
    );
  }
}
