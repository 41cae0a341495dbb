import { fileURLToPath } from 'node:url';
import { Duration, type RemovalPolicy, Validations } from 'aws-cdk-lib';
import type { IGrantable } from 'aws-cdk-lib/aws-iam';
import { SqsDestination } from 'aws-cdk-lib/aws-lambda-destinations';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { consumerEnv, consumerServiceName } from '../../../shared/consumers/contract';
import type { ConsumerDefinition } from '../../../shared/consumers/define-consumer';
import type { ConsumerName, ConsumerPolicy } from '../../../shared/topology';
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
  /** `topology.consumers[name]`: the async-invoke retries, max event age and queue retention come from here. */
  readonly policy: ConsumerPolicy;
  readonly inbox: InboxTable;
  readonly effect: ConsumerEffectResources;
  /** Where Lambda sends the on-failure record once its attempts are spent: the consumers' retry queue. */
  readonly onFailure: IQueue;
  /** @default 60 seconds (a consumer that reads the database may wait on an auto-paused Aurora resuming) */
  readonly timeout?: Duration;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/**
 * One consumer: the `handler.ts` of its folder with the inbox, its effect's resources, and
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
    // Typed as the project's registry names it; a topology variant's consumers are realized alike.
    this.name = props.definition.name as ConsumerName;
    this.function = new PipelineFunction(this, 'Function', {
      entry: fileURLToPath(new URL('handler.ts', props.definition.folder)),
      serviceName: consumerServiceName(this.name),
      description: props.policy.description,
      environment: {
        [consumerEnv.consumerName]: this.name,
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
    props.inbox.grantConsumer(this.function, this.name);
    props.effect.grant(this.function);
    Validations.of(this.function).acknowledge({
      id: 'Serverless-LambdaDLQ',
      reason:
        'An on-failure destination (the consumers’ retry queue) replaces the legacy DLQ: it records the error and the request context, not just the event, and the retries act on it.',
    });
  }
}
