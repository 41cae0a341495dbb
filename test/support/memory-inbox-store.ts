import { randomUUID } from 'node:crypto';
import { topology } from '../../functions/topology';
import {
  boundedError,
  type OpenStatus,
  openKey,
  openShard,
  openSince,
  recordKey,
} from '../../shared/inbox/dynamo-inbox-table';
import {
  InboxFencedOutError,
  InboxRecordChangedError,
  InboxRecordExistsError,
} from '../../shared/inbox/errors';
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
} from '../../shared/inbox/inbox-store';
import { inboxDefaults } from '../../shared/inbox/settings';

/**
 * One item as the DynamoDB adapter lays it out: the record, the operator's index keys (present
 * exactly while the record is not `PROCESSED`) and the TTL attribute. The event is kept as the
 * JSON text it is stored as, so a caller's later change to its object never reaches the store.
 */
export interface MemoryItem {
  record: Mutable<Omit<InboxRecord, 'event'>>;
  eventJson: string;
  eventTruncated: boolean;
  index?: IndexKeys;
}

/** An item's keys in the operator's index, as the adapter writes them. */
export interface IndexKeys {
  readonly openKey: string;
  readonly openSince: string;
}

/** The index keys of record `k` in `status` since `at`: the adapter's own key functions. */
export function indexKeys(k: InboxKey, status: OpenStatus, at: number): IndexKeys {
  return {
    openKey: openKey(k.consumer, status, openShard(k.eventId, topology.inbox.openIndexShards)),
    openSince: openSince(at, k.eventId),
  };
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** One entry of the operator's index: its keys and the event id of its record. */
export interface IndexEntry extends IndexKeys {
  readonly eventId: string;
}

/**
 * The table both in-memory adapters work on, as the two DynamoDB adapters share one: the items
 * by the adapter's partition key, `<consumer>#<eventId>`.
 */
export class MemoryInboxTable {
  private readonly items = new Map<string, MemoryItem>();

  /** The item of record `k`, the stored object itself. */
  item(k: InboxKey): MemoryItem | undefined {
    return this.items.get(recordKey(k));
  }

  /** Whether record `k` has an item. */
  has(k: InboxKey): boolean {
    return this.items.has(recordKey(k));
  }

  /** Stores `item` under its record's key, replacing any item there. */
  put(item: MemoryItem): void {
    this.items.set(recordKey(item.record), item);
  }

  /**
   * The entries of `<consumer>#<status>#<shard>` for every shard, merged in sort-key order, as
   * an ops read sees them (a scan of the map is this double's shortcut, not the adapter's way).
   */
  indexed(consumer: string, status: OpenStatus): MemoryItem[] {
    const prefix = `${consumer}#${status}#`;
    return [...this.items.values()]
      .filter((item) => item.index?.openKey.startsWith(prefix))
      .sort((a, b) => byteOrder(a.index?.openSince ?? '', b.index?.openSince ?? ''));
  }
}

/** Options of the in-memory store, as the DynamoDB adapter takes them. */
export interface MemoryInboxStoreOptions {
  /** Events whose JSON is larger are stored truncated, as a string (the adapter's limit by default). */
  readonly maxStoredEventBytes?: number;
  /** Another store whose items this one shares, as two adapters share one table. */
  readonly sharing?: MemoryInboxStore;
}

/**
 * The inbox's hot-path port in memory, for tests that drive the state machine's timing
 * (heartbeat, backoff, leases, take-over) on fake timers: no I/O, so nothing waits on real time.
 * It keeps the DynamoDB adapter's conditions to the letter (each write is one atomic
 * check-and-set, as a conditional UpdateItem is), its own-write recognition of SDK resends, its
 * sparse index and its TTL attribute, and it passes the same contract suite as dynalite and
 * DynamoDB Local (test/integration/inbox-store-contract.test.ts). Like the adapter it never
 * reads a clock: every time comes from the caller. TTL deletion itself is not simulated (nor is
 * it on the local engines): records past `expiresAt` stay. The operator's reads are
 * `MemoryInboxOps` (memory-inbox-ops.ts), over the same table.
 */
export class MemoryInboxStore implements InboxStore {
  /** The items, shared with `options.sharing` when given. */
  readonly table: MemoryInboxTable;
  private readonly maxEventBytes: number;

  constructor(options: MemoryInboxStoreOptions = {}) {
    this.table = options.sharing?.table ?? new MemoryInboxTable();
    this.maxEventBytes = options.maxStoredEventBytes ?? inboxDefaults.maxStoredEventBytes;
  }

  async begin(record: NewInboxRecord): Promise<BeginResult> {
    const existing = this.table.item(record);
    if (existing) {
      // A resend of this attempt's own begin finds its own lease: it counts as created.
      if (holds(existing, 'PROCESSING', record.owner)) return { created: true, record: decode(existing) };
      return { created: false, record: decode(existing) };
    }
    const stored = this.storedEvent(record.event);
    const item: MemoryItem = {
      record: {
        consumer: record.consumer,
        eventId: record.eventId,
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
        receivedAt: record.now,
        updatedAt: record.now,
      },
      ...stored,
      index: indexKeys(record, 'PROCESSING', record.now),
    };
    this.table.put(item);
    return { created: true, record: { ...decode(item), event: record.event } };
  }

  async takeOver(
    k: InboxKey,
    expected: ExpectedState,
    claim: { owner: string; leaseUntil: number; now: number },
  ): Promise<InboxRecord> {
    if (expected.status !== 'PROCESSING' && expected.status !== 'FAILED') {
      throw new TypeError(`only PROCESSING and FAILED records can be taken over, not ${expected.status}`);
    }
    const item = this.table.item(k);
    const r = item?.record;
    const due =
      expected.status === 'PROCESSING'
        ? (r?.leaseUntil ?? 0) < claim.now
        : (r?.nextAttemptAt ?? 0) <= claim.now;
    if (!item || !r || r.status !== expected.status || r.leaseOwner !== expected.leaseOwner || !due) {
      // A resend of this take-over after it landed finds the record already this owner's.
      if (item && holds(item, 'PROCESSING', claim.owner)) return decode(item);
      throw new InboxRecordChangedError(k);
    }
    this.update(item, {
      status: 'PROCESSING',
      attempts: r.attempts + 1,
      leaseOwner: claim.owner,
      leaseUntil: claim.leaseUntil,
      updatedAt: claim.now,
    });
    item.index = indexKeys(k, 'PROCESSING', claim.now);
    return decode(item);
  }

  async renew(k: InboxKey, owner: string, leaseUntil: number, now: number): Promise<void> {
    this.fenced('renew', k, owner, (item) => this.update(item, { leaseUntil, updatedAt: now }));
  }

  async complete(k: InboxKey, owner: string, at: { now: number; expiresAt: number }): Promise<void> {
    this.fenced(
      'complete',
      k,
      owner,
      (item) => {
        this.update(item, { status: 'PROCESSED', updatedAt: at.now, expiresAt: at.expiresAt });
        delete item.index;
      },
      { landed: 'PROCESSED' },
    );
  }

  async fail(k: InboxKey, owner: string, failure: InboxFailure): Promise<void> {
    this.fenced(
      'fail',
      k,
      owner,
      (item) => {
        this.update(item, {
          status: 'FAILED',
          leaseUntil: failure.now,
          nextAttemptAt: failure.nextAttemptAt,
          lastError: boundedError(failure.error),
          lastFailure: failure.kind,
          permanentFailures: failure.permanentFailures,
          updatedAt: failure.now,
        });
        item.index = indexKeys(k, 'FAILED', failure.firstAttemptAt);
      },
      { landed: 'FAILED' },
    );
  }

  async markDead(k: InboxKey, expected: ExpectedState, death: InboxDeath): Promise<void> {
    const lapsedBy = expected.status === 'PROCESSING' ? death.leaseLapsedBy : undefined;
    this.fenced(
      'markDead',
      k,
      expected.leaseOwner,
      (item) => {
        this.update(item, {
          status: 'DEAD',
          leaseUntil: death.now,
          lastError: boundedError(death.reason),
          updatedAt: death.now,
          expiresAt: death.expiresAt,
        });
        item.index = indexKeys(k, 'DEAD', death.now);
      },
      {
        landed: 'DEAD',
        status: expected.status,
        also: (r) => lapsedBy === undefined || r.leaseUntil < lapsedBy,
      },
    );
  }

  async recordPoison(record: PoisonRecord): Promise<void> {
    // A redriven poison record (FAILED) is overwritten back to DEAD; one already DEAD is a
    // duplicate delivery of the same poison event.
    if (this.table.item(record)?.record.status === 'DEAD') throw new InboxRecordExistsError(record);
    this.table.put({
      record: {
        consumer: record.consumer,
        eventId: record.eventId,
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
        receivedAt: record.now,
        updatedAt: record.now,
        lastError: boundedError(record.reason),
        expiresAt: record.expiresAt,
        poison: true,
        cloudEventId: record.cloudEventId,
      },
      ...this.storedEvent(record.event),
      index: indexKeys(record, 'DEAD', record.now),
    });
  }

  /** A record as it is now: how a test looks at what the state machine left (the port itself never reads). */
  async get(k: InboxKey): Promise<InboxRecord | undefined> {
    const item = this.table.item(k);
    return item ? decode(item) : undefined;
  }

  /**
   * The index entries of `consumer`'s records in `status`, every shard, in the index's order:
   * what Queries of those key values return on DynamoDB (the contract compares the two).
   */
  indexEntries(consumer: string, status: OpenStatus): IndexEntry[] {
    return this.table.indexed(consumer, status).map((item) => ({
      eventId: item.record.eventId,
      ...(item.index as IndexKeys),
    }));
  }

  /**
   * A write that only the live attempt holding the lease may make, with the adapter's
   * condition (status and owner, plus `also`). A refusal that finds the record already in the
   * `landed` status under `owner` is this attempt's own write resent after it landed: done.
   */
  private fenced(
    operation: string,
    k: InboxKey,
    owner: string,
    write: (item: MemoryItem) => void,
    options: {
      landed?: InboxStatus;
      status?: InboxStatus;
      also?: (record: MemoryItem['record']) => boolean;
    } = {},
  ): void {
    const item = this.table.item(k);
    const r = item?.record;
    const allowed =
      r !== undefined &&
      r.status === (options.status ?? 'PROCESSING') &&
      r.leaseOwner === owner &&
      (options.also?.(r) ?? true);
    if (item && allowed) {
      write(item);
      return;
    }
    if (item && options.landed && holds(item, options.landed, owner)) return;
    throw new InboxFencedOutError(k, owner, operation);
  }

  private update(item: MemoryItem, changes: Partial<MemoryItem['record']>): void {
    Object.assign(item.record, changes);
  }

  private storedEvent(event: unknown): { eventJson: string; eventTruncated: boolean } {
    const json = JSON.stringify(event) ?? 'null';
    if (Buffer.byteLength(json) <= this.maxEventBytes) return { eventJson: json, eventTruncated: false };
    return {
      eventJson: Buffer.from(json).subarray(0, this.maxEventBytes).toString('utf8'),
      eventTruncated: true,
    };
  }
}

/** A copy of the item's record: callers never hold the stored object. */
export function decode(item: MemoryItem): InboxRecord {
  const event: unknown = item.eventTruncated ? item.eventJson : JSON.parse(item.eventJson);
  return { ...structuredClone(item.record), event };
}

/** True when `item` is in `status` under `owner`: what this attempt's own landed write left. */
function holds(item: MemoryItem, status: InboxStatus, owner: string): boolean {
  return item.record.status === status && item.record.leaseOwner === owner;
}

/** DynamoDB orders string sort keys by their UTF-8 bytes. */
export function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}
