import { Duration, type RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { consumerRetriesEnv, consumerRetriesServiceName } from '../../../shared/consumers/contract';
import type { ConsumerName } from '../../../shared/topology';
import { DeadLetterQueue } from './dead-letter-queue';
import { PipelineFunction } from './pipeline-function';

export interface ConsumerRetriesProps {
  /** How long the dead letters keep a message for an operator (the consumers' `deadLetterRetentionSeconds`). */
  readonly deadLetterRetention: Duration;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/** Handler runs a batch in well under a second; a slow Lambda invoke gets its SDK retries. */
const timeout = Duration.seconds(30);
/**
 * Receives of one message that fail before it goes to the dead letters: five, as Lambda
 * advises for an SQS source, so a throttled or briefly failing retry function loses nothing.
 * https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html
 */
const maxReceiveCount = 5;

/**
 * The consumers' retries on AWS (`shared/consumers/retries.ts`): the queue every consumer's
 * Lambda on-failure destination sends to, a small function its event source mapping feeds,
 * which sends a record back delayed by the consumer's backoff and then invokes the consumer
 * again, until the event is its consumer's maximum age (plus a backoff) old; and the dead
 * letters, where what the retries gave up on waits, alarmed, for a person.
 *
 * One queue and one mapping for every consumer: an event source mapping long-polls its queue
 * even when idle (SQS requests every hour of the month), so one per consumer would cost three
 * times that for nothing.
 */
export class ConsumerRetries extends Construct {
  /** Lambda's on-failure records of every consumer, and the delayed retries: routine, not alarmed. */
  public readonly queue: Queue;
  /** What needs a person: retries that gave up, and records the function could not handle. */
  public readonly deadLetters: DeadLetterQueue;
  public function: PipelineFunction | undefined;

  constructor(
    scope: Construct,
    id: string,
    private readonly props: ConsumerRetriesProps,
  ) {
    super(scope, id);
    this.deadLetters = new DeadLetterQueue(this, 'DeadLetters', {
      purpose:
        'events every consumer retry gave up on: failing for longer than the consumer’s maximum event age',
      retention: props.deadLetterRetention,
    });
    this.queue = new Queue(this, 'Queue', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      // Lambda's advice for an SQS event source: at least six times the function's timeout.
      visibilityTimeout: Duration.seconds(timeout.toSeconds() * 6),
      // A record waits a backoff (a minute) here; four days cover a retry function down for long.
      retentionPeriod: Duration.days(4),
      deadLetterQueue: { queue: this.deadLetters, maxReceiveCount },
    });
  }

  /** Creates the function that retries `consumers` (once they exist: it names and invokes them). */
  retry(consumers: Readonly<Record<ConsumerName, IFunction>>): PipelineFunction {
    const stack = Stack.of(this);
    const fn = new PipelineFunction(this, 'Function', {
      entry: 'functions/consumer-retries/handler.ts',
      serviceName: consumerRetriesServiceName,
      description:
        'Retries consumers whose Lambda attempts failed, with backoff, up to their maximum event age',
      environment: {
        [consumerRetriesEnv.retryQueueUrl]: this.queue.queueUrl,
        [consumerRetriesEnv.deadLetterQueueUrl]: this.deadLetters.queueUrl,
        [consumerRetriesEnv.consumerFunctions]: stack.toJsonString(
          Object.fromEntries(Object.entries(consumers).map(([c, f]) => [c, f.functionName])),
        ),
      },
      memorySize: 256,
      timeout,
      logRetention: this.props.logRetention,
      removalPolicy: this.props.removalPolicy,
    });
    this.queue.grantSendMessages(fn);
    this.deadLetters.grantSendMessages(fn);
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['lambda:InvokeFunction'],
        resources: Object.values(consumers).map((f) => f.functionArn),
      }),
    );
    fn.addEventSource(new SqsEventSource(this.queue, { batchSize: 10, reportBatchItemFailures: true }));
    const why =
      'Fed by its queue’s event source mapping only: a record it cannot handle returns to the queue and, after five receives, goes to the alarmed dead letters.';
    Validations.of(fn).acknowledge(
      { id: 'Serverless-LambdaAsyncFailureDestination', reason: why },
      { id: 'Serverless-LambdaDLQ', reason: why },
    );
    Validations.of(this).acknowledge({ id: 'Serverless-LambdaEventSourceMappingDestination', reason: why });
    this.function = fn;
    return fn;
  }
}
