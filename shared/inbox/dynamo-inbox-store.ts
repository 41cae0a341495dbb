import { createHash, randomUUID } from 'node:crypto';
import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  type QueryCommandOutput,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import pLimit, { type LimitFunction } from 'p-limit';
import { sleep } from '../db/retry';
import { topology } from '../topology';
import {
  InboxError,
  InboxFencedOutError,
  InboxNotDeadError,
  InboxRecordChangedError,
  InboxRecordExistsError,
  InboxRecordNotFoundError,
} from './errors';
import type { FailureKind } from './failure-kind';
import type {
  BeginResult,
  ExpectedState,
  InboxDeath,
  InboxFailure,
  InboxKey,
  InboxPage,
  InboxPresence,
  InboxRecord,
  InboxStatus,
  InboxStore,
  NewInboxRecord,
  OpenFigure,
  OpenFigures,
  PoisonRecord,
} from './inbox-store';
import { inboxDefaults } from './settings';

/**
 * The inbox table's shape, for `ensureTables` and the CDK table. Partition key `pk` =
 * `<consumer>#<eventId>` ({@link recordKey}), no sort key: every record is its own partition
 * key, so no consumer's records share one partition's write limit, and a consumer's IAM grant
 * still pins it to its own records (`dynamodb:LeadingKeys` like `<consumer>#*`). `consumer` and
 * `eventId` are kept as plain attributes for reading. TTL on `expiresAt` (epoch seconds; set only
 * in the CDK table definition, since dynalite has no TTL API). The record itself is the map `state`.
 *
 * `openIndex` is the operator's index: sparse, only records that carry `openKey` are in it,
 * and only `PROCESSING`, `FAILED` and `DEAD` records carry it (`complete` removes it). Its
 * partition key is `<consumer>#<status>#<shard>` ({@link openKey}; the shard a hash of the
 * event id, `topology.inbox.openIndexShards` of them, so no key value takes a consumer's whole
 * rate), its sort key `openSince` = `<ISO time>#<eventId>` ({@link openSince}): oldest first,
 * so the oldest record of a status is one Query with `Limit: 1` per shard. The time is when
 * the current lease began (`PROCESSING`), the first attempt (`FAILED`: the retry age) or the
 * death (`DEAD`). KEYS_ONLY: an entry is well under 1 KB (one write unit), and what an operator
 * needs beyond counts and ages (a dead record's stored event) is read from the table by key.
 */
export const inboxTableSchema = {
  partitionKey: 'pk',
  ttlAttribute: 'expiresAt',
  openIndex: { name: 'open-records', partitionKey: 'openKey', sortKey: 'openSince' },
} as const;

/** The statuses the operator's index holds: everything but `PROCESSED`. */
export type OpenStatus = Exclude<InboxStatus, 'PROCESSED'>;

/** Every status the operator's index holds. */
export const openStatuses: readonly OpenStatus[] = ['PROCESSING', 'FAILED', 'DEAD'];

/**
 * The table's partition key of record `k`: `<consumer>#<eventId>`. A consumer name never holds
 * `#` (nor IAM's wildcards `*` and `?`), so the prefix `<consumer>#` is that consumer's records
 * and no other's: what the consumer's leading-keys grant allows.
 */
export function recordKey(k: InboxKey): string {
  if (!/^[^#*?]+$/.test(k.consumer)) throw new TypeError(`invalid consumer name "${k.consumer}"`);
  return `${k.consumer}#${k.eventId}`;
}

/** The shard of the operator's index an event's records go to: a hash of its id, the same in every status. */
export function openShard(eventId: string, shards: number = topology.inbox.openIndexShards): number {
  return createHash('sha256').update(eventId).digest().readUInt32BE(0) % shards;
}

/** A key value of the operator's index: `consumer`'s records in `status` on `shard`. */
export const openKey = (consumer: string, status: OpenStatus, shard: number): string =>
  `${consumer}#${status}#${shard}`;

/** Every key value of the operator's index for `consumer`'s records in `status`: what an ops read queries. */
export function openKeys(
  consumer: string,
  status: OpenStatus,
  shards: number = topology.inbox.openIndexShards,
): string[] {
  return Array.from({ length: shards }, (_, shard) => openKey(consumer, status, shard));
}

/**
 * The index's sort key of a record since epoch ms `at`: an ISO 8601 UTC time (it sorts as text
 * in time order) and the event id, which makes it unique within the consumer and the order total.
 */
export const openSince = (at: number, eventId: string): string => `${new Date(at).toISOString()}#${eventId}`;

/** The time (epoch ms) an {@link openSince} value starts with. */
export const openSinceTime = (value: string): number => Date.parse(value.slice(0, value.indexOf('#')));

/**
 * What one inbox item holds: the key, the whole record state in ONE map attribute `state`, and
 * the TTL attribute `expiresAt` at the top level (DynamoDB TTL only reads top-level numbers).
 * One attribute is what lets `begin` create the record with a single `if_not_exists`.
 */
interface Item {
  [inboxTableSchema.partitionKey]: string;
  consumer: string;
  eventId: string;
  state: State;
  /** Present exactly while the record is not `PROCESSED`: the operator's index's keys. */
  [inboxTableSchema.openIndex.partitionKey]?: string;
  [inboxTableSchema.openIndex.sortKey]?: string;
  [inboxTableSchema.ttlAttribute]?: number;
}

interface State {
  status: InboxStatus;
  attempts: number;
  /** Absent on records written before it existed: `receivedAt` stands in. */
  firstAttemptAt?: number;
  /** Absent on records written before it existed: none counted. */
  permanentFailures?: number;
  lastFailure?: FailureKind;
  leaseOwner: string;
  leaseUntil: number;
  nextAttemptAt: number;
  payloadHash: string;
  eventType: string;
  taskId: string | null;
  /** The event as JSON text: one string is cheaper to store and compare than a nested map. */
  event: string;
  eventTruncated: boolean;
  receivedAt: number;
  updatedAt: number;
  lastError?: string;
  poison?: boolean;
  cloudEventId?: string | null;
}

// Every attribute name goes through a placeholder: `status` is a DynamoDB reserved word, and
// one rule for all is easier to read than a list of which ones are.
const names = {
  '#pk': inboxTableSchema.partitionKey,
  '#consumer': 'consumer',
  '#eventId': 'eventId',
  '#state': 'state',
  '#status': 'status',
  '#attempts': 'attempts',
  '#firstAttemptAt': 'firstAttemptAt',
  '#permanentFailures': 'permanentFailures',
  '#lastFailure': 'lastFailure',
  '#leaseOwner': 'leaseOwner',
  '#leaseUntil': 'leaseUntil',
  '#nextAttemptAt': 'nextAttemptAt',
  '#updatedAt': 'updatedAt',
  '#lastError': 'lastError',
  '#expiresAt': inboxTableSchema.ttlAttribute,
  '#openKey': inboxTableSchema.openIndex.partitionKey,
  '#openSince': inboxTableSchema.openIndex.sortKey,
} as const;
type Name = keyof typeof names;

/** The ExpressionAttributeNames an expression uses, and only those (DynamoDB rejects unused ones). */
function namesIn(...expressions: (string | undefined)[]): Record<string, string> {
  const text = expressions.join(' ');
  const used: Record<string, string> = {};
  for (const placeholder of Object.keys(names) as Name[]) {
    if (new RegExp(`${placeholder}\\b`).test(text)) used[placeholder] = names[placeholder];
  }
  return used;
}

/**
 * Invariant `begin` relies on: `state` is present on every item from creation until deletion,
 * and no write REMOVEs it (transitions only SET fields inside it). So a begin whose condition
 * fails changes nothing on the item, whatever its status.
 */
const beginUpdate =
  'SET #state = :state, #consumer = :consumer, #eventId = :eventId, #openKey = :openKey, #openSince = :openSince';
const beginCondition = 'attribute_not_exists(#state)';

/** Longest `lastError` a record keeps, in UTF-8 bytes (the ellipsis of a cut one included): a reason quoting a huge field must not pass the 400 KB item limit. */
export const maxErrorBytes = 4 * 1024;

const isConditionFailure = (err: unknown) =>
  (err as { name?: string } | null)?.name === 'ConditionalCheckFailedException';

/**
 * A conditional write DynamoDB refused: its error, and the item it was refused on when DynamoDB
 * returned it (ReturnValuesOnConditionCheckFailure; dynalite ignores that and returns none).
 */
interface Refusal {
  readonly cause: unknown;
  readonly item: Item | undefined;
}

/** What {@link DynamoInboxStore.send} makes of one request: its output, or the refusal of its condition. */
type Sent<T> = { readonly output: T; readonly refused?: undefined } | { readonly refused: Refusal };

/** Options of the adapter; the defaults suit the Lambda functions. */
export interface DynamoInboxStoreOptions {
  readonly tableName: string;
  /** Events whose JSON is larger are stored truncated (and cannot be redriven as-is). */
  readonly maxStoredEventBytes?: number;
  /** Records per Query page in the ops reads. */
  readonly pageSize?: number;
  /**
   * Shards of each key of the operator's index: every store over one table must use the same
   * (`topology.inbox.openIndexShards` by default, the AWS stack's; the local runtime its own).
   */
  readonly openIndexShards?: number;
  /** Queries of the operator's index in flight at once, over all reads of this store. @default 16 */
  readonly openQueryConcurrency?: number;
}

/**
 * The inbox on DynamoDB, through the document client over the `DynamoDBClient` it is given.
 * Uses only GetItem, PutItem, UpdateItem and Query with condition expressions, which AWS,
 * dynalite and DynamoDB Local all implement alike: no transactions, no TTL API. `begin` asks
 * for ReturnValuesOnConditionCheckFailure, which dynalite ignores, so it falls back to a
 * GetItem when a failed condition comes back without the item.
 */
export class DynamoInboxStore implements InboxStore, InboxPresence {
  private readonly doc: DynamoDBDocumentClient;
  private readonly table: string;
  private readonly maxEventBytes: number;
  private readonly pageSize: number;
  private readonly shards: number;
  private readonly openQueries: LimitFunction;

  constructor(client: DynamoDBClient, options: DynamoInboxStoreOptions) {
    this.doc = DynamoDBDocumentClient.from(client, {
      marshallOptions: { removeUndefinedValues: true },
    });
    this.table = options.tableName;
    this.maxEventBytes = options.maxStoredEventBytes ?? inboxDefaults.maxStoredEventBytes;
    this.pageSize = options.pageSize ?? 500;
    this.shards = options.openIndexShards ?? topology.inbox.openIndexShards;
    if (!Number.isInteger(this.shards) || this.shards < 1) {
      throw new TypeError(`openIndexShards must be a positive integer, not ${this.shards}`);
    }
    // The figures read every shard of every status (96 Queries a consumer on AWS), and the
    // gauges read three consumers at once. Unbounded, that is hundreds of requests on the SDK's
    // 50 sockets: after an idle spell each kept-alive socket the server has closed fails one
    // request (ECONNRESET, "socket hang up"), and the standard retry strategy's quota (500
    // tokens, 14 a transient retry: 35 retries) retries only the first 35, so the 36th
    // failed the whole read (the rehearsal's gauges, on a busy machine). Bounded, at most this
    // many sockets are ever opened for them, and each failure is retried.
    this.openQueries = pLimit(options.openQueryConcurrency ?? openQueryConcurrency);
  }

  /**
   * One conditional UpdateItem that creates the record only if it is absent. When it is there,
   * DynamoDB returns the existing item with the refusal (ReturnValuesOnConditionCheckFailure),
   * so a duplicate still costs one call on AWS and DynamoDB Local; dynalite ignores that
   * parameter, and there the record is read back with a second, consistent call.
   *
   * Conditional rather than `if_not_exists` so that the sparse index key is written only on
   * creation: an unconditional write would put a duplicate delivery of a PROCESSED record back
   * into the index.
   */
  async begin(record: NewInboxRecord): Promise<BeginResult> {
    const stored = this.storedEvent(record.event);
    const state: State = {
      status: 'PROCESSING',
      attempts: 1,
      firstAttemptAt: record.now,
      permanentFailures: 0,
      leaseOwner: record.owner,
      leaseUntil: record.leaseUntil,
      nextAttemptAt: 0,
      payloadHash: record.payloadHash,
      eventType: record.eventType,
      taskId: record.taskId,
      event: stored.event,
      eventTruncated: stored.truncated,
      receivedAt: record.now,
      updatedAt: record.now,
    };
    const sent = await this.send('begin', record, () =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: key(record),
          UpdateExpression: beginUpdate,
          ConditionExpression: beginCondition,
          ExpressionAttributeNames: namesIn(beginUpdate, beginCondition),
          ExpressionAttributeValues: {
            ':state': state,
            ':consumer': record.consumer,
            ':eventId': record.eventId,
            ...indexValues(record, 'PROCESSING', record.now, this.shards),
          },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
    if (!sent.refused) {
      const created: Item = { ...key(record), consumer: record.consumer, eventId: record.eventId, state };
      return { created: true, record: { ...decode(created), event: record.event } };
    }
    const existing = await this.refusedItem('begin', record, sent.refused);
    // Gone between the refused write and the read (a TTL deletion): begin afresh.
    if (!existing) return this.begin(record);
    // The SDK resent this very write after it landed (its response was lost): the record is
    // this attempt's own, and the attempt goes on. Owners are unique per attempt, so no other
    // attempt can have written this owner.
    if (holds(existing, 'PROCESSING', record.owner)) return { created: true, record: decode(existing) };
    return { created: false, record: decode(existing) };
  }

  async takeOver(
    k: InboxKey,
    expected: ExpectedState,
    claim: { owner: string; leaseUntil: number; now: number },
  ): Promise<InboxRecord> {
    if (expected.status !== 'PROCESSING' && expected.status !== 'FAILED') {
      throw new TypeError(`only PROCESSING and FAILED records can be taken over, not ${expected.status}`);
    }
    // The due test is in the condition, not only in the caller's read: a heartbeat that
    // renewed the lease after that read must win.
    const due =
      expected.status === 'PROCESSING' ? '#state.#leaseUntil < :now' : '#state.#nextAttemptAt <= :now';
    const update = `SET #state.#status = :processing, #state.#attempts = #state.#attempts + :one,
      #state.#leaseOwner = :owner, #state.#leaseUntil = :leaseUntil, #state.#updatedAt = :now,
      #openKey = :openKey, #openSince = :openSince`;
    const condition = `#state.#status = :expectedStatus AND #state.#leaseOwner = :expectedOwner AND ${due}`;
    const sent = await this.send('takeOver', k, () =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: key(k),
          UpdateExpression: update,
          ConditionExpression: condition,
          ExpressionAttributeNames: namesIn(update, condition),
          ExpressionAttributeValues: {
            ':processing': 'PROCESSING',
            ':one': 1,
            ':owner': claim.owner,
            ':leaseUntil': claim.leaseUntil,
            ':now': claim.now,
            ':expectedStatus': expected.status,
            ':expectedOwner': expected.leaseOwner,
            // The lease begins now: the index orders in-flight records by it.
            ...indexValues(k, 'PROCESSING', claim.now, this.shards),
          },
          ReturnValues: 'ALL_NEW',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
    if (!sent.refused) return decode(sent.output.Attributes as Item);
    // A resend of this take-over after it landed finds the record already this owner's.
    const current = await this.refusedItem('takeOver', k, sent.refused);
    if (current && holds(current, 'PROCESSING', claim.owner)) return decode(current);
    throw new InboxRecordChangedError(k, { cause: sent.refused.cause });
  }

  async renew(k: InboxKey, owner: string, leaseUntil: number, now: number): Promise<void> {
    await this.fenced('renew', k, owner, 'SET #state.#leaseUntil = :leaseUntil, #state.#updatedAt = :now', {
      ':leaseUntil': leaseUntil,
      ':now': now,
    });
  }

  async complete(k: InboxKey, owner: string, at: { now: number; expiresAt: number }): Promise<void> {
    // Kept to the fewest clauses: this write happens once per event (dynalite parses every
    // expression on every call, and the lease of a PROCESSED record is never read again).
    await this.fenced(
      'complete',
      k,
      owner,
      'SET #state.#status = :processed, #state.#updatedAt = :now, #expiresAt = :expiresAt REMOVE #openKey, #openSince',
      { ':processed': 'PROCESSED', ':now': at.now, ':expiresAt': at.expiresAt },
      { landed: 'PROCESSED' },
    );
  }

  async fail(k: InboxKey, owner: string, failure: InboxFailure): Promise<void> {
    await this.fenced(
      'fail',
      k,
      owner,
      `SET #state.#status = :failed, #state.#leaseUntil = :now, #state.#nextAttemptAt = :next,
        #state.#lastError = :error, #state.#lastFailure = :kind, #state.#permanentFailures = :permanent,
        #state.#updatedAt = :now, #openKey = :openKey, #openSince = :openSince`,
      {
        ':failed': 'FAILED',
        ':now': failure.now,
        ':next': failure.nextAttemptAt,
        ':kind': failure.kind,
        ':permanent': failure.permanentFailures,
        ':error': boundedError(failure.error),
        // Ordered by the first attempt: the oldest FAILED record's retry age is its age.
        ...indexValues(k, 'FAILED', failure.firstAttemptAt, this.shards),
      },
      { landed: 'FAILED' },
    );
  }

  async markDead(k: InboxKey, expected: ExpectedState, death: InboxDeath): Promise<void> {
    const lapsed = death.leaseLapsedBy !== undefined && expected.status === 'PROCESSING';
    await this.fenced(
      'markDead',
      k,
      expected.leaseOwner,
      `SET #state.#status = :dead, #state.#leaseUntil = :now, #state.#lastError = :reason,
        #state.#updatedAt = :now, #expiresAt = :expiresAt, #openKey = :openKey, #openSince = :openSince`,
      {
        ':dead': 'DEAD',
        ...indexValues(k, 'DEAD', death.now, this.shards),
        ':now': death.now,
        ':reason': boundedError(death.reason),
        ':expiresAt': death.expiresAt,
        ...(lapsed ? { ':lapsedBy': death.leaseLapsedBy } : {}),
      },
      {
        landed: 'DEAD',
        status: expected.status,
        extraCondition: lapsed ? ' AND #state.#leaseUntil < :lapsedBy' : '',
      },
    );
  }

  async recordPoison(record: PoisonRecord): Promise<void> {
    const stored = this.storedEvent(record.event);
    const item: Item = {
      ...key(record),
      consumer: record.consumer,
      eventId: record.eventId,
      state: {
        status: 'DEAD',
        attempts: 0,
        firstAttemptAt: record.now,
        permanentFailures: 0,
        leaseOwner: `poison/${randomUUID()}`,
        leaseUntil: record.now,
        nextAttemptAt: 0,
        payloadHash: record.payloadHash,
        eventType: record.eventType,
        taskId: record.taskId,
        event: stored.event,
        eventTruncated: stored.truncated,
        receivedAt: record.now,
        updatedAt: record.now,
        lastError: boundedError(record.reason),
        poison: true,
        cloudEventId: record.cloudEventId,
      },
      ...indexKeys(record, 'DEAD', record.now, this.shards),
      [inboxTableSchema.ttlAttribute]: record.expiresAt,
    };
    // A redriven poison record (FAILED) is overwritten back to DEAD; one already DEAD is a
    // duplicate delivery of the same poison event.
    const condition = 'attribute_not_exists(#pk) OR #state.#status <> :dead';
    const sent = await this.send('recordPoison', record, () =>
      this.doc.send(
        new PutCommand({
          TableName: this.table,
          Item: item,
          ConditionExpression: condition,
          ExpressionAttributeNames: namesIn(condition),
          ExpressionAttributeValues: { ':dead': 'DEAD' },
        }),
      ),
    );
    if (sent.refused) throw new InboxRecordExistsError(record, { cause: sent.refused.cause });
  }

  async get(k: InboxKey): Promise<InboxRecord | undefined> {
    const item = await this.getItem('get', k);
    return item ? decode(item) : undefined;
  }

  private async getItem(operation: string, k: InboxKey): Promise<Item | undefined> {
    const output = await this.call(operation, k, () =>
      this.doc.send(new GetCommand({ TableName: this.table, Key: key(k), ConsistentRead: true })),
    );
    return output.Item as Item | undefined;
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
      const oldest = (first.Items?.[0] as Item | undefined)?.[sortKey];
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
   * The first entries (at most `n`) of `consumer`'s DEAD shards after sort key `after`, in the
   * index's order, and whether any entry is left beyond them. A shard whose page was cut short
   * bounds what is taken: nothing of another shard after its last entry, which may precede
   * that shard's unread ones.
   */
  private async firstDead(
    consumer: string,
    n: number,
    after: string | undefined,
  ): Promise<{ entries: { since: string; key: Pick<Item, 'pk'> }[]; more: boolean }> {
    const sortKey = inboxTableSchema.openIndex.sortKey;
    const perShard = await Promise.all(
      openKeys(consumer, 'DEAD', this.shards).map(async (value) => {
        const output = await this.queryOpen(consumer, value, { after, limit: n });
        return { items: (output.Items ?? []) as Item[], cut: output.LastEvaluatedKey !== undefined };
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
  private async getMany(keys: readonly Pick<Item, 'pk'>[]): Promise<Map<string, Item>> {
    const found = new Map<string, Item>();
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
  ): Promise<Map<string, Item>> {
    const found = new Map<string, Item>();
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
      for (const item of (output.Responses?.[this.table] ?? []) as Item[]) {
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
          Key: key(k),
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
    if (!sent.refused) return decode(sent.output.Attributes as Item);
    const current = await this.get(k);
    if (!current) throw new InboxRecordNotFoundError(k);
    throw new InboxNotDeadError(k, current.status);
  }

  /**
   * An update that only the live attempt holding the lease may make. `landed` is the status the
   * write leaves: a refusal that finds the record already there under `owner` is the SDK
   * resending this write after it landed (a lost response), and counts as done. A renewal needs
   * no such check: its resend still passes the condition.
   */
  private async fenced(
    operation: string,
    k: InboxKey,
    owner: string,
    update: string,
    values: Record<string, unknown>,
    options: { landed?: InboxStatus; status?: InboxStatus; extraCondition?: string } = {},
  ): Promise<void> {
    const condition = `#state.#status = :fenceStatus AND #state.#leaseOwner = :fenceOwner${options.extraCondition ?? ''}`;
    const sent = await this.send(operation, k, () =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: key(k),
          UpdateExpression: update,
          ConditionExpression: condition,
          ExpressionAttributeNames: namesIn(update, condition),
          ExpressionAttributeValues: {
            ...values,
            ':fenceStatus': options.status ?? 'PROCESSING',
            ':fenceOwner': owner,
          },
          ...(options.landed ? { ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const } : {}),
        }),
      ),
    );
    if (!sent.refused) return;
    if (options.landed) {
      const current = await this.refusedItem(operation, k, sent.refused);
      if (current && holds(current, options.landed, owner)) return;
    }
    throw new InboxFencedOutError(k, owner, operation, { cause: sent.refused.cause });
  }

  /**
   * The item a conditional write was refused on: returned with the refusal on AWS and DynamoDB
   * Local (ReturnValuesOnConditionCheckFailure), read back on dynalite, which ignores that.
   */
  private async refusedItem(operation: string, k: InboxKey, refusal: Refusal): Promise<Item | undefined> {
    return refusal.item ?? this.getItem(operation, k);
  }

  /** One page of one key value of the operator's index (entries after `after`, when given). */
  private queryOpen(
    consumer: string,
    value: string,
    options: { start?: Record<string, unknown>; after?: string; limit?: number; count?: boolean },
  ): Promise<QueryCommandOutput> {
    const keyCondition =
      options.after === undefined ? '#openKey = :openKey' : '#openKey = :openKey AND #openSince > :after';
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
            },
            ExclusiveStartKey: options.start,
            Select: options.count ? 'COUNT' : undefined,
            Limit: Math.min(this.pageSize, Math.max(1, options.limit ?? this.pageSize)),
          }),
        ),
      ),
    );
  }

  /**
   * Sends one request of `operation` on `k`: the one place the adapter meets DynamoDB's errors.
   * A refused condition comes back as `refused` for the write to judge (a duplicate, its own
   * resend that landed, a lost race); every other failure is a STORE_ERROR.
   */
  private async send<T>(operation: string, k: InboxKey, request: () => Promise<T>): Promise<Sent<T>> {
    try {
      return { output: await request() };
    } catch (err) {
      if (!isConditionFailure(err)) throw storeError(operation, k, err);
      const returned = (err as { Item?: Record<string, AttributeValue> }).Item;
      return { refused: { cause: err, item: returned ? (unmarshall(returned) as Item) : undefined } };
    }
  }

  /** {@link send} for a request without a condition (reads): any failure is a STORE_ERROR. */
  private async call<T>(operation: string, k: InboxKey, request: () => Promise<T>): Promise<T> {
    const sent = await this.send(operation, k, request);
    if (sent.refused) throw storeError(operation, k, sent.refused.cause);
    return sent.output;
  }

  private storedEvent(event: unknown): { event: string; truncated: boolean } {
    const json = JSON.stringify(event) ?? 'null';
    if (Buffer.byteLength(json) <= this.maxEventBytes) return { event: json, truncated: false };
    return { event: Buffer.from(json).subarray(0, this.maxEventBytes).toString('utf8'), truncated: true };
  }
}

/** `text` cut to {@link maxErrorBytes} UTF-8 bytes, marked with an ellipsis when it was cut. */
export function boundedError(text: string): string {
  const bytes = Buffer.from(text);
  if (bytes.length <= maxErrorBytes) return text;
  // Cut before a character, never inside one: a UTF-8 continuation byte is 0b10xxxxxx.
  let cut = maxErrorBytes - Buffer.byteLength('…');
  while (cut > 0 && ((bytes[cut] as number) & 0xc0) === 0x80) cut--;
  return `${bytes.subarray(0, cut).toString('utf8')}…`;
}

/** True when `item` is in `status` under `owner`: what this attempt's own landed write left. */
function holds(item: Item, status: InboxStatus, owner: string): boolean {
  return item.state?.status === status && item.state.leaseOwner === owner;
}

/** The table key of record `k`. */
function key(k: InboxKey): Pick<Item, typeof inboxTableSchema.partitionKey> {
  return { [inboxTableSchema.partitionKey]: recordKey(k) };
}

/** The index keys of record `k` in `status` since `at`, as an item holds them. */
function indexKeys(
  k: InboxKey,
  status: OpenStatus,
  at: number,
  shards: number,
): Pick<Item, typeof inboxTableSchema.openIndex.partitionKey | typeof inboxTableSchema.openIndex.sortKey> {
  return {
    [inboxTableSchema.openIndex.partitionKey]: openKey(k.consumer, status, openShard(k.eventId, shards)),
    [inboxTableSchema.openIndex.sortKey]: openSince(at, k.eventId),
  };
}

/** {@link indexKeys} as the values `:openKey` and `:openSince` of an update. */
function indexValues(k: InboxKey, status: OpenStatus, at: number, shards: number): Record<string, string> {
  const keys = indexKeys(k, status, at, shards);
  return {
    ':openKey': keys[inboxTableSchema.openIndex.partitionKey] as string,
    ':openSince': keys[inboxTableSchema.openIndex.sortKey] as string,
  };
}

/** Index Queries of one store in flight at once (see the constructor). */
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

function storeError(operation: string, k: InboxKey, err: unknown): InboxError {
  if (err instanceof InboxError) return err;
  const name = (err as { name?: string } | null)?.name ?? 'Error';
  const message = (err as { message?: string } | null)?.message ?? String(err);
  return new InboxError(
    'STORE_ERROR',
    `inbox ${operation} of ${k.consumer}/${k.eventId} failed: ${name}: ${message}`,
    { consumer: k.consumer, eventId: k.eventId, operation, errorName: name },
    { cause: err },
  );
}

function decode(item: Item): InboxRecord {
  const st = item.state;
  let event: unknown = st.event;
  if (!st.eventTruncated && typeof st.event === 'string') {
    try {
      event = JSON.parse(st.event);
    } catch {
      // Written by this adapter as JSON; anything else is shown as the raw string it is.
    }
  }
  return {
    consumer: item.consumer,
    eventId: item.eventId,
    status: st.status,
    attempts: st.attempts,
    firstAttemptAt: st.firstAttemptAt ?? st.receivedAt,
    permanentFailures: st.permanentFailures ?? 0,
    ...(st.lastFailure !== undefined ? { lastFailure: st.lastFailure } : {}),
    leaseOwner: st.leaseOwner,
    leaseUntil: st.leaseUntil,
    nextAttemptAt: st.nextAttemptAt,
    payloadHash: st.payloadHash,
    eventType: st.eventType,
    taskId: st.taskId ?? null,
    event,
    receivedAt: st.receivedAt,
    updatedAt: st.updatedAt,
    ...(st.lastError !== undefined ? { lastError: st.lastError } : {}),
    ...(item[inboxTableSchema.ttlAttribute] !== undefined
      ? { expiresAt: item[inboxTableSchema.ttlAttribute] }
      : {}),
    ...(st.poison ? { poison: true, cloudEventId: st.cloudEventId ?? null } : {}),
  };
}

function encodeCursor(consumer: string, after: string): string {
  return Buffer.from(JSON.stringify({ c: consumer, a: after })).toString('base64url');
}

/** The index sort key a page resumes after; a cursor of another consumer is refused. */
function decodeCursor(cursor: string, consumer: string): string {
  const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as {
    c?: unknown;
    a?: unknown;
  };
  if (parsed.c !== consumer || typeof parsed.a !== 'string') throw new TypeError('invalid inbox cursor');
  return parsed.a;
}
