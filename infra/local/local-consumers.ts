import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { DynamoDBClient, paginateScan } from '@aws-sdk/client-dynamodb';
import type { EventBridgeEvent } from 'aws-lambda';
import { type ConsumerFunction, type ConsumerLogger, createConsumer } from '../../shared/consumers/consumer';
import { consumerDeps } from '../../shared/consumers/consumer-deps';
import { consumerServiceName } from '../../shared/consumers/contract';
import { ensureTables } from '../../shared/consumers/ensure-tables';
import type { SqlClient } from '../../shared/db/sql-client';
import { archiveEffect, FileSnapshotArchive, type SnapshotArchive } from '../../shared/effects/archive';
import { DynamoContentIndex, indexEffect } from '../../shared/effects/content-index';
import type { ConsumerEffect } from '../../shared/effects/effect';
import { FileNotifier, type Notifier, notifyEffect } from '../../shared/effects/notify';
import { localLambdaContext } from '../../shared/http/proxy-event';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import type { InboxOps, InboxPresence } from '../../shared/inbox/inbox-ops';
import type { InboxStore } from '../../shared/inbox/inbox-store';
import type { ComponentState, EffectCounts, StatusComponent } from '../../shared/ops/ops-ports';
import { type ConsumerName, consumerNames, topology } from '../../shared/topology';
import { type LocalDynamo, startDynalite, startDynamoDbLocal } from './dynamo';
import { type FaultInjector, InjectedFaultError } from './faults';
import type { BusEvent } from './local-bus';
import { LocalCounters } from './local-counters';
import { repairOpenIndex } from './open-index-repair';
import { Supervisor } from './supervisor';

const tables = { inboxTable: 'content-pipeline-inbox', indexTable: 'content-pipeline-index' };
/** Every store over the local inbox (the consumers' and the ops API's) shards its index alike. */
const inboxOptions = { openIndexShards: topology.inbox.localOpenIndexShards };
/** The local runtime's own counters (not a table of the AWS stack): see LocalCounters. */
const countsTable = 'content-pipeline-local-counts';
/** Local consumer invocations time out like a short Lambda, which also bounds inbox leases after a crash. */
const invocationTimeoutMs = 10_000;

/** A local consumer invocation that ran past its timeout, as Lambda reports one. */
export class InvocationTimeoutError extends Error {
  override name = 'InvocationTimeoutError';
  constructor(consumer: ConsumerName, timeoutMs: number) {
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
  consumer: ConsumerName,
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
  readonly inbox: InboxOps & InboxPresence;
  /** The same table through the consumers' port, for the ops API's one write there (a redrive whose re-send failed goes back DEAD). */
  readonly inboxStore: Pick<InboxStore, 'markDead'>;
  invoke(consumer: ConsumerName, event: BusEvent): Promise<unknown>;
  /** What the effects did: maintained counters (LocalCounters), never a scan or a listing. */
  effectCounts(): Promise<EffectCounts>;
  /**
   * What the effects did, counted where they live: a scan of the index, a listing of the archive,
   * a read of the notifications file. Its cost grows with history: for tests and for the recount
   * after an unclean stop, never for the status page.
   */
  countEffects(): Promise<EffectCounts>;
  /** Events `consumer` has processed: a maintained counter (LocalCounters), never a listing. */
  processedCount(consumer: ConsumerName): Promise<number>;
  /** How many effectFailAfter faults struck `consumer` (effects that acted, then failed). */
  injectedAfterFaults(consumer: ConsumerName): number;
  stop(): Promise<void>;
}

export interface LocalConsumersOptions {
  readonly dataDir: string;
  readonly db: SqlClient;
  readonly engine: 'dynalite' | 'dynamodb-local';
  readonly faults: FaultInjector;
  readonly log: (message: string, extra?: Record<string, unknown>) => void;
  /** Called once with the DynamoDB client before its first call (the runtime's seam for SDK middleware). */
  readonly sdkClient?: (client: DynamoDBClient) => void;
  /** Wraps the archive's stand-in for S3. */
  readonly archive?: (archive: SnapshotArchive) => SnapshotArchive;
  /** Wraps notify's stand-in for SNS. */
  readonly notifier?: (notifier: Notifier) => Notifier;
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
}

/** The counters of what the effects did: their names, and what one effect result adds to each. */
const effectCounters = {
  indexDocuments: 'effects#indexDocuments',
  notificationsSent: 'effects#notificationsSent',
  archivedObjects: 'effects#archivedObjects',
} as const satisfies Record<keyof EffectCounts, string>;
const processedCounter = (consumer: ConsumerName) => `processed#${consumer}`;

/**
 * What one effect's result changes in the counters: an approved entry written where none was
 * approved adds an index document, a withdrawal written over an approved one takes one away; a
 * notification sent (not a duplicate the channel refused) and an archive object written (not
 * one that existed) add one. Stale writes and duplicates change nothing.
 */
function countedDeltas(
  consumer: ConsumerName,
  result: Readonly<Record<string, unknown>>,
): [string, number][] {
  switch (consumer) {
    case 'index':
      if (result.outcome !== 'applied') return [];
      if (result.status === 'approved' && result.replaced !== 'approved')
        return [[effectCounters.indexDocuments, 1]];
      if (result.status === 'withdrawn' && result.replaced === 'approved')
        return [[effectCounters.indexDocuments, -1]];
      return [];
    case 'notify':
      return result.outcome === 'sent' ? [[effectCounters.notificationsSent, 1]] : [];
    case 'archive':
      return result.outcome === 'written' ? [[effectCounters.archivedObjects, 1]] : [];
  }
}

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
function localLogger(consumer: ConsumerName, log: LocalConsumersOptions['log']): ConsumerLogger {
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

const wrap = <T>(wrapper: ((inner: T) => T) | undefined, inner: T): T => wrapper?.(inner) ?? inner;

/** Metrics stay in memory locally (the figures are on /ops/status); Powertools would flood stdout with EMF. */
const quietMetrics = { addMetric: () => undefined, setDefaultDimensions: () => undefined } as never;

/**
 * Starts the DynamoDB engine (data under `<dataDir>/dynamo`), creates the tables, and builds
 * the three consumers with the same factory the Lambda handlers use, over the local adapters
 * (`<dataDir>/effects/archive/…`, `<dataDir>/effects/notifications.jsonl`).
 */
export async function startLocalConsumers(options: LocalConsumersOptions): Promise<LocalConsumers> {
  const { dataDir, faults, log } = options;
  const timeoutOption = options.invocationTimeoutMs ?? invocationTimeoutMs;
  const timeoutOf = typeof timeoutOption === 'function' ? timeoutOption : () => timeoutOption;
  const startEngine = (port?: number) =>
    options.engine === 'dynamodb-local'
      ? startDynamoDbLocal(join(dataDir, 'dynamodb-local'), { port })
      : startDynalite(join(dataDir, 'dynamo'), { port });
  const first = await startEngine();
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
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  let counters: LocalCounters;
  try {
    await ensureTables(client, tables, inboxOptions);
    counters = await LocalCounters.open(client, countsTable);
    options.sdkClient?.(client);
  } catch (err) {
    client.destroy();
    await dynamo.stop();
    throw err;
  }
  const effectsDir = join(dataDir, 'effects');
  // The effects with their local adapters: the index on the local DynamoDB, archive and notify
  // in files (the handlers use S3 and SNS; the effect code is the same).
  const effects: Record<ConsumerName, ConsumerEffect> = {
    index: indexEffect(new DynamoContentIndex(client, tables.indexTable)),
    notify: notifyEffect(wrap(options.notifier, new FileNotifier(effectsDir))),
    archive: archiveEffect({
      archive: wrap(options.archive, new FileSnapshotArchive(effectsDir)),
      db: options.db,
    }),
  };
  const afterFaults: Record<ConsumerName, number> = { index: 0, notify: 0, archive: 0 };
  const count = (name: string, delta: number, what: string) =>
    counters
      .add(name, delta)
      .catch((err: unknown) => log(`${what} was not counted`, { level: 'warn', error: String(err) }));
  // Counted as soon as the effect acted (before a fault that strikes after it): it did act.
  const counting =
    (consumer: ConsumerName, effect: ConsumerEffect): ConsumerEffect =>
    async (event, ctx) => {
      const result = await effect(event, ctx);
      for (const [name, delta] of countedDeltas(consumer, result))
        await count(name, delta, `${consumer}: an effect`);
      return result;
    };
  const functions = {} as Record<ConsumerName, ConsumerFunction>;
  for (const name of consumerNames) {
    functions[name] = createConsumer({
      ...consumerDeps(name, tables, client, inboxOptions),
      logger: localLogger(name, log),
      metrics: quietMetrics,
      effect: withFaults(counting(name, effects[name]), faults, () => afterFaults[name]++),
    });
  }

  const countFiles = async (dir: string): Promise<number> => {
    const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
    return entries.filter((e) => e.isFile() && !e.name.endsWith('.tmp')).length;
  };

  const inbox = new DynamoInboxOps(client, { ...inboxOptions, tableName: tables.inboxTable });
  const inboxStore = new DynamoInboxStore(client, { ...inboxOptions, tableName: tables.inboxTable });

  const countEffects = async (): Promise<EffectCounts> => {
    let indexDocuments = 0;
    const pages = paginateScan(
      { client },
      {
        TableName: tables.indexTable,
        Select: 'COUNT',
        FilterExpression: '#s = :approved',
        ExpressionAttributeNames: { '#s': 'status' },
        ExpressionAttributeValues: { ':approved': { S: 'approved' } },
      },
    );
    for await (const page of pages) indexDocuments += page.Count ?? 0;
    const sent = await new FileNotifier(effectsDir).read();
    return {
      indexDocuments,
      notificationsSent: sent.length,
      archivedObjects: await countFiles(join(effectsDir, 'archive')),
    };
  };

  /** PROCESSED records per consumer, by a scan of the inbox: only for the recount. */
  const countProcessed = async (): Promise<Record<ConsumerName, number>> => {
    const out = Object.fromEntries(consumerNames.map((c) => [c, 0])) as Record<ConsumerName, number>;
    const pages = paginateScan(
      { client },
      {
        TableName: tables.inboxTable,
        FilterExpression: '#state.#status = :processed',
        ProjectionExpression: '#consumer',
        ExpressionAttributeNames: { '#state': 'state', '#status': 'status', '#consumer': 'consumer' },
        ExpressionAttributeValues: { ':processed': { S: 'PROCESSED' } },
      },
    );
    for await (const page of pages) {
      for (const item of page.Items ?? []) {
        const consumer = item.consumer?.S as ConsumerName | undefined;
        if (consumer !== undefined && consumer in out) out[consumer]++;
      }
    }
    return out;
  };

  /** Counts the stores once and sets every counter to what they hold (no consumer runs yet). */
  const recount = async () => {
    const started = Date.now();
    const [effectsNow, counted, processedNow] = await Promise.all([
      countEffects(),
      counters.read([...Object.values(effectCounters), ...consumerNames.map(processedCounter)]),
      countProcessed(),
    ]);
    for (const key of Object.keys(effectCounters) as (keyof EffectCounts)[]) {
      const name = effectCounters[key];
      await counters.add(name, effectsNow[key] - (counted[name] ?? 0));
    }
    for (const consumer of consumerNames) {
      const name = processedCounter(consumer);
      await counters.add(name, processedNow[consumer] - (counted[name] ?? 0));
    }
    log('counters recounted from the stores (the last run did not stop cleanly)', {
      ms: Date.now() - started,
    });
  };
  if (options.recount || counters.created) {
    try {
      const repaired = await repairOpenIndex(client, tables.inboxTable, inboxOptions.openIndexShards);
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
      const timeoutMs = timeoutOf();
      const invocation = functions[consumer](
        event as unknown as EventBridgeEvent<string, unknown>,
        localLambdaContext(consumerServiceName(consumer), timeoutMs),
      ).then(async (result) => {
        // Counted with the invocation's own work, so one that ran past its timeout and
        // finished later still counts the record it completed (its retry finds the record
        // done and counts nothing). The record is PROCESSED whatever happens here: a failed
        // count must not fail the delivery.
        if (result.status === 'processed')
          await count(processedCounter(consumer), 1, `${consumer}: a processed event`);
        return result;
      });
      return withInvocationTimeout(invocation, consumer, timeoutMs);
    },
    async effectCounts() {
      const read = await counters.read(Object.values(effectCounters));
      return {
        indexDocuments: read[effectCounters.indexDocuments],
        notificationsSent: read[effectCounters.notificationsSent],
        archivedObjects: read[effectCounters.archivedObjects],
      };
    },
    countEffects,
    processedCount: async (consumer) =>
      (await counters.read([processedCounter(consumer)]))[processedCounter(consumer)] ?? 0,
    injectedAfterFaults: (consumer) => afterFaults[consumer],
    async stop() {
      client.destroy();
      await dynamo.stop();
    },
  };
}
