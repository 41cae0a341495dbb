import { join } from 'node:path';
import { DynamoDBClient, paginateScan } from '@aws-sdk/client-dynamodb';
import type { EventBridgeEvent } from 'aws-lambda';
import { topology as projectTopology } from '../../functions/topology';
import type { EffectArrival } from '../../shared/audit/foreign-effects';
import { type ConsumerFunction, type ConsumerLogger, createConsumer } from '../../shared/consumers/consumer';
import { consumerDeps } from '../../shared/consumers/consumer-deps';
import { consumerServiceName } from '../../shared/consumers/contract';
import {
  type ConsumerDefinition,
  countersOf,
  type EffectFactory,
  type RegisteredCounter,
} from '../../shared/consumers/define-consumer';
import type { ConsumerEffect } from '../../shared/consumers/effect';
import { ensureTables } from '../../shared/consumers/ensure-tables';
import type { ResourceSpecs } from '../../shared/consumers/resources';
import type { FunctionRole } from '../../shared/db/roles';
import type { SqlClient } from '../../shared/db/sql-client';
import { localLambdaContext } from '../../shared/http/proxy-event';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import type { InboxOps, InboxPresence, InboxStuckRecords } from '../../shared/inbox/inbox-ops';
import type { InboxStore } from '../../shared/inbox/inbox-store';
import { inboxSettingsFor } from '../../shared/inbox/settings';
import type { ComponentState, EffectCounts, StatusComponent } from '../../shared/ops/ops-ports';
import type { ConsumerName, Topology } from '../../shared/topology';
import {
  checkLocalPlaces,
  countLocalResource,
  type LocalPort,
  localPort,
  localResourceTables,
  localTablePrefix,
} from './consumer-resources/local-ports';
import { type LocalDynamo, startDynalite, startDynamoDbLocal } from './dynamo';
import { type FaultInjector, InjectedFaultError } from './faults';
import { copyLegacyTable, legacyTables } from './legacy-tables';
import type { BusEvent } from './local-bus';
import { LocalCounters } from './local-counters';
import { type LocalAwsCredentials, localRegion } from './local-credentials';
import { repairOpenIndex } from './open-index-repair';
import { Supervisor } from './supervisor';

const inboxTable = `${localTablePrefix}inbox`;
/** The local runtime's own counters (not a table of the AWS stack): see LocalCounters. */
const countsTable = `${localTablePrefix}local-counts`;
/** Local consumer invocations time out like a short Lambda, which also bounds inbox leases after a crash. */
const invocationTimeoutMs = 10_000;

/** A local consumer invocation that ran past its timeout, as Lambda reports one. */
export class InvocationTimeoutError extends Error {
  override name = 'InvocationTimeoutError';
  constructor(consumer: string, timeoutMs: number) {
    super(`${consumer}: Task timed out after ${(timeoutMs / 1000).toFixed(2)} seconds`);
  }
}

/**
 * Ends an invocation at its timeout as Lambda does: the bus sees a failed attempt and retries it
 * with its backoff. A promise cannot be stopped, so the work itself is abandoned, not killed: if
 * it ever finishes, its inbox writes are fenced (the heartbeat stopped at the same deadline, so
 * a retry may own the record by then) and each effect is idempotent. Without this, an effect
 * that hung (a connection that never answered) held its delivery in flight for good: no retry,
 * the record PROCESSING until a restart.
 * https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html
 */
export async function withInvocationTimeout<T>(
  work: Promise<T>,
  consumer: string,
  timeoutMs: number = invocationTimeoutMs,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new InvocationTimeoutError(consumer, timeoutMs)), timeoutMs);
  });
  // An abandoned invocation that fails later has nobody to tell: its failure is the timeout's.
  work.catch(() => {});
  try {
    return await Promise.race([work, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/** The consumer side of the local runtime, as the bus and the ops API use it. */
export interface LocalConsumers {
  /** The DynamoDB engine as the consumers reach it: one endpoint, whichever engine is running now. */
  readonly dynamo: Pick<LocalDynamo, 'endpoint' | 'engine' | 'kill'>;
  /** Whether the DynamoDB engine serves, and if not, why and since when (its supervisor's word). */
  health(): ComponentState;
  /** The consumers' inbox table as operators read it, for the ops API and the delivery audit (the same table every consumer writes). */
  readonly inbox: InboxOps & InboxPresence & InboxStuckRecords;
  /** The same table through the consumers' port, for the ops API's one write there (a redrive whose re-send failed goes back DEAD). */
  readonly inboxStore: Pick<InboxStore, 'markDead'>;
  /** Runs one delivery through `consumer` (a name of the topology's registry), as Lambda would. */
  invoke(consumer: string, event: BusEvent): Promise<unknown>;
  /** Every declared counter by its name: maintained counters (LocalCounters), never a scan or a listing. */
  effectCounts(): Promise<EffectCounts>;
  /**
   * Every declared counter, counted where its resource lives (a scan of a table, a listing of a
   * bucket, a read of a topic's file). Its cost grows with history: for tests and for the
   * recount after an unclean stop, never for the status page.
   */
  countEffects(): Promise<EffectCounts>;
  /** Events `consumer` has processed: a maintained counter (LocalCounters), never a listing. */
  processedCount(consumer: string): Promise<number>;
  /** How many effectFailAfter faults struck `consumer` (effects that acted, then failed). */
  injectedAfterFaults(consumer: string): number;
  stop(): Promise<void>;
}

export interface LocalConsumersOptions {
  readonly dataDir: string;
  /**
   * The consumers to run, their policies and inbox settings: `topology.registry`.
   * @default the project's topology
   */
  readonly topology?: Topology;
  /** The database as each function role: a consumer's database resource logs in as its role. */
  readonly dbAs: (role: FunctionRole) => SqlClient;
  readonly engine: 'dynalite' | 'dynamodb-local';
  readonly faults: FaultInjector;
  readonly log: (message: string, extra?: Record<string, unknown>) => void;
  /** Called once with the DynamoDB client before its first call (the runtime's seam for SDK middleware). */
  readonly sdkClient?: (client: DynamoDBClient) => void;
  /**
   * Wraps each resource's port as the runtime made it, before the consumer's effect is built
   * over it (a benchmark's latency, a test's gate). Return `built` for the ports left alone.
   */
  readonly wrapPort?: (consumer: string, key: string, built: LocalPort) => LocalPort;
  /**
   * The last run stopped without a clean stop (a SIGKILL, a crash): counts it added after the
   * thing they count may be missing, so they are counted again from the stores before any
   * consumer runs. Also done when the counters are new (a data directory from before them).
   */
  readonly recount?: boolean;
  /** Awaited before each restart of a dead engine (see SupervisorOptions.beforeRestart). */
  readonly beforeRestart?: (component: StatusComponent, cause: string) => Promise<void>;
  /** Told once a dead engine serves again. */
  readonly onRecovered?: (component: StatusComponent) => void;
  /**
   * Each consumer invocation's timeout, as a Lambda function's (10 s), or a function read at
   * each invocation: a test shortens it for the attempt it is about, then lengthens it for
   * the ones after, whose time is the machine's.
   */
  readonly invocationTimeoutMs?: number | (() => number);
  /** Epoch ms of the inbox's leases, backoffs and ages (the runtime's clock); `Date.now` by default. */
  readonly clock?: () => number;
  /**
   * The data directory's key pair: the consumers' DynamoDB client signs with it, and dynalite
   * refuses any request not signed with it (DynamoDB Local verifies no signature: see
   * docs/local-runtime.md). Without: a fixed dummy pair and an engine that takes any (tests).
   */
  readonly credentials?: LocalAwsCredentials;
  /**
   * Told of every event a consumer processed (its effect ran), as the record completes: what the
   * delivery audit checks against the outbox (infra/local/foreign-effects.ts). After an unclean
   * stop (`recount`), the notes the last run had not had checked are gone: every PROCESSED record
   * first received since `recountSince` (epoch ms) is told again.
   */
  readonly arrivals?: { readonly note: (arrival: EffectArrival) => void; readonly recountSince: number };
}

/** A declared counter's item in the counters table (`effects#<name>`, as before counters were declared). */
const effectCounter = (name: string) => `effects#${name}`;
const processedCounter = (consumer: string) => `processed#${consumer}`;

/**
 * Wraps an effect with the local fault injection: before (throw without acting) or after
 * (act, then throw, as a crash before the inbox records completion would). Only the local
 * runtime wraps effects this way; the handler code is the same as on AWS.
 */
function withFaults(effect: ConsumerEffect, faults: FaultInjector, onAfter: () => void): ConsumerEffect {
  if (!faults.active) return effect;
  return async (event, ctx) => {
    if (faults.strikes('effectFailBefore')) throw new InjectedFaultError('injected fault: effectFailBefore');
    const result = await effect(event, ctx);
    if (faults.strikes('effectFailAfter')) {
      onAfter();
      throw new InjectedFaultError('injected fault: effectFailAfter (the effect acted)');
    }
    return result;
  };
}

const mentionsInjectedFault = (extra: unknown[]) =>
  extra.some((x) =>
    JSON.stringify(x, (_k, v) => (v instanceof Error ? { name: v.name } : v))?.includes('InjectedFaultError'),
  );

/**
 * Consumer logs for the console: warnings and errors through the runtime's log, except the
 * ones an injected fault caused on purpose (they would drown everything else).
 */
function localLogger(consumer: string, log: LocalConsumersOptions['log']): ConsumerLogger {
  const emit =
    (level: string) =>
    (message: string, ...extra: unknown[]) => {
      if (mentionsInjectedFault(extra)) return;
      log(`${consumer}: ${message}`, {
        level,
        ...Object.assign({}, ...extra.filter((x) => typeof x === 'object')),
      });
    };
  return { info: () => undefined, warn: emit('warn'), error: emit('error') };
}

/** Metrics stay in memory locally (the figures are on /ops/status); Powertools would flood stdout with EMF. */
const quietMetrics = { addMetric: () => undefined, setDefaultDimensions: () => undefined } as never;

/** A consumer's effect factory: the `effect` its folder's `effect.ts` exports. */
async function loadEffect(consumer: ConsumerDefinition): Promise<EffectFactory<ResourceSpecs>> {
  const url = new URL('effect.ts', consumer.folder);
  const module = (await import(url.href)) as { readonly effect?: unknown };
  if (typeof module.effect !== 'function')
    throw new Error(
      `consumer ${consumer.name}: ${url.pathname} exports no effect (\`export const effect = defineEffect(...)\`)`,
    );
  return module.effect as EffectFactory<ResourceSpecs>;
}

/**
 * Starts the DynamoDB engine (data under `<dataDir>/dynamo`), creates the inbox and every table
 * resource, and builds each consumer of the topology's registry with the same factory the
 * Lambda handlers use: its folder's effect over the local stand-ins of the resources it
 * declares (`consumer-resources/local-ports.ts`: tables on the local DynamoDB, topics and
 * buckets under `<dataDir>/effects/`, the database as the resource's role).
 */
export async function startLocalConsumers(options: LocalConsumersOptions): Promise<LocalConsumers> {
  const { dataDir, faults, log } = options;
  const topology = options.topology ?? projectTopology;
  const { registry } = topology;
  const names = registry.map((c) => c.name);
  checkLocalPlaces(registry, [inboxTable, countsTable]);
  // Every store over the local inbox (the consumers' and the ops API's) shards its index alike.
  const inboxOptions = { openIndexShards: topology.inbox.localOpenIndexShards };
  // Before the engine starts: a plug-in that cannot load fails the start with nothing to undo.
  const effects = await Promise.all(registry.map(loadEffect));
  const timeoutOption = options.invocationTimeoutMs ?? invocationTimeoutMs;
  const timeoutOf = typeof timeoutOption === 'function' ? timeoutOption : () => timeoutOption;
  const startEngine = (port?: number) =>
    options.engine === 'dynamodb-local'
      ? startDynamoDbLocal(join(dataDir, 'dynamodb-local'), { port })
      : startDynalite(join(dataDir, 'dynamo'), { port, credentials: options.credentials });
  const first = await startEngine();
  if (options.engine === 'dynamodb-local' && options.credentials) {
    // It cannot do better: see docs/local-runtime.md, "Only the owner".
    log(
      `DynamoDB Local checks no signature and listens on port ${new URL(first.endpoint).port} of every interface: any local user (or host that can reach this one) can read and change the inbox; dynalite, the default, takes only this data directory's credentials`,
      { level: 'warn' },
    );
  }
  const port = Number(new URL(first.endpoint).port);
  // A dead engine is started again on the same port and data, so the client below (and every
  // record it wrote) is where it was; what failed meanwhile is retried by the bus.
  const supervisor = new Supervisor(first, {
    component: 'dynamo',
    restart: () => startEngine(port),
    log,
    beforeRestart: options.beforeRestart,
    onRecovered: options.onRecovered,
  });
  const dynamo = {
    endpoint: first.endpoint,
    engine: first.engine,
    kill: () => supervisor.current.kill(),
    stop: () => supervisor.stop(),
  };
  const client = new DynamoDBClient({
    endpoint: dynamo.endpoint,
    region: localRegion,
    // A copy: the SDK notes where credentials came from on the object it is given.
    credentials: { ...(options.credentials ?? { accessKeyId: 'local', secretAccessKey: 'local' }) },
  });
  const resourceTables = localResourceTables(registry);
  let counters: LocalCounters;
  try {
    await ensureTables(client, { inboxTable, resourceTables }, inboxOptions);
    counters = await LocalCounters.open(client, countsTable);
    const inUse = [inboxTable, countsTable, ...resourceTables.map((t) => t.tableName)];
    for (const legacy of legacyTables(registry, inUse)) {
      const copied = await copyLegacyTable(client, legacy, counters);
      if (copied !== undefined)
        log(`${legacy.consumer}: its table from an older version copied to its table resource`, {
          from: legacy.from,
          to: legacy.to,
          items: copied,
        });
    }
    options.sdkClient?.(client);
  } catch (err) {
    client.destroy();
    await dynamo.stop();
    throw err;
  }
  const hosts = { client, effectsDir: join(dataDir, 'effects'), dbAs: options.dbAs };
  const counted = countersOf(registry);
  const afterFaults = new Map(names.map((name) => [name, 0]));
  const count = (name: string, delta: number, what: string) =>
    counters
      .add(name, delta)
      .catch((err: unknown) => log(`${what} was not counted`, { level: 'warn', error: String(err) }));
  // Each of the consumer's counters moves by what its result adds, counted as soon as the
  // effect acted (before a fault that strikes after it): it did act.
  const counting = (consumer: ConsumerDefinition, effect: ConsumerEffect): ConsumerEffect => {
    const own = counted.filter((c) => c.consumer === consumer);
    return async (event, ctx) => {
      const result = await effect(event, ctx);
      for (const counter of own)
        await count(effectCounter(counter.name), counter.spec.delta(result), `${consumer.name}: an effect`);
      return result;
    };
  };
  const functions = new Map<string, ConsumerFunction>();
  for (const [i, consumer] of registry.entries()) {
    const ports = Object.fromEntries(
      Object.entries(consumer.resources).map(([key, spec]) => {
        const built = localPort(key, spec, hosts);
        return [key, (options.wrapPort?.(consumer.name, key, built) ?? built).port];
      }),
    );
    const effect = (effects[i] as EffectFactory<ResourceSpecs>)(ports);
    // A name of the topology's registry, which a test's variant may extend past the project's.
    const name = consumer.name as ConsumerName;
    functions.set(
      consumer.name,
      createConsumer({
        ...consumerDeps(
          name,
          { inboxTable },
          client,
          inboxOptions,
          inboxSettingsFor(topology, name),
          topology,
        ),
        ...(options.clock ? { clock: options.clock } : {}),
        logger: localLogger(consumer.name, log),
        metrics: quietMetrics,
        effect: withFaults(counting(consumer, effect), faults, () =>
          afterFaults.set(consumer.name, (afterFaults.get(consumer.name) ?? 0) + 1),
        ),
      }),
    );
  }

  const inbox = new DynamoInboxOps(client, { ...inboxOptions, tableName: inboxTable });
  const inboxStore = new DynamoInboxStore(client, { ...inboxOptions, tableName: inboxTable });

  const countEffects = async (): Promise<EffectCounts> => {
    const values = await Promise.all(counted.map((c) => countCounter(c, hosts)));
    return Object.fromEntries(counted.map((c, i) => [c.name, values[i] ?? 0]));
  };

  /**
   * PROCESSED records per consumer, by a scan of the inbox: only for the recount. Those first
   * received since `options.arrivals.recountSince` are told to the audit again on the way.
   */
  const countProcessed = async (): Promise<Map<string, number>> => {
    const out = new Map(names.map((name) => [name, 0]));
    const pages = paginateScan(
      { client },
      {
        TableName: inboxTable,
        FilterExpression: '#state.#status = :processed',
        ProjectionExpression: '#consumer, #eventId, #state.#receivedAt',
        ExpressionAttributeNames: {
          '#state': 'state',
          '#status': 'status',
          '#consumer': 'consumer',
          '#eventId': 'eventId',
          '#receivedAt': 'receivedAt',
        },
        ExpressionAttributeValues: { ':processed': { S: 'PROCESSED' } },
      },
    );
    const arrivals = options.arrivals;
    for await (const page of pages) {
      for (const item of page.Items ?? []) {
        const consumer = item.consumer?.S;
        const n = consumer === undefined ? undefined : out.get(consumer);
        if (consumer === undefined || n === undefined) continue;
        out.set(consumer, n + 1);
        const eventId = item.eventId?.S;
        const receivedAt = Number(item.state?.M?.receivedAt?.N);
        if (arrivals && eventId !== undefined && receivedAt >= arrivals.recountSince) {
          arrivals.note({ consumer: consumer as ConsumerName, eventId });
        }
      }
    }
    return out;
  };

  /** Counts the stores once and sets every counter to what they hold (no consumer runs yet). */
  const recount = async () => {
    const started = Date.now();
    const [effectsNow, read, processedNow] = await Promise.all([
      countEffects(),
      counters.read([...counted.map((c) => effectCounter(c.name)), ...names.map(processedCounter)]),
      countProcessed(),
    ]);
    for (const { name } of counted)
      await counters.add(effectCounter(name), (effectsNow[name] ?? 0) - (read[effectCounter(name)] ?? 0));
    for (const name of names)
      await counters.add(
        processedCounter(name),
        (processedNow.get(name) ?? 0) - (read[processedCounter(name)] ?? 0),
      );
    log(
      `counters recounted from the stores (${options.recount ? 'the last run did not stop cleanly' : 'new counters'})`,
      {
        ms: Date.now() - started,
      },
    );
  };
  if (options.recount || counters.created) {
    try {
      const repaired = await repairOpenIndex(client, inboxTable, inboxOptions.openIndexShards, names);
      if (repaired > 0)
        log('inbox index entries without their record dropped (the last run was killed)', { repaired });
      await recount();
    } catch (err) {
      client.destroy();
      await dynamo.stop();
      throw err;
    }
  }

  return {
    dynamo,
    health: () => supervisor.state,
    inbox,
    inboxStore,
    invoke(consumer, event) {
      const run = functions.get(consumer);
      if (run === undefined)
        return Promise.reject(
          new Error(`no consumer ${consumer} here; the registry has ${names.join(', ')}`),
        );
      const timeoutMs = timeoutOf();
      const invocation = run(
        event as unknown as EventBridgeEvent<string, unknown>,
        localLambdaContext(consumerServiceName(consumer), timeoutMs),
      ).then(async (result) => {
        // Counted with the invocation's own work, so one that ran past its timeout and
        // finished later still counts the record it completed (its retry finds the record
        // done and counts nothing). The record is PROCESSED whatever happens here: a failed
        // count must not fail the delivery.
        if (result.status === 'processed') {
          options.arrivals?.note({ consumer: consumer as ConsumerName, eventId: result.eventId });
          await count(processedCounter(consumer), 1, `${consumer}: a processed event`);
        }
        return result;
      });
      return withInvocationTimeout(invocation, consumer, timeoutMs);
    },
    async effectCounts() {
      const read = await counters.read(counted.map((c) => effectCounter(c.name)));
      return Object.fromEntries(counted.map((c) => [c.name, read[effectCounter(c.name)] ?? 0]));
    },
    countEffects,
    processedCount: async (consumer) =>
      (await counters.read([processedCounter(consumer)]))[processedCounter(consumer)] ?? 0,
    injectedAfterFaults: (consumer) => afterFaults.get(consumer) ?? 0,
    async stop() {
      client.destroy();
      await dynamo.stop();
    },
  };
}

/** What a counter's resource holds, counted where it lives (see countLocalResource). */
function countCounter(
  { consumer, spec }: RegisteredCounter,
  hosts: Parameters<typeof countLocalResource>[3],
): Promise<number> {
  const key = spec.counts.resource;
  const resource = consumer.resources[key];
  if (resource === undefined) throw new Error(`${consumer.name} counts ${key}, which it does not declare`);
  return countLocalResource(key, resource, spec.counts.where ?? {}, hosts);
}
