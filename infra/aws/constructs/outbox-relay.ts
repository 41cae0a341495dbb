import { Duration, type RemovalPolicy, Validations } from 'aws-cdk-lib';
import { type IEventBus, Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { EventSourceMapping } from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { relayServiceName } from '../../../shared/outbox/relay-metrics';
import type { RelaySettings } from '../../../shared/topology';
import type { DatabaseAccess } from './database';
import { PipelineFunction } from './pipeline-function';

export interface OutboxRelayProps {
  /** The relay's own database role (`functionRoles.relay`). */
  readonly database: DatabaseAccess;
  readonly eventBus: IEventBus;
  /** `topology.relay`: the Lambda timeout and the rest of the relay's settings. */
  readonly relay: RelaySettings;
  /** The safety sweep period (the stage's: an hour in a sandbox, so an idle Aurora pauses). */
  readonly sweep: Duration;
  /** Upper bound on relays running at once; `undefined` (the default) reserves none. */
  readonly reservedConcurrency: number | undefined;
  /** Prefix of the physical names this construct sets (`content-pipeline-<stage>`). */
  readonly namePrefix: string;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/**
 * The outbox relay: a function that drains what is due and returns, nudged by the tasks API
 * when a change finds no run draining, woken through its own queue, and swept by a scheduled
 * rule (on the default bus, where scheduled rules live) every `sweep`. An idle pipeline
 * therefore touches the database once per sweep.
 *
 * The wake queue: a run that leaves rows due later (a backoff) sends itself a message delayed
 * until then, one that runs out of time with rows due sends one for now, one that meets a
 * backlog asks for a helper; the queue's event source mapping invokes the function. SendMessage
 * is a data-plane call: nothing on a run's path switches a rule on or off (EnableRule and
 * DisableRule are control-plane calls EventBridge allows about 50 a second per account).
 *
 * Scheduled EventBridge rules rather than EventBridge Scheduler: LocalStack runs scheduled rules
 * but only stores Scheduler schedules.
 */
export class OutboxRelay extends Construct {
  public readonly function: PipelineFunction;
  /** The safety sweep. */
  public readonly schedule: Rule;
  /** The relay's wake-ups: delayed messages the function receives through an event source mapping. */
  public readonly wakeQueue: Queue;
  /** The wake queue's event source mapping: what starts the relay from a wake-up. */
  public readonly wakeMapping: EventSourceMapping;

  constructor(scope: Construct, id: string, props: OutboxRelayProps) {
    super(scope, id);
    const timeout = Duration.seconds(props.relay.timeoutSeconds);
    this.wakeQueue = new Queue(this, 'WakeQueue', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      // Lambda's advice for an SQS event source: at least six times the function's timeout.
      // https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html
      visibilityTimeout: Duration.seconds(timeout.toSeconds() * 6),
      // A wake-up is at most 15 minutes away; one older than a day is long covered by the sweep.
      retentionPeriod: Duration.days(1),
    });
    this.function = new PipelineFunction(this, 'Function', {
      entry: 'functions/outbox-relay/handler.ts',
      serviceName: relayServiceName,
      description: 'Publishes committed outbox events to the pipeline bus',
      environment: {
        ...props.database.environment,
        EVENT_BUS_NAME: props.eventBus.eventBusName,
        RELAY_WAKE_QUEUE_URL: this.wakeQueue.queueUrl,
      },
      memorySize: 256,
      timeout,
      reservedConcurrentExecutions: props.reservedConcurrency,
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    props.database.grant(this.function);
    props.eventBus.grantPutEventsTo(this.function);
    this.wakeQueue.grantSendMessages(this.function);
    // One wake-up per invocation: each asks for one run, and the run lease makes extra ones cheap.
    this.function.addEventSource(new SqsEventSource(this.wakeQueue, { batchSize: 1 }));
    const mapping = this.function.node.children.find((c) => c instanceof EventSourceMapping);
    if (!(mapping instanceof EventSourceMapping))
      throw new Error('the wake queue has no event source mapping');
    this.wakeMapping = mapping;

    // A run that failed (a crash, a timeout, a database that would not resume) is retried by
    // Lambda after about one and two minutes: with an hour between safety sweeps, a lost nudge
    // run must not wait for the next one.
    this.function.configureAsyncInvoke({ retryAttempts: 2, maxEventAge: Duration.minutes(10) });

    this.schedule = new Rule(this, 'Schedule', {
      description: 'Safety sweep of the outbox relay: delivers what a lost nudge left behind',
      schedule: Schedule.rate(props.sweep),
      targets: [new LambdaFunction(this.function, { retryAttempts: 2 })],
    });

    const why =
      'The relay carries no payload worth keeping (a sweep tick, a nudge or a wake-up): a failed run is retried by Lambda (or the queue) and redone by the next sweep, and failures are alarmed through the Errors metric, the oldest-pending-age and the relay-silent alarms.';
    Validations.of(this.function).acknowledge(
      { id: 'Serverless-LambdaAsyncFailureDestination', reason: why },
      { id: 'Serverless-LambdaDLQ', reason: why },
    );
    Validations.of(this.schedule).acknowledge({ id: 'Serverless-EventBusDLQ', reason: why });
    Validations.of(this.wakeQueue).acknowledge(
      { id: 'AwsSolutions-SQS3', reason: why },
      { id: 'Serverless-SQSRedrivePolicy', reason: why },
    );
    // The mapping is the function's own (Function/SqsEventSource:...): acknowledged at this scope.
    Validations.of(this).acknowledge({ id: 'Serverless-LambdaEventSourceMappingDestination', reason: why });
  }
}
