import { Duration, type RemovalPolicy, Validations } from 'aws-cdk-lib';
import type { IGrantable } from 'aws-cdk-lib/aws-iam';
import { SqsDestination } from 'aws-cdk-lib/aws-lambda-destinations';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { consumerEnv, consumerServiceName } from '../../../shared/consumers/contract';
import type { ConsumerName, ConsumerPolicy } from '../../../shared/topology';
import type { InboxTable } from './inbox-table';
import { PipelineFunction } from './pipeline-function';

/** What one consumer's side effect needs beyond the inbox: its environment and its grants. */
export interface ConsumerEffectResources {
  readonly environment: Readonly<Record<string, string>>;
  grant(grantee: IGrantable): void;
}

export interface ConsumerProps {
  readonly name: ConsumerName;
  /** `topology.consumers[name]`: the async-invoke retries, max event age and queue retention come from here. */
  readonly policy: ConsumerPolicy;
  readonly inbox: InboxTable;
  readonly effect: ConsumerEffectResources;
  /** Where Lambda sends the on-failure record once its attempts are spent: the consumers' retry queue. */
  readonly onFailure: IQueue;
  /** @default 60 seconds (the archive consumer may wait on an auto-paused Aurora resuming) */
  readonly timeout?: Duration;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/**
 * One consumer: `functions/consumers/{name}` with the inbox, its effect's resources, and
 * Lambda's asynchronous-invocation settings from the topology. The function's own errors are
 * retried by Lambda (`asyncInvoke.retryAttempts`), then its on-failure record (the error and
 * the original event) goes to the consumers' retry queue (`ConsumerRetries`), which retries it
 * with backoff until the event's maximum age; EventBridge's target DLQ never sees them.
 */
export class Consumer extends Construct {
  public readonly name: ConsumerName;
  public readonly function: PipelineFunction;

  constructor(scope: Construct, id: string, props: ConsumerProps) {
    super(scope, id);
    this.name = props.name;
    this.function = new PipelineFunction(this, 'Function', {
      entry: `functions/consumers/${props.name}/handler.ts`,
      serviceName: consumerServiceName(props.name),
      description: props.policy.description,
      environment: {
        [consumerEnv.consumerName]: props.name,
        [consumerEnv.inboxTable]: props.inbox.table.tableName,
        ...props.effect.environment,
      },
      memorySize: 256,
      timeout: props.timeout ?? Duration.seconds(60),
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    this.function.configureAsyncInvoke({
      retryAttempts: props.policy.asyncInvoke.retryAttempts,
      maxEventAge: Duration.seconds(props.policy.asyncInvoke.maximumEventAgeSeconds),
      onFailure: new SqsDestination(props.onFailure),
    });
    props.inbox.grantConsumer(this.function, props.name);
    props.effect.grant(this.function);
    Validations.of(this.function).acknowledge({
      id: 'Serverless-LambdaDLQ',
      reason:
        'An on-failure destination (the consumers’ retry queue) replaces the legacy DLQ: it records the error and the request context, not just the event, and the retries act on it.',
    });
  }
}
