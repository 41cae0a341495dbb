import { ArnFormat, Duration, type RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { type IEventBus, Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { relayServiceName } from '../../../shared/outbox/relay-metrics';
import type { RelayConfig } from '../../../shared/topology';
import type { DatabaseAccess } from './database';
import { PipelineFunction } from './pipeline-function';

export interface OutboxRelayProps {
  /** The relay's own database role (`functionRoles.relay`). */
  readonly database: DatabaseAccess;
  readonly eventBus: IEventBus;
  /** `topology.relay`: the busy sweep, the Lambda timeout and the rest of the relay's settings. */
  readonly relay: RelayConfig;
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
 * after each commit and swept by two scheduled rules (on the default bus, where scheduled
 * rules live): the safety sweep every `sweep`, and the busy sweep every `busySweepSeconds`,
 * which the relay itself enables while rows stay pending and disables once the outbox is empty.
 * An idle pipeline therefore touches the database once per safety sweep.
 *
 * Scheduled EventBridge rules rather than EventBridge Scheduler: LocalStack runs scheduled rules
 * but only stores Scheduler schedules.
 */
export class OutboxRelay extends Construct {
  public readonly function: PipelineFunction;
  /** The safety sweep. */
  public readonly schedule: Rule;
  /** The busy sweep: created disabled, toggled by the relay (absent when the safety sweep is as frequent). */
  public readonly busySweep: Rule | undefined;

  constructor(scope: Construct, id: string, props: OutboxRelayProps) {
    super(scope, id);
    const busyEvery = Duration.seconds(props.relay.busySweepSeconds);
    const busyRuleName =
      props.sweep.toSeconds() > busyEvery.toSeconds() ? `${props.namePrefix}-relay-busy-sweep` : undefined;
    this.function = new PipelineFunction(this, 'Function', {
      entry: 'functions/outbox-relay/handler.ts',
      serviceName: relayServiceName,
      description: 'Publishes committed outbox events to the pipeline bus',
      environment: {
        ...props.database.environment,
        EVENT_BUS_NAME: props.eventBus.eventBusName,
        ...(busyRuleName ? { RELAY_BUSY_SWEEP_RULE: busyRuleName } : {}),
      },
      memorySize: 256,
      timeout: Duration.seconds(props.relay.timeoutSeconds),
      reservedConcurrentExecutions: props.reservedConcurrency,
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    props.database.grant(this.function);
    props.eventBus.grantPutEventsTo(this.function);

    // A run that failed (a crash, a timeout, a database that would not resume) is retried by
    // Lambda after about one and two minutes: with an hour between safety sweeps, a lost nudge
    // run must not wait for the next one.
    this.function.configureAsyncInvoke({ retryAttempts: 2, maxEventAge: Duration.minutes(10) });

    const target = () => new LambdaFunction(this.function, { retryAttempts: 2 });
    this.schedule = new Rule(this, 'Schedule', {
      description: 'Safety sweep of the outbox relay: delivers what a lost nudge left behind',
      schedule: Schedule.rate(props.sweep),
      targets: [target()],
    });
    if (busyRuleName) {
      this.busySweep = new Rule(this, 'BusySweep', {
        ruleName: busyRuleName,
        description: 'Busy sweep of the outbox relay: enabled by the relay while rows stay pending',
        schedule: Schedule.rate(busyEvery),
        enabled: false,
        targets: [target()],
      });
      // The ARN is built from the name, not read from the rule: the rule targets the function,
      // so a reference back from the function's policy would be a dependency cycle.
      this.function.addToRolePolicy(
        new PolicyStatement({
          actions: ['events:EnableRule', 'events:DisableRule'],
          resources: [
            Stack.of(this).formatArn({
              service: 'events',
              resource: 'rule',
              resourceName: busyRuleName,
              arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
            }),
          ],
        }),
      );
    }

    const why =
      'The relay carries no payload worth keeping (a sweep tick or a nudge): a failed run is retried by Lambda and redone by the next sweep, and failures are alarmed through the Errors metric, the oldest-pending-age and the relay-silent alarms.';
    Validations.of(this.function).acknowledge(
      { id: 'Serverless-LambdaAsyncFailureDestination', reason: why },
      { id: 'Serverless-LambdaDLQ', reason: why },
    );
    for (const rule of [this.schedule, this.busySweep]) {
      if (rule) Validations.of(rule).acknowledge({ id: 'Serverless-EventBusDLQ', reason: why });
    }
  }
}
