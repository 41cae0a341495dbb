import { Duration, type RemovalPolicy, Validations } from 'aws-cdk-lib';
import { type IEventBus, Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import type { RelayConfig } from '../../../shared/topology';
import type { PipelineDatabase } from './database';
import { PipelineFunction } from './pipeline-function';

export interface OutboxRelayProps {
  readonly database: PipelineDatabase;
  readonly eventBus: IEventBus;
  /** `topology.relay`: schedule period and Lambda timeout come from here. */
  readonly relay: RelayConfig;
  /** Upper bound on relays running at once; `undefined` reserves none. */
  readonly reservedConcurrency: number | undefined;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/** Powertools service name of the relay: the `service` dimension of every relay metric. */
export const relayServiceName = 'outbox-relay';

/**
 * The outbox relay: a function that loops inside each invocation until its budget is spent,
 * started every `relay.scheduleSeconds` by a scheduled rule and nudged by the tasks API.
 * A scheduled EventBridge rule rather than EventBridge Scheduler: LocalStack runs scheduled
 * rules but only stores Scheduler schedules.
 */
export class OutboxRelay extends Construct {
  public readonly function: PipelineFunction;
  public readonly schedule: Rule;

  constructor(scope: Construct, id: string, props: OutboxRelayProps) {
    super(scope, id);
    this.function = new PipelineFunction(this, 'Function', {
      entry: 'functions/outbox-relay/handler.ts',
      serviceName: relayServiceName,
      description: 'Publishes committed outbox events to the pipeline bus',
      environment: { ...props.database.environment, EVENT_BUS_NAME: props.eventBus.eventBusName },
      memorySize: 256,
      timeout: Duration.seconds(props.relay.timeoutSeconds),
      reservedConcurrentExecutions: props.reservedConcurrency,
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    props.database.grantAccess(this.function);
    props.eventBus.grantPutEventsTo(this.function);

    // A failed or throttled run is not worth retrying: the next scheduled run (or nudge) does
    // the same work, and queued retries would only pile up behind the reserved concurrency.
    this.function.configureAsyncInvoke({
      retryAttempts: 0,
      maxEventAge: Duration.seconds(Math.max(60, props.relay.scheduleSeconds)),
    });

    this.schedule = new Rule(this, 'Schedule', {
      description: 'Runs the outbox relay; each run polls for the whole period',
      schedule: Schedule.rate(Duration.seconds(props.relay.scheduleSeconds)),
      targets: [new LambdaFunction(this.function, { retryAttempts: 0 })],
    });

    const why =
      'The relay carries no payload worth keeping (a schedule tick or a nudge): a failed run is redone by the next tick, and failures are alarmed through the Errors metric and the oldest-pending-age alarm.';
    Validations.of(this.function).acknowledge(
      { id: 'Serverless-LambdaAsyncFailureDestination', reason: why },
      { id: 'Serverless-LambdaDLQ', reason: why },
    );
    Validations.of(this.schedule).acknowledge({ id: 'Serverless-EventBusDLQ', reason: why });
  }
}
