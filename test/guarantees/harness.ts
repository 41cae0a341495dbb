import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { SNSClient } from '@aws-sdk/client-sns';
import type { EventBridgeEvent } from 'aws-lambda';
import { consumerNames, topology } from '../../functions/topology';
import { FileWriteOnceStore } from '../../infra/local/consumer-resources/file-write-once-store';
import { localTableName } from '../../infra/local/consumer-resources/local-ports';
import { FaultInjector, type FaultRates, noFaults } from '../../infra/local/faults';
import { type BusEvent, LocalBus, type TargetRetry } from '../../infra/local/local-bus';
import { SnsPublisher } from '../../shared/consumers/adapters/aws/sns-publisher';
import { type ConsumerFunction, type ConsumerResult, createConsumer } from '../../shared/consumers/consumer';
import { consumerDeps } from '../../shared/consumers/consumer-deps';
import { consumerServiceName } from '../../shared/consumers/contract';
import type { EffectFactory } from '../../shared/consumers/define-consumer';
import type { ConsumerEffect, EffectResult } from '../../shared/consumers/effect';
import { ensureTables } from '../../shared/consumers/ensure-tables';
import type { ResourceSpec, ResourceSpecs } from '../../shared/consumers/resources';
import { DataApiSqlClient } from '../../shared/db/data-api-client';
import { PgSqlClient } from '../../shared/db/pg-client';
import { allFunctionRoles, type FunctionRole } from '../../shared/db/roles';
import type { SqlClient } from '../../shared/db/sql-client';
import { localLambdaContext } from '../../shared/http/proxy-event';
import type { InboxStore } from '../../shared/inbox/inbox-store';
import { type InboxSettings, inboxSettingsFor } from '../../shared/inbox/settings';
import { EventBridgePublisher } from '../../shared/outbox/eventbridge-publisher';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import type { EventPublisher } from '../../shared/outbox/publisher';
import { type RelayDeps, type RelayRunSettings, runRelay } from '../../shared/outbox/relay';
import { approveTask, createTask, withdrawTask } from '../../shared/tasks/commands';
import type { ConsumerName } from '../../shared/topology';
import { CallRecorder } from '../support/aws/calls';
import { type SnsStandin, startSnsStandin } from '../support/aws/sns';
import { type DataApiServer, startDataApiServer } from '../support/data-api-server';
import { createTestDatabase, testLogin } from '../support/database';
import { dynamoClient, dynamoEngines } from '../support/dynamo';
import { RecordingLogger } from '../support/dynamo-consumer-fixtures';
import { testSettings } from '../support/outbox-fixtures';
import { tempDataDir } from '../support/pipeline-client';
import { reachedWithin } from '../support/wait-for';
import {
  checkRun,
  type DeliveryFact,
  type Explanations,
  type GuaranteeReport,
  type GuaranteeSources,
} from './invariants';
import { settleTimeoutMs } from './profile';

/**
 * The pipeline assembled from its real parts for a guarantee scenario: the tasks commands and the
 * relay on PostgreSQL (node-postgres, or the Data API through the Data API-compatible endpoint),
 * EventBridgePublisher to the local bus's PutEvents endpoint, the topology's rules, each consumer
 * of the registry built by `createConsumer` over a DynamoDB engine, its folder's effect over its
 * declared resources: tables in DynamoDB, buckets in files (FileWriteOnceStore), topics through
 * the real SNS client to the SNS stand-in (standard topics: they dedupe nothing, so a repeated
 * notification shows), the database as the resource's role.
 *
 * Only the clock is compressed: inbox leases and the bus's retry pauses are short, so a crash is
 * recovered from in seconds. Scenarios inject their faults through the hooks; every delivery and
 * every effect run is observed, so a scenario can prove its fault happened and the checker can
 * tell repeats the design allows from the rest.
 */

/** A database as createTestDatabase gives it: the owner URL and each function role's. */
export interface HarnessDatabase {
  readonly url: string;
  urlAs(role: FunctionRole): string;
  drop?(): Promise<void>;
}

/** Runs one delivery; an interposer may hold, reorder or repeat it before calling `invoke`. */
export type Interposer = (
  consumer: ConsumerName,
  event: BusEvent,
  invoke: (consumer: ConsumerName, event: BusEvent) => Promise<ConsumerResult>,
) => Promise<unknown>;

export interface HarnessOptions {
  /** The DynamoDB engine's endpoint; the harness makes its own tables there. */
  readonly dynamoEndpoint: string;
  /** A migrated database with the function roles' logins; a fresh test database by default. */
  readonly database?: HarnessDatabase;
  /** How the functions reach PostgreSQL: node-postgres (local, LocalStack) or the Data API (AWS). */
  readonly sql?: 'pg' | 'data-api';
  /** Faults of the local bus (busReject, busAckLoss, busDuplicate); none by default. */
  readonly busFaults?: Partial<FaultRates>;
  readonly faultSeed?: number;
  /** Invocations in flight per consumer; the bus's default (8) unless a scenario holds deliveries. */
  readonly busConcurrency?: number;
  /** Each consumer's own DynamoDB client (one per function, as on Lambda), for SDK-level faults. */
  readonly configureConsumerClient?: (consumer: ConsumerName, client: DynamoDBClient) => void;
  readonly wrapInbox?: (consumer: ConsumerName, inbox: InboxStore) => InboxStore;
  /** Wraps the effect outside the observation, so a fault before or after it is not counted as a run. */
  readonly wrapEffect?: (consumer: ConsumerName, effect: ConsumerEffect) => ConsumerEffect;
  readonly interpose?: Interposer;
  readonly inbox?: Partial<InboxSettings>;
}

/** What the harness saw happen, for a scenario's proof that its fault struck. */
export interface Observations {
  readonly deliveries: DeliveryFact[];
  /** Effect runs that returned, per consumer and event id. */
  readonly effectRuns: Map<string, number>;
  /** What each effect run returned, per consumer. */
  readonly effectResults: Record<ConsumerName, EffectResult[]>;
  /** Invocations that ran the effect and did not end `processed`, per consumer. */
  readonly actedWithoutCompleting: Record<ConsumerName, number>;
  /** Failed invocations per consumer, by error name and code when it has one (`InboxInProgressError/IN_PROGRESS`). */
  readonly invocationErrors: Record<ConsumerName, Map<string, number>>;
  /** Relay runs that threw, with their errors. */
  readonly relayErrors: unknown[];
}

export interface Harness {
  /** The schema owner's client (fixtures and checks; never under fault). */
  readonly db: PgSqlClient;
  /** Each function's own client, as the functions reach PostgreSQL. */
  readonly sql: Readonly<Record<FunctionRole, SqlClient>>;
  readonly dataApi?: DataApiServer;
  readonly bus: LocalBus;
  readonly sns: SnsStandin;
  readonly consumers: Readonly<Record<ConsumerName, ConsumerFunction>>;
  readonly loggers: Readonly<Record<ConsumerName, RecordingLogger>>;
  readonly tables: { readonly inboxTable: string; readonly indexTable: string };
  readonly observed: Observations;
  /** Creates and approves `n` tasks through the tasks commands; returns their ids. */
  approveTasks(n: number): Promise<string[]>;
  withdraw(taskId: string): Promise<void>;
  /** Relay dependencies with a fresh owner: the relay role's outbox, the bus's PutEvents. */
  relayDeps(overrides?: {
    readonly owner?: string;
    readonly settings?: Partial<RelayRunSettings>;
    readonly outbox?: (outbox: OutboxStore) => RelayDeps['outbox'];
    readonly publisher?: (publisher: EventPublisher) => EventPublisher;
  }): RelayDeps;
  /**
   * Runs relays (fresh owner each run, errors recorded) until nothing is pending in the outbox and
   * no delivery is in flight, or `timeoutMs` passes. Returns whether the pipeline went quiet.
   */
  settle(options?: {
    readonly timeoutMs?: number;
    /** Settings of the relays it runs (test-sized topology settings, lease 1 s). */
    readonly relay?: Partial<RelayRunSettings>;
    /** False: only wait (the scenario runs its own relays meanwhile). */
    readonly runRelays?: boolean;
    /** Return once the outbox is drained, deliveries still in flight or not (a scenario holding them). */
    readonly outboxOnly?: boolean;
  }): Promise<{ readonly quiet: boolean; readonly ms: number }>;
  sources(): GuaranteeSources;
  /** The invariant checker over this run, with the repeats the observations explain. */
  check(extra?: Explanations): Promise<GuaranteeReport>;
  stop(): Promise<void>;
}

/** Consumer leases short enough that a crashed attempt is taken over within seconds. */
const harnessInbox: Partial<InboxSettings> = { leaseMs: 1_500, leaseGraceMs: 500 };

/**
 * The bus's retries here stand for every way a delivery comes back (EventBridge's retries of the
 * target, the consumer's queue handing a failed message over again, a redrive): quick and many,
 * so the inbox's own leases and backoff set the pace and decide what is DEAD, not the harness.
 * Six hours, as the scenarios ran before: far beyond any of their outages.
 */
const harnessRetry: TargetRetry = {
  maxAttempts: 1_000,
  baseMs: 20,
  maxMs: 400,
  maxAgeMs: 6 * 3600 * 1_000,
};

// Metrics are not what the suite checks; Powertools would print EMF for every invocation.
const quietMetrics = { addMetric: () => undefined, setDefaultDimensions: () => undefined } as never;

const perConsumer = <T>(make: (c: ConsumerName) => T): Record<ConsumerName, T> =>
  Object.fromEntries(consumerNames.map((c) => [c, make(c)]));

/** `consumer`'s entry of a per-consumer record; a name the topology does not have is a test's mistake. */
export function at<T>(record: Readonly<Record<ConsumerName, T>>, consumer: ConsumerName): T {
  const value = record[consumer];
  if (value === undefined) throw new Error(`no consumer "${consumer}" in the topology`);
  return value;
}

/** Starts the pipeline's parts for one scenario. */
export async function startHarness(options: HarnessOptions): Promise<Harness> {
  const stack: (() => Promise<void> | void)[] = [];
  const stop = async () => {
    for (const step of stack.splice(0).reverse()) await Promise.resolve(step()).catch(() => undefined);
  };
  try {
    const database = options.database ?? (await createTestDatabase());
    if (!options.database) stack.push(() => database.drop?.());
    const db = new PgSqlClient({ connectionString: database.url, maxConnections: 4 });
    stack.push(() => db.close());

    let dataApi: DataApiServer | undefined;
    const sql = {} as Record<FunctionRole, SqlClient>;
    if (options.sql === 'data-api') {
      const server = await startDataApiServer(database.url);
      dataApi = server;
      stack.push(() => server.close());
      const client = new RDSDataClient({
        endpoint: server.endpoint,
        region: 'us-east-1',
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      });
      stack.push(() => client.destroy());
      for (const role of allFunctionRoles) {
        sql[role] = new DataApiSqlClient({
          client,
          resourceArn: server.resourceArn,
          secretArn: server.addSecret(testLogin(role)),
          database: server.database,
          retry: { attempts: 3, baseMs: 10, maxMs: 50 },
        });
      }
    } else {
      for (const role of allFunctionRoles) {
        const client = new PgSqlClient({ connectionString: database.urlAs(role), maxConnections: 4 });
        sql[role] = client;
        stack.push(() => client.close());
      }
    }

    const dir = tempDataDir('guarantees-');
    stack.push(() => rmSync(dir, { recursive: true, force: true }));
    const effectsDir = join(dir, 'effects');

    const suffix = randomUUID().slice(0, 8);
    // Each table resource of the registry by its key, on this run's names.
    const resourceTables = topology.registry.flatMap((c) =>
      Object.entries(c.resources).flatMap(([key, spec]) =>
        spec.kind === 'table'
          ? [{ key, tableName: `g-${localTableName(key)}-${suffix}`, partitionKey: spec.partitionKey }]
          : [],
      ),
    );
    const tableOf = (key: string) => resourceTables.find((t) => t.key === key)?.tableName as string;
    const tables = { inboxTable: `g-inbox-${suffix}`, indexTable: tableOf('contentIndex') };
    const admin = dynamoClient(options.dynamoEndpoint);
    stack.push(() => admin.destroy());
    await ensureTables(
      admin,
      { inboxTable: tables.inboxTable, resourceTables },
      { openIndexShards: topology.inbox.openIndexShards },
    );
    stack.push(async () => {
      for (const table of [tables.inboxTable, ...resourceTables.map((t) => t.tableName)])
        await admin.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined);
    });

    const topicArn = (key: string) => `arn:aws:sns:us-east-1:123456789012:guarantees-${key}-${suffix}`;
    const topicKeys = topology.registry.flatMap((c) =>
      Object.entries(c.resources).flatMap(([key, spec]) => (spec.kind === 'topic' ? [key] : [])),
    );
    const sns = await startSnsStandin({ recorder: new CallRecorder(), topics: topicKeys.map(topicArn) });
    stack.push(() => sns.close());
    const snsClient = new SNSClient({
      endpoint: sns.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'consumer-notify', secretAccessKey: 'local' },
    });
    stack.push(() => snsClient.destroy());

    const observed: Observations = {
      deliveries: [],
      effectRuns: new Map(),
      effectResults: perConsumer(() => []),
      actedWithoutCompleting: perConsumer(() => 0),
      invocationErrors: perConsumer(() => new Map()),
      relayErrors: [],
    };
    const invocation = new AsyncLocalStorage<{ acted: boolean }>();
    const observe =
      (consumer: ConsumerName, effect: ConsumerEffect): ConsumerEffect =>
      async (event, ctx) => {
        const result = await effect(event, ctx);
        const key = `${consumer}/${event.id}`;
        observed.effectRuns.set(key, (observed.effectRuns.get(key) ?? 0) + 1);
        at(observed.effectResults, consumer).push(result);
        const current = invocation.getStore();
        if (current) current.acted = true;
        return result;
      };

    const clients = perConsumer((consumer) => {
      const client = new DynamoDBClient({
        endpoint: options.dynamoEndpoint,
        region: 'us-east-1',
        // DynamoDB Local takes access key ids of letters and digits only.
        credentials: { accessKeyId: `consumer${consumer}`, secretAccessKey: 'local' },
      });
      options.configureConsumerClient?.(consumer, client);
      stack.push(() => client.destroy());
      return client;
    });
    const portOf = (consumer: ConsumerName, key: string, spec: ResourceSpec) => {
      switch (spec.kind) {
        case 'table':
          return { client: at(clients, consumer), tableName: tableOf(key) };
        case 'topic':
          return new SnsPublisher(snsClient, topicArn(key));
        case 'bucket':
          return new FileWriteOnceStore(join(effectsDir, key));
        case 'database':
          return sql[spec.role];
      }
    };
    const effects = {} as Record<ConsumerName, ConsumerEffect>;
    for (const consumer of topology.registry) {
      const name = consumer.name as ConsumerName;
      const { effect } = (await import(new URL('effect.ts', consumer.folder).href)) as {
        effect: EffectFactory<ResourceSpecs>;
      };
      effects[name] = effect(
        Object.fromEntries(
          Object.entries(consumer.resources).map(([key, spec]) => [key, portOf(name, key, spec)]),
        ),
      );
    }
    const loggers = perConsumer(() => new RecordingLogger());
    const consumers = perConsumer((consumer) => {
      const deps = consumerDeps(
        consumer,
        tables,
        at(clients, consumer),
        { openIndexShards: topology.inbox.openIndexShards },
        inboxSettingsFor(topology, consumer),
        topology,
      );
      const effect = observe(consumer, at(effects, consumer));
      return createConsumer({
        ...deps,
        inbox: options.wrapInbox ? options.wrapInbox(consumer, deps.inbox) : deps.inbox,
        logger: at(loggers, consumer),
        metrics: quietMetrics,
        settings: inboxSettingsFor(topology, consumer, { ...harnessInbox, ...options.inbox }),
        effect: options.wrapEffect ? options.wrapEffect(consumer, effect) : effect,
      });
    });

    /** One invocation as Lambda runs it, observed. */
    const invokeDirect = async (consumer: ConsumerName, event: BusEvent): Promise<ConsumerResult> => {
      observed.deliveries.push({ consumer, eventId: String(event.detail.id), busEventId: event.id });
      const state = { acted: false };
      try {
        const result = await invocation.run(state, () =>
          at(consumers, consumer)(
            event as unknown as EventBridgeEvent<string, unknown>,
            localLambdaContext(consumerServiceName(consumer), 30_000),
          ),
        );
        if (state.acted && result.status !== 'processed')
          observed.actedWithoutCompleting[consumer] = at(observed.actedWithoutCompleting, consumer) + 1;
        return result;
      } catch (err) {
        if (state.acted)
          observed.actedWithoutCompleting[consumer] = at(observed.actedWithoutCompleting, consumer) + 1;
        const e = err as { name?: unknown; code?: unknown } | null;
        const name = typeof e?.code === 'string' ? `${String(e?.name)}/${e.code}` : String(e?.name ?? err);
        const errors = at(observed.invocationErrors, consumer);
        errors.set(name, (errors.get(name) ?? 0) + 1);
        throw err;
      }
    };

    const bus = new LocalBus({
      busName: topology.busName,
      rules: topology.rules,
      dir: join(dir, 'bus'),
      maxRequestBytes: topology.relay.maxRequestBytes,
      faults: new FaultInjector({ ...noFaults, ...options.busFaults }, options.faultSeed ?? 1),
      concurrency: options.busConcurrency,
      retry: () => harnessRetry,
      invoke: (consumer, event) =>
        options.interpose ? options.interpose(consumer, event, invokeDirect) : invokeDirect(consumer, event),
    });
    await bus.start();
    stack.push(() => bus.stop(1_000));
    const eventBridge = new EventBridgeClient({
      endpoint: bus.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'outbox-relay', secretAccessKey: 'local' },
    });
    stack.push(() => eventBridge.destroy());
    const publisher = new EventBridgePublisher(eventBridge, {
      busName: topology.busName,
      source: topology.source,
      maxEntries: topology.relay.putEventsMaxEntries,
      maxRequestBytes: topology.relay.maxRequestBytes,
      concurrency: topology.relay.publishConcurrency,
    });

    const relayDeps: Harness['relayDeps'] = (overrides = {}) => {
      const outbox = new OutboxStore(sql.relay);
      return {
        outbox: overrides.outbox ? overrides.outbox(outbox) : outbox,
        publisher: overrides.publisher ? overrides.publisher(publisher) : publisher,
        owner: overrides.owner ?? `relay-${randomUUID()}`,
        settings: testSettings({ leaseSeconds: 1, ...overrides.settings }),
      };
    };

    const pendingRows = async () => {
      const { rows } = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM outbox WHERE status = 'pending'",
      );
      return rows[0]?.n ?? 0;
    };

    const settle: Harness['settle'] = async (settleOptions = {}) => {
      const started = Date.now();
      const timeoutMs = settleOptions.timeoutMs ?? settleTimeoutMs;
      const deadline = started + timeoutMs;
      const quiet = await reachedWithin(
        async () => {
          if (settleOptions.runRelays !== false) {
            const budgetEnd = Math.min(deadline, Date.now() + 3_000);
            await runRelay(relayDeps({ settings: settleOptions.relay }), {
              remainingMs: () => budgetEnd - Date.now(),
            }).catch((err: unknown) => {
              observed.relayErrors.push(err);
            });
          }
          // While a scenario has PostgreSQL down, the count fails: not quiet yet.
          return pendingRows().catch(() => -1);
        },
        (pending) => pending === 0 && (settleOptions.outboxOnly === true || bus.pendingDeliveries === 0),
        { timeoutMs, intervalMs: 50 },
      );
      return { quiet, ms: Date.now() - started };
    };

    const sources = (): GuaranteeSources => ({
      db,
      dynamo: { client: admin, ...tables },
      archiveRoot: join(effectsDir, 'archive'),
      notifications: async () =>
        sns.published
          .filter((m) => m.topicArn === topicArn('notifications'))
          .map((m) => m.messageAttributes.eventId?.StringValue ?? '(no eventId attribute)'),
      publishes: async () => {
        const byEvent = new Map<string, string[]>();
        for (const d of observed.deliveries) {
          const ids = byEvent.get(d.eventId) ?? [];
          if (!ids.includes(d.busEventId)) ids.push(d.busEventId);
          byEvent.set(d.eventId, ids);
        }
        return byEvent;
      },
      deliveries: () => observed.deliveries,
      busDeadLetters: () => bus.deadLetters().length,
    });

    return {
      db,
      sql,
      dataApi,
      bus,
      sns,
      consumers,
      loggers,
      tables,
      observed,
      async approveTasks(n) {
        const ids: string[] = [];
        for (let i = 0; i < n; i++) {
          const task = await createTask(
            { title: `guarantee ${i}`, assignee: `a${i % 5}` },
            { db: sql.tasksApi },
          );
          await approveTask({ taskId: task.taskId, approvedBy: 'rita' }, { db: sql.tasksApi });
          ids.push(task.taskId);
        }
        return ids;
      },
      async withdraw(taskId) {
        await withdrawTask({ taskId, withdrawnBy: 'wes', reason: 'outdated' }, { db: sql.tasksApi });
      },
      relayDeps,
      settle,
      sources,
      check: (extra = {}) =>
        checkRun(sources(), {
          notifyAttemptsThatActedWithoutCompleting:
            at(observed.actedWithoutCompleting, 'notify') +
            (extra.notifyAttemptsThatActedWithoutCompleting ?? 0),
        }),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Thrown where a scenario makes a process die: nothing after it runs, as after a SIGKILL. */
export class SimulatedCrashError extends Error {
  override readonly name = 'SimulatedCrashError';
}

/** `target` with some of its methods replaced: the rest still run on `target` itself. */
export function withOverrides<T extends object>(target: T, overrides: Partial<T>): T {
  return Object.assign(Object.create(target) as T, overrides);
}

/** The endpoint of one of the run's DynamoDB engines (global setup), or why it cannot run here. */
export function engineEndpoint(name: 'dynalite' | 'DynamoDB Local'): {
  endpoint?: string;
  skipReason?: string;
} {
  const engine = dynamoEngines().find((e) => e.name === name);
  return engine ?? { skipReason: `${name} is not among the run's engines` };
}
