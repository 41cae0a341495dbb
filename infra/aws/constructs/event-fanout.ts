import { Duration } from 'aws-cdk-lib';
import {
  Archive,
  type CfnArchive,
  CfnEventBusPolicy,
  EventBus,
  type EventPattern,
  type IEventBus,
  Rule,
} from 'aws-cdk-lib/aws-events';
import { SqsQueue } from 'aws-cdk-lib/aws-events-targets';
import { AnyPrincipal, Effect, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import {
  type ConsumerName,
  type ConsumerPolicy,
  consumerPolicyOf,
  type RulePattern,
  type RuleSpec,
} from '../../../shared/topology';
import { DeadLetterQueue } from './dead-letter-queue';

export interface EventFanoutProps {
  /** The bus's physical name (stage-qualified, so stages deploy side by side); unused with `existingBus`. */
  readonly busName: string;
  /**
   * A bus of the user's to put the archive, the rules and the resource policy on, instead of
   * creating one. It must be in this stack's account and Region (rules live beside their bus).
   * @default a bus of its own, named `busName`
   */
  readonly existingBus?: IEventBus;
  /** Gives a topology rule its physical name (stage-qualified); the alarms use the same. */
  readonly ruleName: (rule: string) => string;
  /** The pipeline's event source: the archive keeps every event from it. */
  readonly source: string;
  readonly rules: readonly RuleSpec[];
  readonly consumers: Readonly<Record<ConsumerName, ConsumerPolicy>>;
  /** The consumers' queues the rules target (each consumer's function reads its own). */
  readonly targets: Readonly<Record<ConsumerName, IQueue>>;
  /**
   * How long the archive keeps events for replay: the topology's `archiveRetentionDays`, which
   * the inbox retention is derived from (a replay must find its events' records still there).
   */
  readonly archiveRetention: Duration;
}

/**
 * One rule target: which consumer, and the queue that catches deliveries EventBridge gave up on
 * (one per consumer, shared by its rules).
 */
export interface FanoutTarget {
  readonly rule: string;
  readonly consumer: ConsumerName;
  readonly deadLetterQueue: DeadLetterQueue;
}

// EventBridge pattern keys as the topology writes them, and as CDK's EventPattern names them.
const patternKeys: Readonly<Record<string, keyof EventPattern>> = {
  version: 'version',
  id: 'id',
  'detail-type': 'detailType',
  source: 'source',
  account: 'account',
  time: 'time',
  region: 'region',
  resources: 'resources',
  detail: 'detail',
};

/** Converts a topology pattern (EventBridge JSON) to CDK's camel-cased EventPattern, rejecting unknown keys. */
export function toCdkPattern(pattern: RulePattern): EventPattern {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(pattern)) {
    const cdkKey = patternKeys[key];
    if (!cdkKey) throw new Error(`event pattern key "${key}" is not an EventBridge envelope field`);
    out[cdkKey] = value;
  }
  return out as EventPattern;
}

/**
 * The custom bus (or the user's, `existingBus`), its archive and the topology's rules. Each rule
 * target is a consumer's queue, with the consumer's retry policy (`targetRetry`) and the
 * consumer's encrypted dead-letter queue (one per consumer, whichever rule could not deliver):
 * those cover only deliveries the queue did not take (a throttle, a missing queue or
 * permission); what the consumer's function fails on stays in its queue (see `Consumer`).
 */
export class EventFanout extends Construct {
  public readonly bus: IEventBus;
  public readonly archive: Archive;
  /** The bus this construct created, to take a resource policy statement directly; none with `existingBus`. */
  private readonly ownBus: EventBus | undefined;
  public readonly rules: ReadonlyMap<string, Rule>;
  public readonly targets: readonly FanoutTarget[];

  constructor(scope: Construct, id: string, props: EventFanoutProps) {
    super(scope, id);
    if (props.existingBus) {
      this.ownBus = undefined;
      this.bus = props.existingBus;
    } else {
      this.ownBus = new EventBus(this, 'Bus', {
        eventBusName: props.busName,
        description: 'Content pipeline events (CloudEvents in detail)',
      });
      this.bus = this.ownBus;
    }
    const archiveProps = {
      description: 'Every pipeline event, for replay',
      eventPattern: { source: [props.source] },
      retention: props.archiveRetention,
    };
    // `bus.archive()` puts the archive under the bus's construct: for a bus of the user's that is
    // wherever they imported it (another stack, even), so theirs gets an archive of our own.
    this.archive = this.ownBus
      ? this.ownBus.archive('Archive', archiveProps)
      : new Archive(this, 'Archive', { ...archiveProps, sourceEventBus: this.bus });
    // CDK writes `KmsKeyIdentifier: ""` when no key is given, which some Regions refuse
    // (https://github.com/aws/aws-cdk/issues/37847); absent, the archive uses an AWS owned key.
    (this.archive.node.defaultChild as CfnArchive).addPropertyDeletionOverride('KmsKeyIdentifier');

    const rules = new Map<string, Rule>();
    const targets: FanoutTarget[] = [];
    const deadLetterQueues = new Map<ConsumerName, DeadLetterQueue>();
    for (const spec of props.rules) {
      const rule = new Rule(this, `Rule-${spec.name}`, {
        eventBus: this.bus,
        ruleName: props.ruleName(spec.name),
        description: spec.description,
        eventPattern: toCdkPattern(spec.pattern),
      });
      for (const consumer of spec.targets) {
        const policy = consumerPolicyOf(props, consumer);
        const queue = props.targets[consumer];
        if (!queue) throw new Error(`rule ${spec.name} targets consumer "${consumer}", which has no queue`);
        // One queue per consumer, whichever of its rules could not deliver (each message names
        // its rule: the RULE_ARN attribute): a queue and its alarm per rule and consumer would
        // add $0.10 a month of idle cost for each rule a consumer gains. The queue keeps the id
        // of the consumer's first rule, so adding a rule replaces no queue a stack already has.
        const deadLetterQueue =
          deadLetterQueues.get(consumer) ??
          new DeadLetterQueue(this, `Dlq-${spec.name}-${consumer}`, {
            purpose: `events rules could not deliver to the ${consumer} consumer`,
            retention: Duration.seconds(policy.deadLetterRetentionSeconds),
          });
        deadLetterQueues.set(consumer, deadLetterQueue);
        rule.addTarget(
          new SqsQueue(queue, {
            deadLetterQueue,
            retryAttempts: policy.targetRetry.maximumRetryAttempts,
            maxEventAge: Duration.seconds(policy.targetRetry.maximumEventAgeSeconds),
          }),
        );
        targets.push({ rule: spec.name, consumer, deadLetterQueue });
      }
      rules.set(spec.name, rule);
    }
    this.rules = rules;
    this.targets = targets;
    this.source = props.source;
  }

  private readonly source: string;

  /**
   * Lets only `publisher`'s role put the pipeline's events on the bus: a resource policy that
   * denies `events:PutEvents` of any event whose source is the pipeline's family (`content.*`)
   * to every other principal, so no one else in the account (whatever their IAM policies say)
   * can forge an approval our consumers would act on. An explicit Deny wins over any Allow.
   * `events:source` is PutEvents' condition key for each entry's Source, `aws:PrincipalArn` the
   * role's ARN for its sessions:
   * https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-conditions.html,
   * https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principalarn
   */
  acceptPipelineEventsOnlyFrom(publisher: IFunction): void {
    const role = publisher.role;
    if (!role) throw new Error('the publisher has no role to name in the bus policy');
    const statement = new PolicyStatement({
      sid: 'OnlyTheRelayPublishesPipelineEvents',
      effect: Effect.DENY,
      principals: [new AnyPrincipal()],
      actions: ['events:PutEvents'],
      resources: [this.bus.eventBusArn],
      conditions: {
        StringLike: { 'events:source': [pipelineSourceFamily(this.source)] },
        ArnNotEquals: { 'aws:PrincipalArn': role.roleArn },
      },
    });
    if (this.ownBus) {
      this.ownBus.addToResourcePolicy(statement);
      return;
    }
    // An imported bus's addToResourcePolicy only warns; an AWS::Events::EventBusPolicy adds one
    // statement to any bus's policy by name, leaving its other statements as they are
    // (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-events-eventbuspolicy.html).
    const statementId = `cdk-${statement.sid}`;
    new CfnEventBusPolicy(this, 'OnlyTheRelayPublishesPipelineEvents', {
      eventBusName: this.bus.eventBusName,
      statementId,
      statement: { ...statement.toStatementJson(), Sid: statementId },
    });
  }
}

/** `content.pipeline` -> `content.*`: every source of the pipeline's family, ours and any later one. */
export function pipelineSourceFamily(source: string): string {
  return `${source.split('.')[0]}.*`;
}
