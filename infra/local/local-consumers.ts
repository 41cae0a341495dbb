import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
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
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import type { InboxStore } from '../../shared/inbox/inbox-store';
import type { EffectCounts } from '../../shared/ops/ops-ports';
import { type ConsumerName, consumerNames, topology } from '../../shared/topology';
import { type LocalDynamo, startDynalite, startDynamoDbLocal } from './dynamo';
import { type FaultInjector, InjectedFaultError } from './faults';
import type { BusEvent } from './local-bus';
import { ProcessedCounts } from './processed-counts';

const tables = { inboxTable: 'content-pipeline-inbox', indexTable: 'content-pipeline-index' };
/** Every store over the local inbox (the consumers' and the ops API's) shards its index alike. */
const inboxOptions = { openIndexShards: topology.inbox.localOpenIndexShards };
/** The local runtime's own counters (not a table of the AWS stack): see ProcessedCounts. */
const countsTable = 'content-pipeline-local-counts';
/** Local consumer invocations time out like a short Lambda, which also bounds inbox leases after a crash. */
const invocationTimeoutMs = 10_000;

/** The consumer side of the local runtime, as the bus and the ops API use it. */
export interface LocalConsumers {
  readonly dynamo: LocalDynamo;
  /** The consumers' inbox table, for the ops API (the same table every consumer writes). */
  readonly inbox: InboxStore;
  invoke(consumer: ConsumerName, event: BusEvent): Promise<unknown>;
  effectCounts(): Promise<EffectCounts>;
  /** Events `consumer` has processed: a maintained counter (ProcessedCounts), never a listing. */
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
  const dynamo =
    options.engine === 'dynamodb-local'
      ? await startDynamoDbLocal(join(dataDir, 'dynamodb-local'))
      : await startDynalite(join(dataDir, 'dynamo'));
  const client = new DynamoDBClient({
    endpoint: dynamo.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  let processed: ProcessedCounts;
  try {
    await ensureTables(client, tables, inboxOptions);
    processed = await ProcessedCounts.open(client, countsTable);
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
  const functions = {} as Record<ConsumerName, ConsumerFunction>;
  for (const name of consumerNames) {
    functions[name] = createConsumer({
      ...consumerDeps(name, tables, client, inboxOptions),
      logger: localLogger(name, log),
      metrics: quietMetrics,
      effect: withFaults(effects[name], faults, () => afterFaults[name]++),
    });
  }

  const countFiles = async (dir: string): Promise<number> => {
    const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
    return entries.filter((e) => e.isFile() && !e.name.endsWith('.tmp')).length;
  };

  const inbox = new DynamoInboxStore(client, { ...inboxOptions, tableName: tables.inboxTable });

  return {
    dynamo,
    inbox,
    async invoke(consumer, event) {
      const result = await functions[consumer](
        event as unknown as EventBridgeEvent<string, unknown>,
        localLambdaContext(consumerServiceName(consumer), invocationTimeoutMs),
      );
      if (result.status === 'processed') {
        // The record is PROCESSED whatever happens here: a failed count must not fail the
        // delivery (its retry would find the record done and count nothing either).
        await processed
          .add(consumer)
          .catch((err: unknown) =>
            log(`${consumer}: a processed event was not counted`, { level: 'warn', error: String(err) }),
          );
      }
      return result;
    },
    async effectCounts() {
      let indexDocuments = 0;
      let startKey: Record<string, unknown> | undefined;
      do {
        const page = await client.send(
          new ScanCommand({
            TableName: tables.indexTable,
            Select: 'COUNT',
            FilterExpression: '#s = :approved',
            ExpressionAttributeNames: { '#s': 'status' },
            ExpressionAttributeValues: { ':approved': { S: 'approved' } },
            ExclusiveStartKey: startKey as never,
          }),
        );
        indexDocuments += page.Count ?? 0;
        startKey = page.LastEvaluatedKey;
      } while (startKey);
      const text = await readFile(join(effectsDir, 'notifications.jsonl'), 'utf8').catch(() => '');
      const ids: string[] = [];
      for (const line of text.split('\n')) {
        try {
          if (line.trim()) ids.push((JSON.parse(line) as { eventId: string }).eventId);
        } catch {
          // a torn last line
        }
      }
      return {
        indexDocuments,
        notificationsSent: ids.length,
        distinctNotifiedEvents: new Set(ids).size,
        archivedObjects: await countFiles(join(effectsDir, 'archive')),
      };
    },
    processedCount: (consumer) => processed.read(consumer),
    injectedAfterFaults: (consumer) => afterFaults[consumer],
    async stop() {
      client.destroy();
      await dynamo.stop();
    },
  };
}
