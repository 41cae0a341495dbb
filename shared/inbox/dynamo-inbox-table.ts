/**
 * The inbox table as both DynamoDB adapters see it: its schema and keys, the item a record is
 * stored as and how it decodes, and the one place a request meets DynamoDB's errors. The
 * consumers' adapter (`dynamo-inbox-store.ts`) writes it; the operator's (`dynamo-inbox-ops.ts`)
 * reads it and redrives. Each fact is here once, so the two never disagree on the layout.
 */

import { createHash } from 'node:crypto';
import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { InboxError } from './errors';
import type { FailureKind } from './failure-kind';
import type { InboxKey, InboxRecord, InboxStatus } from './inbox-store';

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
export function openShard(eventId: string, shards: number): number {
  return createHash('sha256').update(eventId).digest().readUInt32BE(0) % shards;
}

/** A key value of the operator's index: `consumer`'s records in `status` on `shard`. */
export const openKey = (consumer: string, status: OpenStatus, shard: number): string =>
  `${consumer}#${status}#${shard}`;

/** Every key value of the operator's index for `consumer`'s records in `status`: what an ops read queries. */
export function openKeys(consumer: string, status: OpenStatus, shards: number): string[] {
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
export interface InboxItem {
  [inboxTableSchema.partitionKey]: string;
  consumer: string;
  eventId: string;
  state: InboxItemState;
  /** Present exactly while the record is not `PROCESSED`: the operator's index's keys. */
  [inboxTableSchema.openIndex.partitionKey]?: string;
  [inboxTableSchema.openIndex.sortKey]?: string;
  [inboxTableSchema.ttlAttribute]?: number;
}

/** The record inside an item, as the map attribute `state` holds it. */
export interface InboxItemState {
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
  /** Absent on records written before it had this name: the kept event's `detail.subject` stands in. */
  subject?: string | null;
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
export function namesIn(...expressions: (string | undefined)[]): Record<string, string> {
  const text = expressions.join(' ');
  const used: Record<string, string> = {};
  for (const placeholder of Object.keys(names) as Name[]) {
    if (new RegExp(`${placeholder}\\b`).test(text)) used[placeholder] = names[placeholder];
  }
  return used;
}

/** Longest `lastError` a record keeps, in UTF-8 bytes (the ellipsis of a cut one included): a reason quoting a huge field must not pass the 400 KB item limit. */
export const maxErrorBytes = 4 * 1024;

const isConditionFailure = (err: unknown) =>
  (err as { name?: string } | null)?.name === 'ConditionalCheckFailedException';

/**
 * A conditional write DynamoDB refused: its error, and the item it was refused on when DynamoDB
 * returned it (ReturnValuesOnConditionCheckFailure; dynalite ignores that and returns none).
 */
export interface Refusal {
  readonly cause: unknown;
  readonly item: InboxItem | undefined;
}

/** What {@link DynamoInboxTable.send} makes of one request: its output, or the refusal of its condition. */
export type Sent<T> = { readonly output: T; readonly refused?: undefined } | { readonly refused: Refusal };

/** Options both adapters take; the defaults suit the Lambda functions. */
export interface DynamoInboxTableOptions {
  readonly tableName: string;
  /**
   * Shards of each key of the operator's index: every adapter over one table must use the same
   * (its topology's `inbox.openIndexShards` on AWS; the local runtime's `localOpenIndexShards`).
   */
  readonly openIndexShards: number;
}

/**
 * What both adapters share: the document client over the `DynamoDBClient` it is given, the
 * table, the index's shard count, and the one place their requests meet DynamoDB's errors.
 */
export abstract class DynamoInboxTable {
  protected readonly doc: DynamoDBDocumentClient;
  protected readonly table: string;
  protected readonly shards: number;

  constructor(client: DynamoDBClient, options: DynamoInboxTableOptions) {
    this.doc = DynamoDBDocumentClient.from(client, {
      marshallOptions: { removeUndefinedValues: true },
    });
    this.table = options.tableName;
    this.shards = options.openIndexShards;
    if (!Number.isInteger(this.shards) || this.shards < 1) {
      throw new TypeError(`openIndexShards must be a positive integer, not ${this.shards}`);
    }
  }

  /** A consistent read of the item of record `k`, for `operation`. */
  protected async getItem(operation: string, k: InboxKey): Promise<InboxItem | undefined> {
    const output = await this.call(operation, k, () =>
      this.doc.send(new GetCommand({ TableName: this.table, Key: itemKey(k), ConsistentRead: true })),
    );
    return output.Item as InboxItem | undefined;
  }

  /**
   * Sends one request of `operation` on `k`: the one place the adapters meet DynamoDB's errors.
   * A refused condition comes back as `refused` for the write to judge (a duplicate, its own
   * resend that landed, a lost race); every other failure is a STORE_ERROR.
   */
  protected async send<T>(operation: string, k: InboxKey, request: () => Promise<T>): Promise<Sent<T>> {
    try {
      return { output: await request() };
    } catch (err) {
      if (!isConditionFailure(err)) throw storeError(operation, k, err);
      const returned = (err as { Item?: Record<string, AttributeValue> }).Item;
      return { refused: { cause: err, item: returned ? (unmarshall(returned) as InboxItem) : undefined } };
    }
  }

  /** {@link send} for a request without a condition (reads): any failure is a STORE_ERROR. */
  protected async call<T>(operation: string, k: InboxKey, request: () => Promise<T>): Promise<T> {
    const sent = await this.send(operation, k, request);
    if (sent.refused) throw storeError(operation, k, sent.refused.cause);
    return sent.output;
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

/** The table key of record `k`. */
export function itemKey(k: InboxKey): Pick<InboxItem, typeof inboxTableSchema.partitionKey> {
  return { [inboxTableSchema.partitionKey]: recordKey(k) };
}

/** The index keys of record `k` in `status` since `at`, as an item holds them. */
export function indexKeys(
  k: InboxKey,
  status: OpenStatus,
  at: number,
  shards: number,
): Pick<
  InboxItem,
  typeof inboxTableSchema.openIndex.partitionKey | typeof inboxTableSchema.openIndex.sortKey
> {
  return {
    [inboxTableSchema.openIndex.partitionKey]: openKey(k.consumer, status, openShard(k.eventId, shards)),
    [inboxTableSchema.openIndex.sortKey]: openSince(at, k.eventId),
  };
}

/** {@link indexKeys} as the values `:openKey` and `:openSince` of an update. */
export function indexValues(
  k: InboxKey,
  status: OpenStatus,
  at: number,
  shards: number,
): Record<string, string> {
  const keys = indexKeys(k, status, at, shards);
  return {
    ':openKey': keys[inboxTableSchema.openIndex.partitionKey] as string,
    ':openSince': keys[inboxTableSchema.openIndex.sortKey] as string,
  };
}

/** `err` of one request as the inbox's STORE_ERROR (an inbox error already is one passes as it is). */
export function storeError(operation: string, k: InboxKey, err: unknown): InboxError {
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

/** The CloudEvent `subject` inside a kept EventBridge event, if it has a string one. */
function keptSubject(event: unknown): string | null {
  const subject = (event as { detail?: { subject?: unknown } } | null)?.detail?.subject;
  return typeof subject === 'string' ? subject : null;
}

/** The record an item holds, its stored event parsed back when it was kept whole. */
export function decode(item: InboxItem): InboxRecord {
  const st = item.state;
  let event: unknown = st.event;
  if (!st.eventTruncated && typeof st.event === 'string') {
    try {
      event = JSON.parse(st.event);
    } catch {
      // Written by the store as JSON; anything else is shown as the raw string it is.
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
    subject: st.subject ?? keptSubject(event),
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

/** A dead-list page's cursor: the consumer and the index sort key the next page resumes after. */
export function encodeCursor(consumer: string, after: string): string {
  return Buffer.from(JSON.stringify({ c: consumer, a: after })).toString('base64url');
}

/** The index sort key a page resumes after; a cursor of another consumer is refused. */
export function decodeCursor(cursor: string, consumer: string): string {
  const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as {
    c?: unknown;
    a?: unknown;
  };
  if (parsed.c !== consumer || typeof parsed.a !== 'string') throw new TypeError('invalid inbox cursor');
  return parsed.a;
}
