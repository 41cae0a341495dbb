import { Duration, type RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { DeadLetterQueueRef } from '../../../shared/ops/adapters/aws/sqs-dead-letters';
import { opsApiRoutes } from '../../../shared/ops/ops-api';
import { opsEnv } from '../../../shared/ops/ops-config';
import type { ConsumerName, Topology } from '../../../shared/topology';
import type { DatabaseAccess } from './database';
import type { DeadLetterQueue } from './dead-letter-queue';
import type { InboxTable } from './inbox-table';
import { allowDescribeAlarms } from './pipeline-alarms';
import { PipelineFunction } from './pipeline-function';
import type { TasksApi } from './tasks-api';

/** A queue the ops API reads and redrives, with whom its messages are for. */
export interface OpsQueue {
  readonly queue: DeadLetterQueue;
  /** Whose events it holds. */
  readonly consumer: ConsumerName;
  /** The rule whose target DLQ it is, or `consumer-queue` for a consumer's queue's DLQ. */
  readonly rule: string;
}

export interface OpsApiProps {
  /** The REST API the tasks API is on: the ops routes go on the same one, behind IAM. */
  readonly api: TasksApi;
  /** The ops API's own database role (`functionRoles.ops`). */
  readonly database: DatabaseAccess;
  readonly inbox: InboxTable;
  readonly queues: readonly OpsQueue[];
  /** Each consumer's queue: a redrive sends the event there, as its rules do. */
  readonly consumerQueues: Readonly<Record<ConsumerName, IQueue>>;
  /** The topology's consumers, whose names the routes' request models list. */
  readonly consumerNames: Topology['consumerNames'];
  readonly relayFunction: IFunction;
  /**
   * Every alarm of the stack, by name: the ops status reads exactly these (`DescribeAlarms` by
   * name, granted on their ARNs; by prefix it would need `alarm:*`).
   */
  readonly alarmNames: readonly string[];
  /** What every alarm's name starts with (`<stack>-`): cut off, it leaves the alarm id. */
  readonly alarmPrefix: string;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/**
 * The ops API on AWS: the same handler (`shared/ops/ops-api.ts`) and routes as the local
 * runtime's, on the tasks API's REST API with IAM authorization on every method. The function
 * reads the database as the ops role, the inbox through its sparse index, the rule DLQs and
 * the consumers' queues' DLQs, and the stack's alarms; a redrive sends the event to the
 * consumer's queue (or nudges the relay) and deletes a dead letter only once the send was accepted.
 */
export class OpsApi extends Construct {
  public readonly function: PipelineFunction;

  constructor(scope: Construct, id: string, props: OpsApiProps) {
    super(scope, id);
    const queues: DeadLetterQueueRef[] = props.queues.map((q) => ({
      url: q.queue.queueUrl,
      consumer: q.consumer,
      rule: q.rule,
    }));
    const stack = Stack.of(this);
    this.function = new PipelineFunction(this, 'Function', {
      entry: 'functions/ops-api/handler.ts',
      serviceName: 'ops-api',
      description: 'Ops API: status, traces, dead lists and redrive',
      environment: {
        ...props.database.environment,
        [opsEnv.inboxTable]: props.inbox.table.tableName,
        [opsEnv.alarmPrefix]: props.alarmPrefix,
        [opsEnv.alarms]: stack.toJsonString(props.alarmNames),
        [opsEnv.relayFunction]: props.relayFunction.functionName,
        [opsEnv.consumerQueues]: stack.toJsonString(
          Object.fromEntries(Object.entries(props.consumerQueues).map(([c, q]) => [c, q.queueUrl])),
        ),
        [opsEnv.deadLetterQueues]: stack.toJsonString(queues),
      },
      memorySize: 512,
      // A list receives from every queue with a 1 s long poll; a resuming Aurora takes tens of seconds.
      timeout: Duration.seconds(29),
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    props.database.grant(this.function);
    props.inbox.grantOps(this.function);
    for (const q of props.queues) {
      this.function.addToRolePolicy(
        new PolicyStatement({
          actions: [
            'sqs:ReceiveMessage',
            'sqs:DeleteMessage',
            'sqs:ChangeMessageVisibility',
            'sqs:GetQueueAttributes',
          ],
          resources: [q.queue.queueArn],
        }),
      );
    }
    // A redrive's SendMessage only (SqsRedelivery sends by URL and reads nothing of the queue); the queues are
    // SQS-encrypted, so there is no key to grant.
    this.function.addToRolePolicy(
      new PolicyStatement({
        actions: ['sqs:SendMessage'],
        resources: Object.values(props.consumerQueues).map((q) => q.queueArn),
      }),
    );
    this.function.addToRolePolicy(
      new PolicyStatement({
        actions: ['lambda:InvokeFunction'],
        resources: [props.relayFunction.functionArn],
      }),
    );
    allowDescribeAlarms(this.function, props.alarmNames);
    // GetMetricData has no resource-level permissions: "*" is the only resource it takes.
    this.function.addToRolePolicy(
      new PolicyStatement({ actions: ['cloudwatch:GetMetricData'], resources: ['*'] }),
    );

    props.api.addRoutes({ routes: opsApiRoutes(props.consumerNames), function: this.function });

    const sync = 'Invoked synchronously by API Gateway only; the caller sees every failure.';
    Validations.of(this.function).acknowledge(
      { id: 'Serverless-LambdaAsyncFailureDestination', reason: sync },
      { id: 'Serverless-LambdaDLQ', reason: sync },
    );
  }
}
