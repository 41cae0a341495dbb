import { randomUUID } from 'node:crypto';
import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  type QueryCommandOutput,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import {
  InboxError,
  InboxFencedOutError,
  InboxNotDeadError,
  InboxRecordChangedError,
  InboxRecordExistsError,
  InboxRecordNotFoundError,
} from './errors';
import type { FailureKind } from './failure-kind';
import {
  type BeginResult,
  type ExpectedState,
  type InboxDeath,
  type InboxFailure,
  type InboxKey,
  type InboxPage,
  type InboxRecord,
  type InboxRecordCounts,
  type InboxStatus,
  type InboxStore,
  inboxStatuses,
  type NewInboxRecord,
  type OpenCounts,
  type PoisonRecord,
} from './inbox-store';
import { inboxDefaults } from './settings';

const sortKey = 'eventId';

/**
 * The inbox table's shape, for `ensureTables` and the CDK table: partition key `consumer`,
 * sort key `eventId` (both strings), TTL on `expiresAt` (epoch seconds; set only in the CDK
 * table definition, since dynalite has no TTL API). The record itself is the map `state`.
 *
 * `openIndex` is a sparse global secondary index over the records an operator may need: only
 * items that carry `openKey` (`<consumer>#<status>`) are in it, and only `PROCESSING`, `FAILED`
 * and `DEAD` records carry it (`complete` removes it). Ops reads (dead lists, open counts)
 * query one of its partitions, never the whole consumer partition or a scan.
 */
export const inboxTableSchema = {
  partitionKey: 'consumer',
  sortKey,
  ttlAttribute: 'expiresAt',
  // Sorted by the table's sort key: a dead list pages by event id, as the table does.
  openIndex: { name: 'open-records', partitionKey: 'openKey', sortKey },
} as const;

/** The statuses the sparse index holds: everything but `PROCESSED`. */
export type OpenStatus = Exclude<InboxStatus, 'PROCESSED'>;

/** The index partition of one consumer's records in `status`: the value of the index's partition key. */
export const openKey = (consumer: string, status: OpenStatus): string => `${consumer}#${status}`;

/**
 * What one inbox item holds: the key, the whole record state in ONE map attribute `state`, and
 * the TTL attribute `expiresAt` at the top level (DynamoDB TTL only reads top-level numbers).
 * One attribute is what lets `begin` create the record with a single `if_not_exists`.
 */
interface Item {
  [inboxTableSchema.partitionKey]: string;
  [inboxTableSchema.sortKey]: string;
  state: State;
  /** Present exactly while the record is not `PROCESSED`: the sparse index's partition key. */
  [inboxTableSchema.openIndex.partitionKey]?: string;
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
  '#consumer': inboxTableSchema.partitionKey,
  '#eventId': inboxTableSchema.sortKey,
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
const beginUpdate = 'SET #state = :state, #openKey = :openKey';
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
}

/**
 * The inbox on DynamoDB, through the document client over the `DynamoDBClient` it is given.
 * Uses only GetItem, PutItem, UpdateItem and Query with condition expressions, which AWS,
 * dynalite and DynamoDB Local all implement alike: no transactions, no TTL API. `begin` asks
 * for ReturnValuesOnConditionCheckFailure, which dynalite ignores, so it falls back to a
 * GetItem when a failed condition comes back without the item.
 */
export class DynamoInboxStore implements InboxStore {
  private readonly doc: DynamoDBDocumentClient;
  private readonly table: string;
  private readonly maxEventBytes: number;
  private readonly pageSize: number;

  constructor(client: DynamoDBClient, options: DynamoInboxStoreOptions) {
    this.doc = DynamoDBDocumentClient.from(client, {
      marshallOptions: { removeUndefinedValues: true },
    });
    this.table = options.tableName;
    this.maxEventBytes = options.maxStoredEventBytes ?? inboxDefaults.maxStoredEventBytes;
    this.pageSize = options.pageSize ?? 500;
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
          ExpressionAttributeValues: { ':state': state, ':openKey': openKey(record.consumer, 'PROCESSING') },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
    if (!sent.refused)
      return { created: true, record: { ...decode({ ...key(record), state }), event: record.event } };
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
      #openKey = :openKey`;
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
            ':openKey': openKey(k.consumer, 'PROCESSING'),
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
      'SET #state.#status = :processed, #state.#updatedAt = :now, #expiresAt = :expiresAt REMOVE #openKey',
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
        #state.#updatedAt = :now, #openKey = :openKey`,
      {
        ':failed': 'FAILED',
        ':now': failure.now,
        ':next': failure.nextAttemptAt,
        ':kind': failure.kind,
        ':permanent': failure.permanentFailures,
        ':error': boundedError(failure.error),
        ':openKey': openKey(k.consumer, 'FAILED'),
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
        #state.#updatedAt = :now, #expiresAt = :expiresAt, #openKey = :openKey`,
      {
        ':dead': 'DEAD',
        ':openKey': openKey(k.consumer, 'DEAD'),
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
      [inboxTableSchema.openIndex.partitionKey]: openKey(record.consumer, 'DEAD'),
      [inboxTableSchema.ttlAttribute]: record.expiresAt,
    };
    // A redriven poison record (FAILED) is overwritten back to DEAD; one already DEAD is a
    // duplicate delivery of the same poison event.
    const condition = 'attribute_not_exists(#eventId) OR #state.#status <> :dead';
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

  async counts(consumer: string): Promise<InboxRecordCounts> {
    const counts: Record<InboxStatus, number> = { PROCESSING: 0, PROCESSED: 0, FAILED: 0, DEAD: 0 };
    let total = 0;
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.query(consumer, { start, projection: '#state.#status' });
      for (const item of page.Items ?? []) {
        const status = (item as Partial<Item>).state?.status as InboxStatus;
        if (inboxStatuses.includes(status)) counts[status]++;
        total++;
      }
      start = page.LastEvaluatedKey;
    } while (start);
    return { ...counts, total };
  }

  async openCounts(consumer: string): Promise<OpenCounts> {
    const count = async (status: OpenStatus) => {
      let n = 0;
      let start: Record<string, unknown> | undefined;
      do {
        const page = await this.queryOpen(consumer, status, { start, count: true });
        n += page.Count ?? 0;
        start = page.LastEvaluatedKey;
      } while (start);
      return n;
    };
    const [processing, failed, dead] = await Promise.all([
      count('PROCESSING'),
      count('FAILED'),
      count('DEAD'),
    ]);
    return { PROCESSING: processing, FAILED: failed, DEAD: dead };
  }

  async listDead(consumer: string, page: { limit?: number; cursor?: string } = {}): Promise<InboxPage> {
    const limit = page.limit ?? 50;
    const records: InboxRecord[] = [];
    let start = page.cursor ? decodeCursor(page.cursor, consumer) : undefined;
    do {
      const output = await this.queryOpen(consumer, 'DEAD', { start, limit: limit - records.length });
      for (const item of output.Items ?? []) {
        const record = decode(item as Item);
        // The index is eventually consistent: a record redriven a moment ago may still be listed.
        if (record.status !== 'DEAD') continue;
        records.push(record);
      }
      start = output.LastEvaluatedKey;
      if (records.length >= limit && start) {
        const last = records[records.length - 1] as InboxRecord;
        return { records, cursor: encodeCursor({ consumer, eventId: last.eventId }) };
      }
    } while (start);
    return { records };
  }

  async redrive(k: InboxKey, now: number): Promise<InboxRecord> {
    const update = `SET #state.#status = :failed, #state.#attempts = :zero, #state.#nextAttemptAt = :zero,
      #state.#firstAttemptAt = :now, #state.#permanentFailures = :zero,
      #state.#leaseOwner = :owner, #state.#leaseUntil = :zero, #state.#updatedAt = :now,
      #state.#lastError = :note, #openKey = :openKey REMOVE #expiresAt, #state.#lastFailure`;
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
            ':openKey': openKey(k.consumer, 'FAILED'),
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

  private query(
    consumer: string,
    options: { start?: Record<string, unknown>; projection?: string; filter?: string },
  ): Promise<QueryCommandOutput> {
    const keyCondition = '#consumer = :consumer';
    return this.call('query', { consumer, eventId: '*' }, () =>
      this.doc.send(
        new QueryCommand({
          TableName: this.table,
          KeyConditionExpression: keyCondition,
          FilterExpression: options.filter,
          ProjectionExpression: options.projection,
          ExpressionAttributeNames: namesIn(keyCondition, options.filter, options.projection),
          ExpressionAttributeValues: {
            ':consumer': consumer,
            ...(options.filter ? { ':dead': 'DEAD' } : {}),
          },
          ExclusiveStartKey: options.start,
          Limit: this.pageSize,
        }),
      ),
    );
  }

  /** One page of the sparse index's partition of `consumer` records in `status`. */
  private queryOpen(
    consumer: string,
    status: OpenStatus,
    options: { start?: Record<string, unknown>; limit?: number; count?: boolean },
  ): Promise<QueryCommandOutput> {
    const keyCondition = '#openKey = :openKey';
    return this.call('queryOpen', { consumer, eventId: `*${status}` }, () =>
      this.doc.send(
        new QueryCommand({
          TableName: this.table,
          IndexName: inboxTableSchema.openIndex.name,
          KeyConditionExpression: keyCondition,
          ExpressionAttributeNames: namesIn(keyCondition),
          ExpressionAttributeValues: { ':openKey': openKey(consumer, status) },
          ExclusiveStartKey: options.start,
          Select: options.count ? 'COUNT' : undefined,
          Limit: Math.min(this.pageSize, Math.max(1, options.limit ?? this.pageSize)),
        }),
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
function key(
  k: InboxKey,
): Pick<Item, typeof inboxTableSchema.partitionKey | typeof inboxTableSchema.sortKey> {
  return { [inboxTableSchema.partitionKey]: k.consumer, [inboxTableSchema.sortKey]: k.eventId };
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
    consumer: item[inboxTableSchema.partitionKey],
    eventId: item[inboxTableSchema.sortKey],
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

function encodeCursor(k: InboxKey): string {
  return Buffer.from(JSON.stringify({ c: k.consumer, e: k.eventId })).toString('base64url');
}

/** The index's ExclusiveStartKey after record `e`: the index key plus the table key. */
function decodeCursor(cursor: string, consumer: string): Record<string, unknown> {
  const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as {
    c?: unknown;
    e?: unknown;
  };
  if (parsed.c !== consumer || typeof parsed.e !== 'string') throw new TypeError('invalid inbox cursor');
  return {
    [inboxTableSchema.openIndex.partitionKey]: openKey(consumer, 'DEAD'),
    ...key({ consumer, eventId: parsed.e }),
  };
}
