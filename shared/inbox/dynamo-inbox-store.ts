import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  type QueryCommandOutput,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import {
  InboxError,
  InboxFencedOutError,
  InboxNotDeadError,
  InboxRecordChangedError,
  InboxRecordExistsError,
  InboxRecordNotFoundError,
} from './errors';
import {
  type BeginResult,
  type ExpectedState,
  type InboxCounts,
  type InboxKey,
  type InboxPage,
  type InboxRecord,
  type InboxStatus,
  type InboxStore,
  inboxStatuses,
  type NewInboxRecord,
  type PoisonRecord,
} from './inbox-store';
import { inboxDefaults } from './settings';

/**
 * The inbox table's shape, for `ensureTables` and the CDK table: partition key `consumer`,
 * sort key `eventId` (both strings), TTL on `expiresAt` (epoch seconds; set only in the CDK
 * table definition, since dynalite has no TTL API).
 */
export const inboxTableSchema = {
  partitionKey: 'consumer',
  sortKey: 'eventId',
  ttlAttribute: 'expiresAt',
} as const;

interface Item {
  consumer: string;
  eventId: string;
  status: InboxStatus;
  attempts: number;
  leaseOwner: string;
  leaseUntil: number;
  nextAttemptAt: number;
  payloadHash: string;
  eventType: string;
  taskId: string | null;
  event: string;
  eventTruncated?: boolean;
  receivedAt: number;
  updatedAt: number;
  lastError?: string;
  expiresAt?: number;
  poison?: boolean;
  cloudEventId?: string | null;
  [k: string]: unknown;
}

// Every attribute name goes through a placeholder: `status` is a DynamoDB reserved word, and
// one rule for all is easier to read than a list of which ones are.
const names = {
  '#consumer': 'consumer',
  '#eventId': 'eventId',
  '#status': 'status',
  '#attempts': 'attempts',
  '#leaseOwner': 'leaseOwner',
  '#leaseUntil': 'leaseUntil',
  '#nextAttemptAt': 'nextAttemptAt',
  '#payloadHash': 'payloadHash',
  '#eventType': 'eventType',
  '#taskId': 'taskId',
  '#event': 'event',
  '#eventTruncated': 'eventTruncated',
  '#receivedAt': 'receivedAt',
  '#updatedAt': 'updatedAt',
  '#lastError': 'lastError',
  '#expiresAt': 'expiresAt',
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
 * Invariant `begin` relies on: every attribute it writes with `if_not_exists` below is present
 * on every record from creation until deletion, and no other write REMOVEs one. So a begin
 * that finds a record changes nothing on it, whatever its status.
 */
const beginUpdate = `SET #status = if_not_exists(#status, :processing),
  #attempts = if_not_exists(#attempts, :one),
  #leaseOwner = if_not_exists(#leaseOwner, :owner),
  #leaseUntil = if_not_exists(#leaseUntil, :leaseUntil),
  #nextAttemptAt = if_not_exists(#nextAttemptAt, :zero),
  #payloadHash = if_not_exists(#payloadHash, :payloadHash),
  #eventType = if_not_exists(#eventType, :eventType),
  #taskId = if_not_exists(#taskId, :taskId),
  #event = if_not_exists(#event, :event),
  #eventTruncated = if_not_exists(#eventTruncated, :eventTruncated),
  #receivedAt = if_not_exists(#receivedAt, :now),
  #updatedAt = if_not_exists(#updatedAt, :now)`;

const isConditionFailure = (err: unknown) =>
  (err as { name?: string } | null)?.name === 'ConditionalCheckFailedException';

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
 * dynalite and DynamoDB Local all implement alike: no transactions, no
 * ReturnValuesOnConditionCheckFailure (dynalite ignores it), no TTL API.
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
   * One UpdateItem that creates the record only if it is absent (every attribute
   * `if_not_exists`) and returns the old image: no old image means this attempt created the
   * record and holds its lease; an old image is the existing record, unchanged, from which the
   * state machine decides without a second read. A conditional PutItem would need
   * ReturnValuesOnConditionCheckFailure for that, which dynalite lacks.
   */
  async begin(record: NewInboxRecord): Promise<BeginResult> {
    const stored = this.storedEvent(record.event);
    const output = await this.call('begin', record, () =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: key(record),
          UpdateExpression: beginUpdate,
          ExpressionAttributeNames: namesIn(beginUpdate),
          ExpressionAttributeValues: {
            ':processing': 'PROCESSING',
            ':one': 1,
            ':zero': 0,
            ':owner': record.owner,
            ':leaseUntil': record.leaseUntil,
            ':payloadHash': record.payloadHash,
            ':eventType': record.eventType,
            ':taskId': record.taskId,
            ':event': stored.event,
            ':eventTruncated': stored.truncated,
            ':now': record.now,
          },
          ReturnValues: 'ALL_OLD',
        }),
      ),
    );
    const old = output.Attributes as Item | undefined;
    if (old) return { created: false, record: decode(old) };
    return {
      created: true,
      record: {
        consumer: record.consumer,
        eventId: record.eventId,
        status: 'PROCESSING',
        attempts: 1,
        leaseOwner: record.owner,
        leaseUntil: record.leaseUntil,
        nextAttemptAt: 0,
        payloadHash: record.payloadHash,
        eventType: record.eventType,
        taskId: record.taskId,
        event: record.event,
        receivedAt: record.now,
        updatedAt: record.now,
      },
    };
  }

  async takeOver(
    k: InboxKey,
    expected: ExpectedState,
    claim: { owner: string; leaseUntil: number; now: number },
  ): Promise<InboxRecord> {
    // The due test is in the condition, not only in the caller's read: a heartbeat that
    // renewed the lease after that read must win.
    const due =
      expected.status === 'PROCESSING'
        ? '#leaseUntil < :now'
        : expected.status === 'FAILED'
          ? '#nextAttemptAt <= :now'
          : 'attribute_not_exists(#eventId)';
    const update =
      'SET #status = :processing, #attempts = #attempts + :one, #leaseOwner = :owner, #leaseUntil = :leaseUntil, #updatedAt = :now';
    const condition = `#status = :expectedStatus AND #leaseOwner = :expectedOwner AND ${due}`;
    try {
      const output = await this.doc.send(
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
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return decode(output.Attributes as Item);
    } catch (err) {
      if (isConditionFailure(err)) throw new InboxRecordChangedError(k, { cause: err });
      throw storeError('takeOver', k, err);
    }
  }

  async renew(k: InboxKey, owner: string, leaseUntil: number, now: number): Promise<void> {
    await this.fenced('renew', k, owner, 'SET #leaseUntil = :leaseUntil, #updatedAt = :now', {
      ':leaseUntil': leaseUntil,
      ':now': now,
    });
  }

  async complete(k: InboxKey, owner: string, at: { now: number; expiresAt: number }): Promise<void> {
    // The lease ends now, so the record reads as finished on the ops page at once.
    await this.fenced(
      'complete',
      k,
      owner,
      'SET #status = :processed, #leaseUntil = :now, #updatedAt = :now, #expiresAt = :expiresAt',
      { ':processed': 'PROCESSED', ':now': at.now, ':expiresAt': at.expiresAt },
    );
  }

  async fail(
    k: InboxKey,
    owner: string,
    failure: { now: number; error: string; nextAttemptAt: number },
  ): Promise<void> {
    await this.fenced(
      'fail',
      k,
      owner,
      'SET #status = :failed, #leaseUntil = :now, #nextAttemptAt = :next, #lastError = :error, #updatedAt = :now',
      { ':failed': 'FAILED', ':now': failure.now, ':next': failure.nextAttemptAt, ':error': failure.error },
    );
  }

  async markDead(
    k: InboxKey,
    expected: ExpectedState,
    death: { now: number; reason: string; expiresAt: number },
  ): Promise<void> {
    await this.fenced(
      'markDead',
      k,
      expected.leaseOwner,
      'SET #status = :dead, #leaseUntil = :now, #lastError = :reason, #updatedAt = :now, #expiresAt = :expiresAt',
      { ':dead': 'DEAD', ':now': death.now, ':reason': death.reason, ':expiresAt': death.expiresAt },
      expected.status,
    );
  }

  async recordPoison(record: PoisonRecord): Promise<void> {
    const stored = this.storedEvent(record.event);
    const item: Item = {
      consumer: record.consumer,
      eventId: record.eventId,
      status: 'DEAD',
      attempts: 0,
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
      lastError: record.reason,
      expiresAt: record.expiresAt,
      poison: true,
      cloudEventId: record.cloudEventId,
    };
    // A redriven poison record (FAILED) is overwritten back to DEAD; one already DEAD is a
    // duplicate delivery of the same poison event.
    const condition = 'attribute_not_exists(#eventId) OR #status <> :dead';
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.table,
          Item: item,
          ConditionExpression: condition,
          ExpressionAttributeNames: namesIn(condition),
          ExpressionAttributeValues: { ':dead': 'DEAD' },
        }),
      );
    } catch (err) {
      if (isConditionFailure(err)) throw new InboxRecordExistsError(record, { cause: err });
      throw storeError('recordPoison', record, err);
    }
  }

  async get(k: InboxKey): Promise<InboxRecord | undefined> {
    const output = await this.call('get', k, () =>
      this.doc.send(new GetCommand({ TableName: this.table, Key: key(k), ConsistentRead: true })),
    );
    return output.Item ? decode(output.Item as Item) : undefined;
  }

  async counts(consumer: string): Promise<InboxCounts> {
    const counts: Record<InboxStatus, number> = { PROCESSING: 0, PROCESSED: 0, FAILED: 0, DEAD: 0 };
    let total = 0;
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.query(consumer, { start, projection: '#status' });
      for (const item of page.Items ?? []) {
        const status = item.status as InboxStatus;
        if (inboxStatuses.includes(status)) counts[status]++;
        total++;
      }
      start = page.LastEvaluatedKey;
    } while (start);
    return { ...counts, total };
  }

  async listDead(consumer: string, page: { limit?: number; cursor?: string } = {}): Promise<InboxPage> {
    const limit = page.limit ?? 50;
    const records: InboxRecord[] = [];
    let start = page.cursor ? decodeCursor(page.cursor, consumer) : undefined;
    do {
      const output = await this.query(consumer, { start, filter: '#status = :dead' });
      for (const item of output.Items ?? []) {
        records.push(decode(item as Item));
        // Resume after the last record returned, not after the page: the page may hold more.
        if (records.length === limit) return { records, cursor: encodeCursor(item as Item) };
      }
      start = output.LastEvaluatedKey;
    } while (start);
    return { records };
  }

  async redrive(k: InboxKey, now: number): Promise<InboxRecord> {
    const update = `SET #status = :failed, #attempts = :zero, #nextAttemptAt = :zero, #leaseOwner = :owner,
      #leaseUntil = :zero, #updatedAt = :now, #lastError = :note REMOVE #expiresAt`;
    const condition = '#status = :dead';
    try {
      const output = await this.doc.send(
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
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return decode(output.Attributes as Item);
    } catch (err) {
      if (!isConditionFailure(err)) throw storeError('redrive', k, err);
      const current = await this.get(k);
      if (!current) throw new InboxRecordNotFoundError(k);
      throw new InboxNotDeadError(k, current.status);
    }
  }

  /** An update that only the live attempt holding the lease may make. */
  private async fenced(
    operation: string,
    k: InboxKey,
    owner: string,
    update: string,
    values: Record<string, unknown>,
    status: InboxStatus = 'PROCESSING',
  ): Promise<void> {
    const condition = '#status = :fenceStatus AND #leaseOwner = :fenceOwner';
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: key(k),
          UpdateExpression: update,
          ConditionExpression: condition,
          ExpressionAttributeNames: namesIn(update, condition),
          ExpressionAttributeValues: { ...values, ':fenceStatus': status, ':fenceOwner': owner },
        }),
      );
    } catch (err) {
      if (isConditionFailure(err)) throw new InboxFencedOutError(k, owner, operation, { cause: err });
      throw storeError(operation, k, err);
    }
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

  private async call<T>(operation: string, k: InboxKey, send: () => Promise<T>): Promise<T> {
    try {
      return await send();
    } catch (err) {
      throw storeError(operation, k, err);
    }
  }

  private storedEvent(event: unknown): { event: string; truncated: boolean } {
    const json = JSON.stringify(event) ?? 'null';
    if (Buffer.byteLength(json) <= this.maxEventBytes) return { event: json, truncated: false };
    return { event: Buffer.from(json).subarray(0, this.maxEventBytes).toString('utf8'), truncated: true };
  }
}

function key(k: InboxKey): { consumer: string; eventId: string } {
  return { consumer: k.consumer, eventId: k.eventId };
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
  let event: unknown = item.event;
  if (!item.eventTruncated && typeof item.event === 'string') {
    try {
      event = JSON.parse(item.event);
    } catch {
      // Written by this adapter as JSON; anything else is shown as the raw string it is.
    }
  }
  return {
    consumer: item.consumer,
    eventId: item.eventId,
    status: item.status,
    attempts: item.attempts,
    leaseOwner: item.leaseOwner,
    leaseUntil: item.leaseUntil,
    nextAttemptAt: item.nextAttemptAt,
    payloadHash: item.payloadHash,
    eventType: item.eventType,
    taskId: item.taskId ?? null,
    event,
    receivedAt: item.receivedAt,
    updatedAt: item.updatedAt,
    ...(item.lastError !== undefined ? { lastError: item.lastError } : {}),
    ...(item.expiresAt !== undefined ? { expiresAt: item.expiresAt } : {}),
    ...(item.poison ? { poison: true, cloudEventId: item.cloudEventId ?? null } : {}),
  };
}

function encodeCursor(item: Item): string {
  return Buffer.from(JSON.stringify({ c: item.consumer, e: item.eventId })).toString('base64url');
}

function decodeCursor(cursor: string, consumer: string): Record<string, unknown> {
  const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as {
    c?: unknown;
    e?: unknown;
  };
  if (parsed.c !== consumer || typeof parsed.e !== 'string') throw new TypeError('invalid inbox cursor');
  return { consumer, eventId: parsed.e };
}
