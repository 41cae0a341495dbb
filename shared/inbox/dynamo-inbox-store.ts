import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import {
  boundedError,
  DynamoInboxTable,
  type DynamoInboxTableOptions,
  decode,
  type InboxItem,
  type InboxItemState,
  inboxTableSchema,
  indexKeys,
  indexValues,
  itemKey,
  namesIn,
  type Refusal,
} from './dynamo-inbox-table';
import { InboxFencedOutError, InboxRecordChangedError, InboxRecordExistsError } from './errors';
import type {
  BeginResult,
  ExpectedState,
  InboxDeath,
  InboxFailure,
  InboxKey,
  InboxRecord,
  InboxStatus,
  InboxStore,
  NewInboxRecord,
  PoisonRecord,
} from './inbox-store';
import { inboxDefaults } from './settings';

/**
 * Invariant `begin` relies on: `state` is present on every item from creation until deletion,
 * and no write REMOVEs it (transitions only SET fields inside it). So a begin whose condition
 * fails changes nothing on the item, whatever its status.
 */
const beginUpdate =
  'SET #state = :state, #consumer = :consumer, #eventId = :eventId, #openKey = :openKey, #openSince = :openSince';
const beginCondition = 'attribute_not_exists(#state)';

/** Options of the consumers' adapter; the defaults suit the Lambda functions. */
export interface DynamoInboxStoreOptions extends DynamoInboxTableOptions {
  /** Events whose JSON is larger are stored truncated (and cannot be redriven as-is). */
  readonly maxStoredEventBytes?: number;
}

/**
 * The inbox's hot path on DynamoDB: the writes the state machine makes, each one conditional
 * UpdateItem or PutItem, which AWS, dynalite and DynamoDB Local all implement alike: no
 * transactions, no TTL API, no Query (the operator's reads are `DynamoInboxOps`). `begin` asks
 * for ReturnValuesOnConditionCheckFailure, which dynalite ignores, so it falls back to a
 * GetItem when a failed condition comes back without the item.
 */
export class DynamoInboxStore extends DynamoInboxTable implements InboxStore {
  private readonly maxEventBytes: number;

  constructor(client: DynamoDBClient, options: DynamoInboxStoreOptions) {
    super(client, options);
    this.maxEventBytes = options.maxStoredEventBytes ?? inboxDefaults.maxStoredEventBytes;
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
    const state: InboxItemState = {
      status: 'PROCESSING',
      attempts: 1,
      firstAttemptAt: record.now,
      permanentFailures: 0,
      leaseOwner: record.owner,
      leaseUntil: record.leaseUntil,
      nextAttemptAt: 0,
      payloadHash: record.payloadHash,
      eventType: record.eventType,
      subject: record.subject,
      event: stored.event,
      eventTruncated: stored.truncated,
      receivedAt: record.now,
      updatedAt: record.now,
    };
    const sent = await this.send('begin', record, () =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: itemKey(record),
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
      const created: InboxItem = {
        ...itemKey(record),
        consumer: record.consumer,
        eventId: record.eventId,
        state,
      };
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
          Key: itemKey(k),
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
    if (!sent.refused) return decode(sent.output.Attributes as InboxItem);
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
    const item: InboxItem = {
      ...itemKey(record),
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
        subject: record.subject,
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
          Key: itemKey(k),
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
  private async refusedItem(
    operation: string,
    k: InboxKey,
    refusal: Refusal,
  ): Promise<InboxItem | undefined> {
    return refusal.item ?? this.getItem(operation, k);
  }

  /** The event as the item keeps it: its JSON, cut to the size limit when larger. */
  private storedEvent(event: unknown): { event: string; truncated: boolean } {
    const json = JSON.stringify(event) ?? 'null';
    if (Buffer.byteLength(json) <= this.maxEventBytes) return { event: json, truncated: false };
    return { event: Buffer.from(json).subarray(0, this.maxEventBytes).toString('utf8'), truncated: true };
  }
}

/** True when `item` is in `status` under `owner`: what this attempt's own landed write left. */
function holds(item: InboxItem, status: InboxStatus, owner: string): boolean {
  return item.state?.status === status && item.state.leaseOwner === owner;
}
