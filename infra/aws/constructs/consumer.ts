import { fileURLToPath } from 'node:url';
import { Duration, type RemovalPolicy, Validations } from 'aws-cdk-lib';
import type { Rule } from 'aws-cdk-lib/aws-events';
import { AnyPrincipal, Effect, type IGrantable, type IRole, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { EventSourceMapping } from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { ConsumerInboxConfig } from '../../../shared/consumers/consumer-deps';
import { consumerEnv, consumerQueueEnv, consumerServiceName } from '../../../shared/consumers/contract';
import type { ConsumerDefinition } from '../../../shared/consumers/define-consumer';
import {
  consumerFunctionTimeoutSeconds,
  queueMaxReceiveCount,
  queueSecondsToDeadLetter,
  visibilityTimeoutPerFunctionTimeout,
} from '../../../shared/consumers/queue-timing';
import type { ConsumerName, ConsumerPolicy } from '../../../shared/topology';
import { DeadLetterQueue } from './dead-letter-queue';
import type { InboxTable } from './inbox-table';
import { PipelineFunction } from './pipeline-function';

/** What one consumer's effect needs beyond the inbox (its declared resources): its environment and its grants. */
export interface ConsumerEffectResources {
  readonly environment: Readonly<Record<string, string>>;
  grant(grantee: IGrantable): void;
}

export interface ConsumerProps {
  /** Its declaration: its name, and its folder, whose `handler.ts` is the function's entry. */
  readonly definition: ConsumerDefinition;
  /** `topology.consumers[name]`: its queue, its mapping's batch and concurrency, and its retries come from here. */
  readonly policy: ConsumerPolicy;
  /** Its inbox settings from its topology (`inboxSettingsFor`) and the inbox index's shards: the function reads them from `INBOX_SETTINGS`. */
  readonly inboxSettings: ConsumerInboxConfig;
  readonly inbox: InboxTable;
  readonly effect: ConsumerEffectResources;
  /** @default consumerFunctionTimeoutSeconds (60: a consumer that reads the database may wait on an auto-paused Aurora resuming) */
  readonly timeout?: Duration;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/**
 * One consumer on AWS: its queue, the `handler.ts` of its folder fed by the queue's event source
 * mapping, and the queue's dead letters (see `shared/consumers/queue-delivery.ts` for how a day
 * of retries holds). The queue is the buffer in front of the function: the mapping runs at most
 * the policy's `maxConcurrency` invocations, so a slow downstream holds that many executions of
 * the account's, never all of them; each message is reported on its own
 * (`ReportBatchItemFailures`). The function has no resource policy: only its mapping, polling
 * with the function's own role, hands it events, and it acts only on a receipt SQS recognises.
 */
export class Consumer extends Construct {
  public readonly name: ConsumerName;
  public readonly function: PipelineFunction;
  /** What the consumer's rules deliver to, and the ops redrives send to. */
  public readonly queue: Queue;
  /** What the function could never handle: alarmed, listed and redriven by the ops API. */
  public readonly deadLetters: DeadLetterQueue;
  /** The event source mapping that hands the queue's messages to the function. */
  public readonly mapping: EventSourceMapping;

  constructor(scope: Construct, id: string, props: ConsumerProps) {
    super(scope, id);
    // Typed as the project's registry names it; a topology variant's consumers are realized alike.
    this.name = props.definition.name as ConsumerName;
    const timeout = props.timeout ?? Duration.seconds(consumerFunctionTimeoutSeconds);
    const visibilityTimeout = Duration.seconds(timeout.toSeconds() * visibilityTimeoutPerFunctionTimeout);
    // The policy's checks assume the default timeout; a longer one spaces the receives further.
    const toDeadLetter = queueSecondsToDeadLetter(props.policy, timeout.toSeconds());
    if (props.policy.queue.retentionSeconds < toDeadLetter)
      throw new Error(
        `consumer ${this.name}: its queue keeps a message ${props.policy.queue.retentionSeconds} s, less than the ${toDeadLetter} s a message its function fails on can take to reach the DLQ at a ${timeout.toSeconds()} s timeout`,
      );
    this.deadLetters = new DeadLetterQueue(this, 'DeadLetters', {
      purpose: `events the ${this.name} consumer could never handle (its function failed on every receive for its whole retry budget)`,
      retention: Duration.seconds(props.policy.deadLetterRetentionSeconds),
    });
    this.queue = new Queue(this, 'Queue', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout,
      retentionPeriod: Duration.seconds(props.policy.queue.retentionSeconds),
      deadLetterQueue: { queue: this.deadLetters, maxReceiveCount: queueMaxReceiveCount(props.policy) },
    });
    this.function = new PipelineFunction(this, 'Function', {
      entry: fileURLToPath(new URL('handler.ts', props.definition.folder)),
      serviceName: consumerServiceName(this.name),
      description: props.policy.description,
      environment: {
        [consumerEnv.consumerName]: this.name,
        [consumerEnv.inboxTable]: props.inbox.table.tableName,
        [consumerEnv.inboxSettings]: JSON.stringify(props.inboxSettings),
        [consumerQueueEnv.url]: this.queue.queueUrl,
        [consumerQueueEnv.arn]: this.queue.queueArn,
        [consumerQueueEnv.visibilityTimeoutSeconds]: String(visibilityTimeout.toSeconds()),
        ...props.effect.environment,
      },
      memorySize: 256,
      timeout,
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    // Grants the function's role ReceiveMessage, DeleteMessage, ChangeMessageVisibility and
    // GetQueueAttributes on its queue, which the mapping and the handler use.
    this.function.addEventSource(
      new SqsEventSource(this.queue, {
        batchSize: props.policy.queue.batchSize,
        maxConcurrency: props.policy.queue.maxConcurrency,
        reportBatchItemFailures: true,
      }),
    );
    const mapping = this.function.node.children.find((c) => c instanceof EventSourceMapping);
    if (!(mapping instanceof EventSourceMapping))
      throw new Error(`the ${this.name} queue has no event source mapping`);
    this.mapping = mapping;
    props.inbox.grantConsumer(this.function, this.name);
    props.effect.grant(this.function);
    Validations.of(this.function).acknowledge(
      ...['Serverless-LambdaDLQ', 'Serverless-LambdaAsyncFailureDestination'].map((id) => ({
        id,
        reason:
          'Never invoked asynchronously: only its queue’s event source mapping invokes it (synchronously) and no resource policy lets anyone else; the dead letters of an SQS-fed function belong on its queue, whose redrive policy sends what it never handles to an alarmed DLQ.',
      })),
    );
    // An SQS mapping takes no on-failure destination (those are for stream and Kafka sources):
    // https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-lambda-eventsourcemapping-onfailure.html
    Validations.of(this).acknowledge({
      id: 'Serverless-LambdaEventSourceMappingDestination',
      reason:
        'An SQS event source mapping takes no on-failure destination (Lambda keeps those for stream and Kafka sources); the queue’s redrive policy is its DLQ: what the function fails on for the receives of its whole retry budget goes there, alarmed, listed and redriven by the ops API.',
    });
  }

  /**
   * Lets only `rules` (EventBridge, `aws:SourceArn`) and `senders` (the ops redrives, by
   * `aws:PrincipalArn`) send to the queue: an explicit Deny of `sqs:SendMessage` to everyone
   * else, which no identity policy of the account can override, so nobody can put a forged
   * event in front of the consumer. A negated condition on a key the request lacks holds, so the
   * Deny applies to any principal that is neither (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html).
   * The rules' own Allow (with `aws:SourceArn`) is the events target's
   * (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sqs-permissions).
   */
  acceptOnlyFrom(rules: readonly Rule[], senders: readonly IRole[]): void {
    this.queue.addToResourcePolicy(
      new PolicyStatement({
        sid: 'OnlyItsRulesAndRedrivesSend',
        effect: Effect.DENY,
        principals: [new AnyPrincipal()],
        actions: ['sqs:SendMessage'],
        resources: [this.queue.queueArn],
        conditions: {
          ArnNotEquals: { 'aws:SourceArn': rules.map((r) => r.ruleArn) },
          ArnNotLike: { 'aws:PrincipalArn': senders.map((r) => r.roleArn) },
        },
      }),
    );
  }
}
