import { Duration, type IResource, RemovalPolicy, Stack, Token, Validations } from 'aws-cdk-lib';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import type { IEventBus } from 'aws-cdk-lib/aws-events';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import {
  consumerDimension,
  consumerServiceName,
  deliveryAuditServiceName,
  inboxGaugesServiceName,
} from '../../shared/consumers/contract';
import { type ConsumerDefinition, queuePolicyProblems } from '../../shared/consumers/define-consumer';
import { resourceConstructId } from '../../shared/consumers/resources';
import { PipelineError } from '../../shared/errors';
import { inboxGaugeAlarmIds } from '../../shared/inbox/inbox-gauges';
import { inboxHealthThresholds, inboxSettingsFor } from '../../shared/inbox/settings';
import { consumerQueueRule } from '../../shared/ops/adapters/aws/sqs-dead-letters';
import { alarmIds } from '../../shared/ops/alarm-ids';
import { opsApiRoutes } from '../../shared/ops/ops-api';
import { relayServiceName } from '../../shared/outbox/relay-metrics';
import { tasksApiRoutes } from '../../shared/tasks/tasks-api';
import { type ConsumerName, consumerPolicyOf, type Topology } from '../../shared/topology';
import { quotas } from './capacity/quotas';
import { warmWritesFor, writeUnitsPerApproval } from './capacity/warm-throughput';
import { ApiAccess } from './constructs/api-access';
import { Consumer, type ConsumerEffectResources } from './constructs/consumer';
import {
  type ConsumerResource,
  type ConsumerResourceProps,
  consumerResource,
} from './constructs/consumer-resources';
import { AuroraDatabase, type PipelineDatabase, UrlDatabase } from './constructs/database';
import { DeliveryAudit } from './constructs/delivery-audit';
import { EventFanout } from './constructs/event-fanout';
import { InboxGauges } from './constructs/inbox-gauges';
import { InboxTable } from './constructs/inbox-table';
import { OpsApi, type OpsQueue } from './constructs/ops-api';
import { OutboxRelay } from './constructs/outbox-relay';
import { alarmName, PipelineAlarms, type WatchedQueue } from './constructs/pipeline-alarms';
import { PipelineDashboard } from './constructs/pipeline-dashboard';
import { sqlAdapterContextKey } from './constructs/pipeline-function';
import { SchemaMigration } from './constructs/schema-migration';
import { TasksApi } from './constructs/tasks-api';
import { priceBook } from './cost/prices';
import {
  type DeployTarget,
  type PipelineSettings,
  resolveSettings,
  resourcePrefix,
  type Stage,
} from './settings';

/** A consumer's queue's DLQ as its alarm names it (`queue-not-empty-<consumer>-dead-letters`). */
export const consumerDeadLettersQueueName = (consumer: string): string => `${consumer}-dead-letters`;

/**
 * The content pipeline's props: its settings (each also a context key of the app,
 * `settingSpecs` in ./settings.ts, where each is described) and what a user may bring of their
 * own. Checked when the construct is built: a bad value throws a PipelineError CONFIG naming
 * every bad prop.
 */
export interface ContentPipelineProps {
  /**
   * Whether data survives a `cdk destroy` (prod: tables, bucket and logs kept, the database as a
   * final snapshot, deletion protection on), how long logs and backups are kept, the other
   * settings' defaults, and the prefix of every physical name (`content-pipeline-<stage>`).
   * @default sandbox
   */
  readonly stage?: Stage;
  /**
   * `aws`: Aurora Serverless v2 through the Data API; `localstack`: the PostgreSQL at `databaseUrl`.
   * @default aws
   */
  readonly target?: DeployTarget;
  /**
   * Subscribed by email to the alarm topic (the owner confirms the subscription).
   * @default none
   */
  readonly alarmEmail?: string;
  /**
   * LocalStack only: the PostgreSQL the functions reach.
   * @default postgres://pipeline:pipeline@postgres:5432/pipeline
   */
  readonly databaseUrl?: string;
  /**
   * Aurora Serverless v2 minimum capacity in ACUs; 0 lets the cluster auto-pause.
   * @default sandbox 0, prod 0.5
   */
  readonly dbMinCapacity?: number;
  /**
   * Aurora Serverless v2 maximum capacity in ACUs; at least `dbMinCapacity`.
   * @default sandbox 2, prod 128
   */
  readonly dbMaxCapacity?: number;
  /**
   * Whether the Aurora cluster has a Serverless v2 reader in a second Availability Zone (promotion
   * tier 1, scaling with the writer) that Aurora promotes on a failover.
   * @default sandbox false, prod true
   */
  readonly dbReader?: boolean;
  /**
   * The tasks API's reserved concurrency (1-10,000); none leaves it unreserved, which a new
   * account's concurrency quota needs.
   * @default sandbox none, prod 400
   */
  readonly tasksApiReservedConcurrency?: number | 'none';
  /**
   * The relay's reserved concurrency (1-100); none leaves it unreserved, which a new account's
   * concurrency quota needs.
   * @default sandbox none, prod 10
   */
  readonly relayReservedConcurrency?: number | 'none';
  /**
   * The approval rate the inbox table and its index (and any declared table that needs it) are
   * pre-warmed for, as the capacity model sizes their warm throughput; none pre-warms nothing.
   * @default sandbox none, prod 1000
   */
  readonly prewarmApprovalsPerSecond?: number | 'none';
  /**
   * The relay's safety sweep period in minutes (the delivery audit runs with it).
   * @default sandbox 60, prod 1
   */
  readonly relaySweepMinutes?: number;
  /**
   * Whether to add a CloudWatch dashboard.
   * @default sandbox false, prod true
   */
  readonly dashboard?: boolean;
  /**
   * Requests a second each tasks route takes before API Gateway answers 429, burst twice that.
   * @default sandbox 100, prod 15000
   */
  readonly apiRatePerSecond?: number;
  /**
   * Requests a second each ops route takes, burst twice that.
   * @default 20
   */
  readonly opsRatePerSecond?: number;
  /**
   * Change it after putting new values in the database roles' secrets: the deploy then resets
   * the roles' passwords.
   * @default 1
   */
  readonly roleCredentialsVersion?: string;
  /**
   * The pipeline to realize: its rules, consumers, relay, inbox and alarm figures. The project's
   * is `functions/topology.ts` (the app passes it); a test may pass a variant.
   */
  readonly topology: Topology;
  /**
   * A bus of your own to carry the pipeline's events. The pipeline puts its archive (events of
   * its source), its rules and one resource policy statement on it: a Deny of `events:PutEvents`
   * of any `content.*` event to every principal but the relay's role. It must be a custom bus in
   * this stack's account and Region (rules live beside their bus; checked where both are known).
   * @default a bus of its own, `content-pipeline-<stage>`
   */
  readonly existingEventBus?: IEventBus;
  /**
   * A DynamoDB table of your own for the consumers' inbox records. It must have partition key
   * `pk` (string) and no sort key, a global secondary index `open-records` with partition key
   * `openKey` and sort key `openSince` (strings), time to live on `expiresAt`, and encryption
   * with a key DynamoDB holds (the pipeline's grants name no KMS key). Checked when the table
   * is defined in this app (a PipelineError names what differs); an imported table is taken on
   * trust. Its removal policy and deletion protection are yours.
   * @default a table of its own, kept in prod
   */
  readonly existingInboxTable?: ITable;
  /**
   * An SNS topic of your own for every alarm and OK notification. Its access policy must let
   * `cloudwatch.amazonaws.com` publish to it, and its KMS key (if any) let CloudWatch use it:
   * the pipeline cannot change either on a topic it does not own.
   * @default a topic of its own, encrypted with a key of its own and open to this stack's alarms only
   */
  readonly existingAlarmTopic?: ITopic;
}

/**
 * The content pipeline on AWS, the topology realized: database (Aurora Serverless v2 with the
 * Data API, or a PostgreSQL URL on LocalStack), schema migration on deploy, the tasks API, the
 * outbox relay, the bus with its rules, one function per consumer, their stores, alarms and a
 * dashboard. One per stack (alarm names start with the stack's name) and per account, Region and
 * stage (physical names start with `content-pipeline-<stage>`). It adds no outputs of its own
 * (API Gateway adds its `Endpoint`): the stack that holds it chooses what to export
 * (`PipelineStack` exports what the ops CLI reads).
 */
export class ContentPipeline extends Construct {
  public readonly database: PipelineDatabase;
  public readonly migration: SchemaMigration;
  public readonly relay: OutboxRelay;
  public readonly tasksApi: TasksApi;
  public readonly opsApi: OpsApi;
  /** The reviewer's and the operator's managed policies: who may call which routes. */
  public readonly access: ApiAccess;
  public readonly inboxGauges: InboxGauges;
  public readonly audit: DeliveryAudit;
  public readonly fanout: EventFanout;
  public readonly consumers: ReadonlyMap<ConsumerName, Consumer>;
  public readonly inbox: InboxTable;
  /**
   * The tables, topics and buckets each consumer declares, by consumer and then resource key
   * (`consumerResources.get(name)?.get(key)`); a database resource is a login to `database`.
   */
  public readonly consumerResources: ReadonlyMap<string, ReadonlyMap<string, ConsumerResource>>;
  public readonly alarms: PipelineAlarms;
  public readonly dashboard: PipelineDashboard | undefined;
  /** The physical name of a topology rule in this stack. */
  public readonly ruleName: (rule: string) => string;
  /** The settings the pipeline was built with, defaults filled in. */
  public readonly settings: PipelineSettings;

  constructor(scope: Construct, id: string, props: ContentPipelineProps) {
    super(scope, id);
    const settings = resolveSettings(props, 'ContentPipeline props');
    this.settings = settings;
    const stack = Stack.of(this);
    for (const [prop, resource] of [
      ['existingEventBus', props.existingEventBus],
      ['existingInboxTable', props.existingInboxTable],
      ['existingAlarmTopic', props.existingAlarmTopic],
    ] as const) {
      if (resource) assertBeside(stack, prop, resource);
    }
    // Before any function exists: on AWS every bundle is built for the Data API only.
    if (settings.target === 'aws') this.node.setContext(sqlAdapterContextKey, 'data-api');
    const { topology } = props;
    const prod = settings.stage === 'prod';
    const removalPolicy = prod ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    const logRetention = prod ? RetentionDays.THREE_MONTHS : RetentionDays.TWO_WEEKS;
    const common = { logRetention, removalPolicy };
    const names = resourcePrefix(settings);
    this.ruleName = (rule) => `${names}-${rule}`;

    const aurora =
      settings.target === 'aws'
        ? new AuroraDatabase(this, 'Database', {
            minCapacity: settings.dbMinCapacity,
            maxCapacity: settings.dbMaxCapacity,
            retain: prod,
            backupRetention: Duration.days(prod ? 14 : 1),
            logRetention,
            reader: settings.dbReader,
          })
        : undefined;
    this.database = aurora ?? new UrlDatabase(settings.databaseUrl);

    this.migration = new SchemaMigration(this, 'Schema', {
      database: this.database.owner,
      credentialsVersion: settings.roleCredentialsVersion,
      dependsOn: aurora?.cluster,
      ...common,
    });

    // Warm throughput for the rate asked, from the capacity model's write units per approval.
    const warmWrites =
      settings.prewarmApprovalsPerSecond === undefined
        ? undefined
        : warmWritesFor(
            settings.prewarmApprovalsPerSecond,
            writeUnitsPerApproval(topology, priceBook),
            quotas,
          );
    this.inbox = new InboxTable(this, 'Inbox', {
      removalPolicy,
      deletionProtection: prod,
      existingTable: props.existingInboxTable,
      warmWrites: warmWrites?.inbox,
    });
    this.consumerResources = this.makeConsumerResources(
      topology.registry,
      { removalPolicy, retain: prod, logRetention },
      warmWrites?.declared ?? {},
    );

    const { consumerNames } = topology;
    const registered = topology.registry.map((c) => c.name);
    if ([...registered].sort().join() !== [...consumerNames].sort().join()) {
      throw new PipelineError(
        'CONFIG',
        `the topology's consumers (${consumerNames.join(', ')}) are not its registry's (${registered.join(', ')})`,
      );
    }
    // A topology variant's policies are checked as defineConsumer checks a declaration's.
    for (const name of consumerNames) {
      const problems = queuePolicyProblems(consumerPolicyOf(topology, name));
      if (problems.length > 0) throw new Error(`consumer ${name}: ${problems.join('; ')}`);
    }
    const consumers = new Map<ConsumerName, Consumer>();
    for (const definition of topology.registry) {
      const name = definition.name as ConsumerName;
      consumers.set(
        name,
        new Consumer(this, `Consumer-${name}`, {
          definition,
          policy: consumerPolicyOf(topology, name),
          inboxSettings: {
            ...inboxSettingsFor(topology, name),
            openIndexShards: topology.inbox.openIndexShards,
          },
          inbox: this.inbox,
          effect: this.effectResources(definition),
          ...common,
        }),
      );
    }
    this.consumers = consumers;
    const consumerOf = (name: ConsumerName) => {
      const consumer = consumers.get(name);
      if (!consumer) throw new Error(`rule targets consumer "${name}", which the topology does not define`);
      return consumer;
    };
    const consumerQueues = Object.fromEntries(consumerNames.map((n) => [n, consumerOf(n).queue])) as Record<
      ConsumerName,
      Consumer['queue']
    >;

    this.fanout = new EventFanout(this, 'Fanout', {
      busName: `${topology.busName}-${settings.stage}`,
      existingBus: props.existingEventBus,
      ruleName: this.ruleName,
      source: topology.source,
      rules: topology.rules,
      consumers: topology.consumers,
      targets: consumerQueues,
      archiveRetention: Duration.days(topology.archiveRetentionDays),
    });

    const relaySweep = Duration.minutes(settings.relaySweepMinutes);
    this.relay = new OutboxRelay(this, 'Relay', {
      database: this.database.access('relay'),
      eventBus: this.fanout.bus,
      relay: topology.relay,
      sweep: relaySweep,
      reservedConcurrency: settings.relayReservedConcurrency,
      namePrefix: names,
      ...common,
    });
    this.fanout.acceptPipelineEventsOnlyFrom(this.relay.function);
    // The relay must not run before the schema exists: not from a sweep, nor from a wake-up (a
    // fresh stack's wake queue is empty, but nothing should depend on that).
    this.relay.schedule.node.addDependency(this.migration.resource);
    this.relay.wakeMapping.node.addDependency(this.migration.resource);
    // A consumer that reads the database (archive) must not be handed an event before the schema
    // exists; none is handed one before its mapping exists, so every mapping waits for it.
    for (const consumer of consumers.values()) consumer.mapping.node.addDependency(this.migration.resource);
    this.migration.runAfterMigrating(this.relay.function);

    this.tasksApi = new TasksApi(this, 'TasksApi', {
      database: this.database.access('tasksApi'),
      apiName: names,
      relayFunction: this.relay.function,
      reservedConcurrency: settings.tasksApiReservedConcurrency,
      tasksRatePerSecond: settings.apiRatePerSecond,
      defaultRatePerSecond: settings.opsRatePerSecond,
      ...common,
    });

    const opsQueues: OpsQueue[] = [
      // One per consumer (its rules share it): listed under the consumer's first rule.
      ...this.fanout.targets
        .filter((t, i, all) => all.findIndex((o) => o.deadLetterQueue === t.deadLetterQueue) === i)
        .map((t) => ({ queue: t.deadLetterQueue, consumer: t.consumer, rule: t.rule })),
      // Each consumer's queue's: what its function could never handle.
      ...[...consumers.values()].map((c) => ({
        queue: c.deadLetters,
        consumer: c.name,
        rule: consumerQueueRule,
      })),
    ];
    const queues: WatchedQueue[] = opsQueues.map((q) => ({
      name:
        q.rule === consumerQueueRule
          ? consumerDeadLettersQueueName(q.consumer)
          : `dlq-${q.rule}-${q.consumer}`,
      queue: q.queue,
    }));
    const alarmPrefix = alarmName(stack.stackName, '');
    this.inboxGauges = new InboxGauges(this, 'InboxGauges', {
      inbox: this.inbox,
      alarmNames: Object.fromEntries(inboxGaugeAlarmIds().map((id) => [id, alarmName(stack.stackName, id)])),
      period: Duration.seconds(topology.alarms.gaugePeriodSeconds),
      ...common,
    });

    // On the relay's sweep schedule: one wake of an idle Aurora per period for both.
    this.audit = new DeliveryAudit(this, 'DeliveryAudit', {
      database: this.database.access('audit'),
      inbox: this.inbox,
      consumerQueues,
      audit: topology.audit,
      schedule: this.relay.schedule,
      alarmNames: { [alarmIds.undelivered]: alarmName(stack.stackName, alarmIds.undelivered) },
      ...common,
    });

    const rules = [...this.fanout.rules.keys()].map((name) => ({ name, physicalName: this.ruleName(name) }));
    this.alarms = new PipelineAlarms(this, 'Alarms', {
      thresholds: topology.alarms,
      dimensions: {
        relay: { service: relayServiceName },
        consumer: (name) => ({ service: consumerServiceName(name), [consumerDimension]: name }),
        inboxGauge: (name) => ({
          service: inboxGaugesServiceName,
          ...(name === undefined ? {} : { [consumerDimension]: name }),
        }),
        audit: (name) => ({
          service: deliveryAuditServiceName,
          ...(name === undefined ? {} : { [consumerDimension]: name }),
        }),
      },
      relayFunction: this.relay.function,
      gaugesFunction: this.inboxGauges.function,
      inboxThresholds: inboxHealthThresholds(topology),
      auditFunction: this.audit.function,
      relaySweep,
      queues,
      email: settings.alarmEmail,
      removalPolicy,
      existingTopic: props.existingAlarmTopic,
    });
    // Created once the first relay run (at the end of the migration) has reported.
    this.alarms.relaySilent.node.addDependency(this.migration.resource);
    this.opsApi = new OpsApi(this, 'OpsApi', {
      api: this.tasksApi,
      database: this.database.access('ops'),
      inbox: this.inbox,
      queues: opsQueues,
      consumerQueues,
      consumerNames: topology.consumerNames,
      relayFunction: this.relay.function,
      alarmNames: this.alarms.all.map((a) => a.alarmName),
      alarmPrefix,
      ...common,
    });
    // Each consumer's queue takes its own rules' deliveries and the two redrives' (the ops API's
    // and the delivery audit's), nobody else's.
    const redrivers = [this.opsApi.function.role, this.audit.function.role].filter(
      (r): r is NonNullable<typeof r> => r !== undefined,
    );
    for (const consumer of consumers.values()) {
      const rulesOf = this.fanout.targets
        .filter((t) => t.consumer === consumer.name)
        .map((t) => this.fanout.rules.get(t.rule))
        .filter((r): r is NonNullable<typeof r> => r !== undefined);
      consumer.acceptOnlyFrom(rulesOf, redrivers);
    }
    this.access = new ApiAccess(this, 'ApiAccess', {
      api: this.tasksApi.api,
      reviewerRoutes: tasksApiRoutes,
      operatorRoutes: opsApiRoutes(topology.consumerNames),
      namePrefix: names,
    });
    this.dashboard = settings.dashboard
      ? new PipelineDashboard(this, 'Dashboard', {
          metrics: this.alarms.metrics,
          thresholds: topology.alarms,
          relayFunction: this.relay.function,
          consumers: [...consumers.values()].map((c) => ({ name: c.name, function: c.function })),
          queues,
          bus: this.fanout.bus,
          rules,
          api: this.tasksApi.api,
          alarms: this.alarms.all,
          inboxThresholds: inboxHealthThresholds(topology),
          auditFunction: this.audit.function,
        })
      : undefined;

    this.acknowledgeFunctionsAlike();
  }

  /**
   * Each table, topic and bucket the registry's consumers declare, as construct
   * `resourceConstructId(key)` of this pipeline (`contentIndex`: `ContentIndex`). Two
   * consumers cannot declare one key: each would be the other's resource.
   */
  private makeConsumerResources(
    registry: readonly ConsumerDefinition[],
    props: Omit<ConsumerResourceProps, 'key' | 'warmWrites'>,
    warmWrites: Readonly<Record<string, number | undefined>>,
  ): ReadonlyMap<string, ReadonlyMap<string, ConsumerResource>> {
    const declaredBy = new Map<string, string>();
    const made = new Map<string, ReadonlyMap<string, ConsumerResource>>();
    for (const consumer of registry) {
      const resources = new Map<string, ConsumerResource>();
      for (const [key, spec] of Object.entries(consumer.resources)) {
        if (spec.kind === 'database') continue;
        const other = declaredBy.get(key);
        if (other !== undefined) {
          throw new PipelineError(
            'CONFIG',
            `consumers ${other} and ${consumer.name} both declare a resource ${JSON.stringify(key)}: resource keys must differ`,
          );
        }
        declaredBy.set(key, consumer.name);
        resources.set(
          key,
          consumerResource(this, resourceConstructId(key), spec, {
            ...props,
            key,
            warmWrites: warmWrites[key],
          }),
        );
      }
      made.set(consumer.name, resources);
    }
    return made;
  }

  /**
   * What `consumer`'s function is told of its declared resources and may do with them: each
   * table's, topic's and bucket's variable and grant, and its database role's login.
   */
  private effectResources(consumer: ConsumerDefinition): ConsumerEffectResources {
    const parts = Object.entries(consumer.resources).map(([key, spec]) =>
      spec.kind === 'database'
        ? this.database.access(spec.role)
        : (this.consumerResources.get(consumer.name)?.get(key) as ConsumerResource),
    );
    return {
      environment: Object.assign({}, ...parts.map((p) => p.environment)),
      grant: (grantee) => {
        for (const part of parts) part.grant(grantee);
      },
    };
  }

  /** Findings that hold for every function of ours alike, acknowledged once with the reason. */
  private acknowledgeFunctionsAlike(): void {
    Validations.of(this).acknowledge(
      {
        id: 'AwsSolutions-L1',
        reason:
          'Functions target Node.js 22 on purpose (the runtime the code, Powertools and the tests are pinned to); moving to a newer runtime is a deliberate upgrade.',
      },
      {
        id: 'Serverless-LambdaLatestVersion',
        reason: 'Node.js 22 is the pinned runtime (see AwsSolutions-L1).',
      },
    );
  }
}

/**
 * Throws unless `resource` is in `stack`'s account and Region, where both are known at synth
 * time: rules, archives and alarm actions reach only a bus or topic beside them.
 */
function assertBeside(stack: Stack, prop: string, resource: IResource): void {
  for (const part of ['account', 'region'] as const) {
    const theirs = resource.env[part];
    const ours = stack[part];
    if (!Token.isUnresolved(theirs) && !Token.isUnresolved(ours) && theirs !== ours) {
      throw new PipelineError(
        'CONFIG',
        `invalid ContentPipeline props: ${prop}: is in ${part} ${theirs}, the pipeline's stack in ${ours}`,
      );
    }
  }
}
