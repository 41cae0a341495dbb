import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchGetCommand, QueryCommand, type QueryCommandOutput, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import pLimit, { type LimitFunction } from 'p-limit';
import { sleep } from '../db/retry';
import {
  DynamoInboxTable,
  type DynamoInboxTableOptions,
  decode,
  decodeCursor,
  encodeCursor,
  type InboxItem,
  inboxTableSchema,
  indexValues,
  itemKey,
  namesIn,
  type OpenStatus,
  openKeys,
  openSinceTime,
  openStatuses,
  recordKey,
  storeError,
} from './dynamo-inbox-table';
import { InboxNotDeadError, InboxRecordNotFoundError } from './errors';
import {
  type InboxOps,
  type InboxPage,
  type InboxPresence,
  type InboxStuckRecords,
  isStuck,
  type OpenFigure,
  type OpenFigures,
} from './inbox-ops';
import type { InboxKey, InboxRecord } from './inbox-store';

/** Options of the operator's adapter; the defaults suit the Lambda functions. */
export interface DynamoInboxOpsOptions extends DynamoInboxTableOptions {
  /** Records per Query page in the ops reads. */
  readonly pageSize?: number;
  /** Queries of the operator's index in flight at once, over all reads of this adapter. @default 16 */
  readonly openQueryConcurrency?: number;
}

/**
 * The inbox as operators read it, on DynamoDB: the figures and the dead lists from the
 * operator's index (Query), records and their presence from the table (GetItem, BatchGetItem),
 * and the redrive, one conditional UpdateItem. Over the table the consumers' `DynamoInboxStore`
 * writes, with the same shard count.
 */
export class DynamoInboxOps extends DynamoInboxTable implements InboxOps, InboxPresence, InboxStuckRecords {
  private readonly pageSize: number;
  private readonly openQueries: LimitFunction;

  constructor(client: DynamoDBClient, options: DynamoInboxOpsOptions) {
    super(client, options);
    this.pageSize = options.pageSize ?? 500;
    // The figures read every shard of every status (96 Queries a consumer on AWS), and the
    // gauges read three consumers at once. Unbounded, that is hundreds of requests on the SDK's
    // 50 sockets: after an idle spell each kept-alive socket the server has closed fails one
    // request (ECONNRESET, "socket hang up"), and the standard retry strategy's quota (500
    // tokens, 14 a transient retry: 35 retries) retries only the first 35, so the 36th
    // failed the whole read (the rehearsal's gauges, on a busy machine). Bounded, at most this
    // many sockets are ever opened for them, and each failure is retried.
    this.openQueries = pLimit(options.openQueryConcurrency ?? openQueryConcurrency);
  }

  async get(k: InboxKey): Promise<InboxRecord | undefined> {
    const item = await this.getItem('get', k);
    return item ? decode(item) : undefined;
  }

  /**
   * Per status and shard, in parallel: one Query with `Limit: 1` reads the shard's oldest entry
   * (the index sorts by the time each figure ages from), and only a shard that has more goes on
   * counting (`Select: COUNT`) from there, page by page. An empty shard costs one Query, as a
   * count alone would: the cost is the open records' number, never the history's.
   */
  async openFigures(consumer: string): Promise<OpenFigures> {
    const sortKey = inboxTableSchema.openIndex.sortKey;
    const shard = async (value: string): Promise<OpenFigure> => {
      const first = await this.queryOpen(consumer, value, { limit: 1 });
      const oldest = (first.Items?.[0] as InboxItem | undefined)?.[sortKey];
      let count = first.Items?.length ?? 0;
      let start = first.LastEvaluatedKey;
      while (start) {
        const page = await this.queryOpen(consumer, value, { start, count: true });
        count += page.Count ?? 0;
        start = page.LastEvaluatedKey;
      }
      return { count, oldestSince: oldest === undefined ? null : openSinceTime(oldest) };
    };
    const status = async (s: OpenStatus): Promise<OpenFigure> =>
      mergeFigures(await Promise.all(openKeys(consumer, s, this.shards).map(shard)));
    const [processing, failed, dead] = await Promise.all(openStatuses.map(status));
    return { PROCESSING: processing as OpenFigure, FAILED: failed as OpenFigure, DEAD: dead as OpenFigure };
  }

  /**
   * BatchGetItem of the keys, 100 a request and a few requests at once, eventually consistent
   * (half the read units of a consistent read; the audit looks at events delivered minutes
   * ago), projecting the key only. Keys left unprocessed are asked again.
   */
  async present(keys: readonly InboxKey[]): Promise<ReadonlySet<string>> {
    const wanted = [...new Set(keys.map(recordKey))];
    const found = new Set<string>();
    const batches: string[][] = [];
    for (let i = 0; i < wanted.length; i += batchGetLimit) batches.push(wanted.slice(i, i + batchGetLimit));
    let next = 0;
    const worker = async () => {
      while (next < batches.length) {
        const batch = batches[next++] as string[];
        const items = await this.batchGet(
          batch.map((pk) => ({ [inboxTableSchema.partitionKey]: pk })),
          { consistent: false, keysOnly: true },
        );
        for (const pk of items.keys()) found.add(pk);
      }
    };
    await Promise.all(Array.from({ length: Math.min(presenceConcurrency, batches.length) }, worker));
    return found;
  }

  /**
   * The DEAD records in the index's order (oldest death first), across every shard: each page
   * queries every shard for its next `limit` entries after the cursor, takes the `limit` first
   * of them all, and reads those records from the table (the index holds keys only). The cursor
   * is the last entry's sort key, which orders every record of the consumer: the next page
   * starts after it on every shard.
   */
  async listDead(consumer: string, page: { limit?: number; cursor?: string } = {}): Promise<InboxPage> {
    const limit = Math.max(1, page.limit ?? 50);
    const records: InboxRecord[] = [];
    let after = page.cursor === undefined ? undefined : decodeCursor(page.cursor, consumer);
    for (;;) {
      const { entries, more } = await this.firstDead(consumer, limit - records.length, after);
      if (entries.length === 0) return { records };
      const found = await this.getMany(entries.map((e) => e.key));
      for (const entry of entries) {
        const item = found.get(entry.key[inboxTableSchema.partitionKey]);
        // The index is eventually consistent: a record redriven a moment ago may still be listed.
        if (item?.state?.status === 'DEAD') records.push(decode(item));
      }
      after = entries.at(-1)?.since ?? after;
      if (!more) return { records };
      if (records.length >= limit) return { records, cursor: encodeCursor(consumer, after as string) };
    }
  }

  /**
   * Per status (`FAILED`, `PROCESSING`) and shard, the index entries older than `before` (a
   * record stuck since then entered its status before it), oldest first, `limit` at most of
   * each shard; then those records from the table, kept when {@link isStuck}. Reads only the
   * open records older than `before`: a healthy pipeline has few or none.
   */
  async stuck(consumer: string, before: number, limit: number): Promise<readonly InboxRecord[]> {
    const bound = `${new Date(before).toISOString()}#`;
    const keys = await Promise.all(
      (['FAILED', 'PROCESSING'] as const).flatMap((status) =>
        openKeys(consumer, status, this.shards).map(async (value) => {
          const output = await this.queryOpen(consumer, value, { before: bound, limit });
          return ((output.Items ?? []) as InboxItem[]).map((item) => ({
            [inboxTableSchema.partitionKey]: item[inboxTableSchema.partitionKey],
          }));
        }),
      ),
    );
    const found = await this.getMany(keys.flat());
    const records: InboxRecord[] = [];
    for (const item of found.values()) {
      const record = decode(item);
      if (isStuck(record, before)) records.push(record);
    }
    return records.sort((a, b) => a.updatedAt - b.updatedAt).slice(0, limit);
  }

  /**
   * The first entries (at most `n`) of `consumer`'s DEAD shards after sort key `after`, in the
   * index's order, and whether any entry is left beyond them. A shard whose page was cut short
   * bounds what is taken: nothing of another shard after its last entry, which may precede
   * that shard's unread ones.
   */
  private async firstDead(
    consumer: string,
    n: number,
    after: string | undefined,
  ): Promise<{ entries: { since: string; key: Pick<InboxItem, 'pk'> }[]; more: boolean }> {
    const sortKey = inboxTableSchema.openIndex.sortKey;
    const perShard = await Promise.all(
      openKeys(consumer, 'DEAD', this.shards).map(async (value) => {
        const output = await this.queryOpen(consumer, value, { after, limit: n });
        return { items: (output.Items ?? []) as InboxItem[], cut: output.LastEvaluatedKey !== undefined };
      }),
    );
    const bound = perShard
      .filter((shard) => shard.cut && shard.items.length > 0)
      .map((shard) => shard.items.at(-1)?.[sortKey] as string)
      .sort(byteOrder)[0];
    const all = perShard
      .flatMap((shard) => shard.items)
      .map((item) => ({
        since: item[sortKey] as string,
        key: { [inboxTableSchema.partitionKey]: item[inboxTableSchema.partitionKey] },
      }))
      .sort((x, y) => byteOrder(x.since, y.since));
    const known = bound === undefined ? all : all.filter((e) => byteOrder(e.since, bound) <= 0);
    const entries = known.slice(0, n);
    return { entries, more: all.length > entries.length || perShard.some((shard) => shard.cut) };
  }

  /** The items of `keys` (read consistently, in batches of 100, unprocessed keys asked again), by partition key. */
  private async getMany(keys: readonly Pick<InboxItem, 'pk'>[]): Promise<Map<string, InboxItem>> {
    const found = new Map<string, InboxItem>();
    for (let i = 0; i < keys.length; i += batchGetLimit) {
      for (const [pk, item] of await this.batchGet(keys.slice(i, i + batchGetLimit), { consistent: true })) {
        found.set(pk, item);
      }
    }
    return found;
  }

  /** One BatchGetItem of at most 100 keys, asked again for what comes back unprocessed. */
  private async batchGet(
    keys: readonly Record<string, unknown>[],
    options: { readonly consistent: boolean; readonly keysOnly?: boolean },
  ): Promise<Map<string, InboxItem>> {
    const found = new Map<string, InboxItem>();
    let pending: Record<string, unknown>[] = [...keys];
    for (let round = 0; pending.length > 0; round++) {
      if (round > 0) await sleep(Math.min(1_000, 25 * 2 ** round));
      if (round >= batchGetRounds) {
        throw storeError('batchGet', { consumer: '*', eventId: '*' }, new Error('keys left unprocessed'));
      }
      const request = pending;
      const output = await this.call('batchGet', { consumer: '*', eventId: '*' }, () =>
        this.doc.send(
          new BatchGetCommand({
            RequestItems: {
              [this.table]: {
                Keys: request,
                ConsistentRead: options.consistent,
                ...(options.keysOnly
                  ? {
                      ProjectionExpression: '#pk',
                      ExpressionAttributeNames: { '#pk': inboxTableSchema.partitionKey },
                    }
                  : {}),
              },
            },
          }),
        ),
      );
      for (const item of (output.Responses?.[this.table] ?? []) as InboxItem[]) {
        found.set(item[inboxTableSchema.partitionKey], item);
      }
      pending = output.UnprocessedKeys?.[this.table]?.Keys ?? [];
    }
    return found;
  }

  async redrive(k: InboxKey, now: number): Promise<InboxRecord> {
    const update = `SET #state.#status = :failed, #state.#attempts = :zero, #state.#nextAttemptAt = :zero,
      #state.#firstAttemptAt = :now, #state.#permanentFailures = :zero,
      #state.#leaseOwner = :owner, #state.#leaseUntil = :zero, #state.#updatedAt = :now,
      #state.#lastError = :note, #openKey = :openKey, #openSince = :openSince
      REMOVE #expiresAt, #state.#lastFailure`;
    const condition = '#state.#status = :dead';
    const sent = await this.send('redrive', k, () =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: itemKey(k),
          UpdateExpression: update,
          ConditionExpression: condition,
          ExpressionAttributeNames: namesIn(update, condition),
          ExpressionAttributeValues: {
            ':failed': 'FAILED',
            ':dead': 'DEAD',
            ':zero': 0,
            ':owner': `redrive/${randomUUID()}`,
            ':now': now,
            ':note': `redriven at ${new Date(now).toISOString()}`,
            // A fresh first attempt: its retry age starts again.
            ...indexValues(k, 'FAILED', now, this.shards),
          },
          ReturnValues: 'ALL_NEW',
        }),
      ),
    );
    if (!sent.refused) return decode(sent.output.Attributes as InboxItem);
    const current = await this.get(k);
    if (!current) throw new InboxRecordNotFoundError(k);
    throw new InboxNotDeadError(k, current.status);
  }

  /** One page of one key value of the operator's index (entries after `after`, when given). */
  private queryOpen(
    consumer: string,
    value: string,
    options: {
      start?: Record<string, unknown>;
      after?: string;
      before?: string;
      limit?: number;
      count?: boolean;
    },
  ): Promise<QueryCommandOutput> {
    const keyCondition =
      options.after !== undefined
        ? '#openKey = :openKey AND #openSince > :after'
        : options.before !== undefined
          ? '#openKey = :openKey AND #openSince < :before'
          : '#openKey = :openKey';
    return this.openQueries(() =>
      this.call('queryOpen', { consumer, eventId: `*${value}` }, () =>
        this.doc.send(
          new QueryCommand({
            TableName: this.table,
            IndexName: inboxTableSchema.openIndex.name,
            KeyConditionExpression: keyCondition,
            ExpressionAttributeNames: namesIn(keyCondition),
            ExpressionAttributeValues: {
              ':openKey': value,
              ...(options.after === undefined ? {} : { ':after': options.after }),
              ...(options.after !== undefined || options.before === undefined
                ? {}
                : { ':before': options.before }),
            },
            ExclusiveStartKey: options.start,
            Select: options.count ? 'COUNT' : undefined,
            Limit: Math.min(this.pageSize, Math.max(1, options.limit ?? this.pageSize)),
          }),
        ),
      ),
    );
  }
}

/** Index Queries of one adapter in flight at once (see the constructor). */
const openQueryConcurrency = 16;
/** Keys per BatchGetItem request: DynamoDB takes at most 100. */
const batchGetLimit = 100;
/** BatchGetItem requests of one presence check in flight at once. */
const presenceConcurrency = 8;

/** The figure of one status over all its shards: the counts added, the oldest of the oldest. */
export function mergeFigures(shards: readonly OpenFigure[]): OpenFigure {
  let count = 0;
  let oldestSince: number | null = null;
  for (const s of shards) {
    count += s.count;
    if (s.oldestSince !== null && (oldestSince === null || s.oldestSince < oldestSince))
      oldestSince = s.oldestSince;
  }
  return { count, oldestSince };
}

/** Requests for one batch before its unprocessed keys count as a failure (each after a longer pause). */
const batchGetRounds = 8;

/** DynamoDB orders string keys by their UTF-8 bytes. */
function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}
