import { randomUUID } from 'node:crypto';
import { GetItemCommand, QueryCommand } from '@aws-sdk/client-dynamodb';
import { beforeEach, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import {
  inboxTableSchema,
  type OpenStatus,
  openKeys,
  openShard,
  openSinceTime,
  recordKey,
} from '../../shared/inbox/dynamo-inbox-table';
import {
  InboxError,
  InboxFencedOutError,
  InboxNotDeadError,
  InboxRecordChangedError,
  InboxRecordExistsError,
  InboxRecordNotFoundError,
} from '../../shared/inbox/errors';
import { type InboxOps, type InboxPresence, openCounts } from '../../shared/inbox/inbox-ops';
import type { InboxKey, InboxStore, NewInboxRecord, PoisonRecord } from '../../shared/inbox/inbox-store';
import { describeEachEngine, dynamoClient } from '../support/dynamo';
import { MemoryInboxOps } from '../support/memory-inbox-ops';
import { type IndexEntry, MemoryInboxStore } from '../support/memory-inbox-store';

const t0 = Date.parse('2026-11-30T12:00:00.000Z');
/** How most of these failures failed (records begun at t0): only the failure test itself looks at it. */
const transient = { kind: 'transient', permanentFailures: 0, firstAttemptAt: t0 } as const;
const shards = topology.inbox.openIndexShards;

/** `n` event ids whose records share one shard of the operator's index (to page within a key value). */
function idsOnOneShard(n: number, shard = 0): string[] {
  const ids: string[] = [];
  for (let i = 0; ids.length < n; i++)
    if (openShard(`same-shard-${i}`, topology.inbox.openIndexShards) === shard) ids.push(`same-shard-${i}`);
  return ids;
}

/** One implementation of the inbox ports under the contract, and what the contract reads beside them. */
interface ContractSubject {
  /** A store over the suite's one table; `options` as the DynamoDB adapter takes them. */
  store(options?: { readonly maxStoredEventBytes?: number }): InboxStore;
  /** The operator's reads and redrive over the same table. */
  ops(): InboxOps & InboxPresence;
  /**
   * The index entries of `consumer`'s `status` records, read from the index itself (every
   * shard), in sort-key order.
   */
  indexed(consumer: string, status: OpenStatus): Promise<IndexEntry[]>;
  /** The table's partition key of the stored record `k` (undefined when there is none). */
  storedKey(k: InboxKey): Promise<string | undefined>;
}

describeEachEngine('inbox store contract', (fixture) => {
  inboxStoreContract(() => ({
    store: (options) => new DynamoInboxStore(fixture().client, { ...fixture().inbox, ...options }),
    ops: () => new DynamoInboxOps(fixture().client, { ...fixture().inbox, pageSize: 3 }),
    async indexed(consumer, status) {
      const { partitionKey, sortKey } = inboxTableSchema.openIndex;
      const shardsRead = await Promise.all(
        openKeys(consumer, status, topology.inbox.openIndexShards).map(async (value) => {
          const raw = await fixture().client.send(
            new QueryCommand({
              TableName: fixture().inboxTable,
              IndexName: inboxTableSchema.openIndex.name,
              KeyConditionExpression: '#k = :k',
              ExpressionAttributeNames: { '#k': partitionKey },
              ExpressionAttributeValues: { ':k': { S: value } },
            }),
          );
          return raw.Items ?? [];
        }),
      );
      return shardsRead
        .flat()
        .map((i) => ({
          // Keys only: the event id is the table key's part after the consumer.
          eventId: String(i[inboxTableSchema.partitionKey]?.S).slice(consumer.length + 1),
          openKey: String(i[partitionKey]?.S),
          openSince: String(i[sortKey]?.S),
        }))
        .sort((a, b) => Buffer.compare(Buffer.from(a.openSince), Buffer.from(b.openSince)));
    },
    async storedKey(k) {
      const { Item } = await fixture().client.send(
        new GetItemCommand({
          TableName: fixture().inboxTable,
          Key: { [inboxTableSchema.partitionKey]: { S: recordKey(k) } },
          ConsistentRead: true,
        }),
      );
      return Item?.[inboxTableSchema.partitionKey]?.S;
    },
  }));

  it("reads a consumer's figures with one Limit 1 Query per shard and status, however many records it processed", async () => {
    const client = dynamoClient(fixture().endpoint);
    const queries: { limit?: number; count: boolean }[] = [];
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'QueryCommand') {
          const input = args.input as { Limit?: number; Select?: string };
          queries.push({ limit: input.Limit, count: input.Select === 'COUNT' });
        }
        return next(args);
      },
      { step: 'initialize', name: 'countQueries' },
    );
    const store = new DynamoInboxStore(client, fixture().inbox);
    const ops = new DynamoInboxOps(client, { ...fixture().inbox, pageSize: 3 });
    const consumer = `c-${randomUUID().slice(0, 8)}`;
    const done = Array.from({ length: 40 }, () => randomUUID());
    for (const eventId of done) {
      await store.begin({
        consumer,
        eventId,
        owner: 'o',
        leaseUntil: t0 + 1,
        payloadHash: 'h',
        eventType: 't',
        subject: null,
        event: {},
        now: t0,
      });
      await store.complete({ consumer, eventId }, 'o', { now: t0, expiresAt: 1 });
    }
    queries.length = 0;
    expect(openCounts(await ops.openFigures(consumer))).toEqual({ PROCESSING: 0, FAILED: 0, DEAD: 0 });
    // 3 statuses x every shard, each one Query of one entry: the processed history is not read.
    expect(queries).toEqual(Array.from({ length: 3 * shards }, () => ({ limit: 1, count: false })));
    client.destroy();
  });

  it('turns other SDK errors into STORE_ERROR carrying the cause', async () => {
    const missing = new DynamoInboxStore(fixture().client, {
      tableName: 'no-such-table',
      openIndexShards: topology.inbox.openIndexShards,
    });
    const err = await missing
      .begin({
        consumer: 'c',
        eventId: randomUUID(),
        owner: 'owner-a',
        leaseUntil: t0 + 10_000,
        payloadHash: 'hash-1',
        eventType: 'content.approved',
        subject: null,
        event: {},
        now: t0,
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InboxError);
    expect(err).toMatchObject({ code: 'STORE_ERROR', details: { errorName: 'ResourceNotFoundException' } });
    expect((err as Error).cause).toBeDefined();
  });
});

describe('inbox store contract [memory]', () => {
  let memory: MemoryInboxStore;
  beforeEach(() => {
    memory = new MemoryInboxStore();
  });
  inboxStoreContract(() => ({
    store: (options) => (options ? new MemoryInboxStore({ ...options, sharing: memory }) : memory),
    ops: () => new MemoryInboxOps(memory),
    indexed: async (consumer, status) => memory.indexEntries(consumer, status),
    storedKey: async (k) => ((await memory.get(k)) ? recordKey(k) : undefined),
  }));
});

/**
 * The inbox ports' contract: what the state machine relies on from every store, and what the
 * operator reads of what it wrote, held alike by the DynamoDB adapters on each engine and by the
 * in-memory ones the timing tests run on.
 */
function inboxStoreContract(subject: () => ContractSubject): void {
  let store: InboxStore;
  let ops: InboxOps & InboxPresence;
  let consumer: string;

  beforeEach(() => {
    store = subject().store();
    ops = subject().ops();
    // A consumer name per test keeps counts and dead lists independent on the shared table.
    consumer = `c-${randomUUID().slice(0, 8)}`;
  });

  function fresh(overrides: Partial<NewInboxRecord> = {}): NewInboxRecord {
    return {
      consumer,
      eventId: randomUUID(),
      owner: 'owner-a',
      leaseUntil: t0 + 10_000,
      payloadHash: 'hash-1',
      eventType: 'content.approved',
      subject: randomUUID(),
      event: { id: 'bus-1', detail: { id: 'x', data: { n: 1, nested: ['a', null] } } },
      now: t0,
      ...overrides,
    };
  }

  function poison(overrides: Partial<PoisonRecord> = {}): PoisonRecord {
    return {
      consumer,
      eventId: `${randomUUID()}#poison#abc`,
      cloudEventId: null,
      subject: null,
      eventType: 'unknown',
      payloadHash: 'hash-p',
      reason: 'detail is not a pipeline CloudEvent',
      event: { junk: true },
      now: t0,
      expiresAt: t0 / 1000 + 100,
      ...overrides,
    };
  }

  const keyOf = (r: InboxKey): InboxKey => ({ consumer: r.consumer, eventId: r.eventId });

  describe('begin', () => {
    it('creates a PROCESSING record at attempt 1 owned by the caller, with the event stored', async () => {
      const record = fresh();
      const begun = await store.begin(record);
      expect(begun.created).toBe(true);
      const stored = await ops.get(keyOf(record));
      expect(stored).toMatchObject({
        status: 'PROCESSING',
        attempts: 1,
        leaseOwner: 'owner-a',
        leaseUntil: t0 + 10_000,
        nextAttemptAt: 0,
        payloadHash: 'hash-1',
        subject: record.subject,
        event: record.event,
        receivedAt: t0,
      });
      expect(stored?.expiresAt).toBeUndefined();
    });

    it('returns the existing record and changes nothing on it', async () => {
      const first = fresh();
      await store.begin(first);
      const second = await store.begin({ ...first, owner: 'owner-b', payloadHash: 'hash-2', now: t0 + 5 });
      expect(second.created).toBe(false);
      expect(second.record).toMatchObject({ leaseOwner: 'owner-a', payloadHash: 'hash-1', attempts: 1 });
      expect(await ops.get(keyOf(first))).toEqual(second.record);
    });

    it('leaves a finished record finished: status, TTL and owner stay', async () => {
      const record = fresh();
      await store.begin(record);
      await store.complete(keyOf(record), 'owner-a', { now: t0 + 1, expiresAt: 1_900_000_000 });
      const again = await store.begin({ ...record, owner: 'owner-b', now: t0 + 2 });
      expect(again).toMatchObject({ created: false, record: { status: 'PROCESSED' } });
      expect(await ops.get(keyOf(record))).toMatchObject({
        status: 'PROCESSED',
        leaseOwner: 'owner-a',
        expiresAt: 1_900_000_000,
      });
    });

    it('stores an event larger than the limit truncated, as a string', async () => {
      const small = subject().store({ maxStoredEventBytes: 100 });
      const record = fresh({ event: { padding: 'x'.repeat(500) } });
      await small.begin(record);
      const stored = await ops.get(keyOf(record));
      expect(typeof stored?.event).toBe('string');
      expect(String(stored?.event)).toHaveLength(100);
    });
  });

  describe('take-over', () => {
    it('takes an expired PROCESSING lease over: new owner, attempts + 1', async () => {
      const record = fresh();
      await store.begin(record);
      const taken = await store.takeOver(
        keyOf(record),
        { status: 'PROCESSING', leaseOwner: 'owner-a' },
        { owner: 'owner-b', leaseUntil: t0 + 40_000, now: t0 + 10_001 },
      );
      expect(taken).toMatchObject({
        status: 'PROCESSING',
        attempts: 2,
        leaseOwner: 'owner-b',
        leaseUntil: t0 + 40_000,
      });
    });

    it('refuses a live lease, a backoff not yet passed, and a state other than the one observed', async () => {
      const record = fresh();
      await store.begin(record);
      const claim = { owner: 'owner-b', leaseUntil: t0 + 40_000, now: t0 + 9_999 };
      await expect(
        store.takeOver(keyOf(record), { status: 'PROCESSING', leaseOwner: 'owner-a' }, claim),
      ).rejects.toBeInstanceOf(InboxRecordChangedError);
      await expect(
        store.takeOver(
          keyOf(record),
          { status: 'PROCESSING', leaseOwner: 'someone-else' },
          { ...claim, now: t0 + 20_000 },
        ),
      ).rejects.toBeInstanceOf(InboxRecordChangedError);

      await store.fail(keyOf(record), 'owner-a', {
        now: t0 + 1,
        error: 'boom',
        nextAttemptAt: t0 + 5_000,
        ...transient,
      });
      await expect(
        store.takeOver(
          keyOf(record),
          { status: 'FAILED', leaseOwner: 'owner-a' },
          { ...claim, now: t0 + 4_999 },
        ),
      ).rejects.toBeInstanceOf(InboxRecordChangedError);
      const taken = await store.takeOver(
        keyOf(record),
        { status: 'FAILED', leaseOwner: 'owner-a' },
        { ...claim, now: t0 + 5_000 },
      );
      expect(taken).toMatchObject({
        status: 'PROCESSING',
        attempts: 2,
        leaseOwner: 'owner-b',
        lastError: 'boom',
      });
    });

    it('takes a lease over only once it has ended, and a backoff from the moment it ends', async () => {
      const record = fresh(); // lease until t0 + 10 s
      await store.begin(record);
      const k = keyOf(record);
      const claim = { owner: 'owner-b', leaseUntil: t0 + 40_000 };
      // processOnce treats a lease as live through its last millisecond; so does the write.
      await expect(
        store.takeOver(k, { status: 'PROCESSING', leaseOwner: 'owner-a' }, { ...claim, now: t0 + 10_000 }),
      ).rejects.toBeInstanceOf(InboxRecordChangedError);
      await store.takeOver(
        k,
        { status: 'PROCESSING', leaseOwner: 'owner-a' },
        { ...claim, now: t0 + 10_001 },
      );
      await store.fail(k, 'owner-b', {
        now: t0 + 10_002,
        error: 'e',
        nextAttemptAt: t0 + 12_000,
        ...transient,
      });
      const taken = await store.takeOver(
        k,
        { status: 'FAILED', leaseOwner: 'owner-b' },
        { owner: 'owner-c', leaseUntil: t0 + 50_000, now: t0 + 12_000 },
      );
      expect(taken).toMatchObject({ attempts: 3, leaseOwner: 'owner-c' });
    });

    it('lets exactly one of two racing take-overs win', async () => {
      const record = fresh();
      await store.begin(record);
      const expected = { status: 'PROCESSING' as const, leaseOwner: 'owner-a' };
      const results = await Promise.allSettled(
        ['owner-b', 'owner-c'].map((owner) =>
          store.takeOver(keyOf(record), expected, { owner, leaseUntil: t0 + 50_000, now: t0 + 20_000 }),
        ),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const lost = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(lost.reason).toBeInstanceOf(InboxRecordChangedError);
    });
  });

  describe('fenced writes', () => {
    it('renews, completes and fails only for the lease owner', async () => {
      const record = fresh();
      await store.begin(record);
      const k = keyOf(record);
      await store.renew(k, 'owner-a', t0 + 99_000, t0 + 1);
      expect((await ops.get(k))?.leaseUntil).toBe(t0 + 99_000);
      await expect(store.renew(k, 'owner-b', t0 + 1, t0 + 1)).rejects.toBeInstanceOf(InboxFencedOutError);
      await expect(store.complete(k, 'owner-b', { now: t0, expiresAt: 1 })).rejects.toBeInstanceOf(
        InboxFencedOutError,
      );
      await expect(
        store.fail(k, 'owner-b', { now: t0, error: 'x', nextAttemptAt: 0, ...transient }),
      ).rejects.toMatchObject({
        code: 'FENCED_OUT',
        details: { operation: 'fail', owner: 'owner-b' },
      });
      await store.complete(k, 'owner-a', { now: t0 + 2, expiresAt: 1_900_000_000 });
      expect(await ops.get(k)).toMatchObject({
        status: 'PROCESSED',
        updatedAt: t0 + 2,
        expiresAt: 1_900_000_000,
      });
      // Finished: even the former owner cannot write any more.
      await expect(store.renew(k, 'owner-a', t0 + 5, t0 + 3)).rejects.toBeInstanceOf(InboxFencedOutError);
    });

    it('fail records the error and when the next attempt may start', async () => {
      const record = fresh();
      await store.begin(record);
      await store.fail(keyOf(record), 'owner-a', {
        now: t0 + 3,
        firstAttemptAt: t0,
        error: 'Error: down',
        nextAttemptAt: t0 + 2_000,
        kind: 'permanent',
        permanentFailures: 1,
      });
      expect(await ops.get(keyOf(record))).toMatchObject({
        status: 'FAILED',
        lastError: 'Error: down',
        nextAttemptAt: t0 + 2_000,
        leaseUntil: t0 + 3,
        lastFailure: 'permanent',
        permanentFailures: 1,
        firstAttemptAt: record.now,
      });
    });

    it('markDead moves exactly the expected state to DEAD with the reason and a TTL', async () => {
      const record = fresh();
      await store.begin(record);
      const k = keyOf(record);
      await expect(
        store.markDead(
          k,
          { status: 'FAILED', leaseOwner: 'owner-a' },
          { now: t0, reason: 'r', expiresAt: 5 },
        ),
      ).rejects.toBeInstanceOf(InboxFencedOutError);
      await store.markDead(
        k,
        { status: 'PROCESSING', leaseOwner: 'owner-a' },
        { now: t0 + 1, reason: 'max attempts', expiresAt: 1_900_000_000 },
      );
      expect(await ops.get(k)).toMatchObject({
        status: 'DEAD',
        lastError: 'max attempts',
        expiresAt: 1_900_000_000,
      });
    });
  });

  describe('a write sent again after it landed (the SDK resends one whose answer was lost)', () => {
    it('counts as done for the owner that made it, and only for that owner', async () => {
      const record = fresh();
      const k = keyOf(record);
      await store.begin(record);
      expect(await store.begin(record)).toMatchObject({ created: true, record: { leaseOwner: 'owner-a' } });
      await store.fail(k, 'owner-a', { now: t0 + 1, error: 'e', nextAttemptAt: t0 + 1, ...transient });
      await store.fail(k, 'owner-a', { now: t0 + 1, error: 'e', nextAttemptAt: t0 + 1, ...transient });
      const claim = { owner: 'owner-b', leaseUntil: t0 + 40_000, now: t0 + 2 };
      await store.takeOver(k, { status: 'FAILED', leaseOwner: 'owner-a' }, claim);
      expect(await store.takeOver(k, { status: 'FAILED', leaseOwner: 'owner-a' }, claim)).toMatchObject({
        attempts: 2,
        leaseOwner: 'owner-b',
      });
      await store.complete(k, 'owner-b', { now: t0 + 3, expiresAt: 1_900_000_000 });
      await store.complete(k, 'owner-b', { now: t0 + 3, expiresAt: 1_900_000_000 });
      await expect(store.complete(k, 'owner-a', { now: t0 + 3, expiresAt: 1 })).rejects.toBeInstanceOf(
        InboxFencedOutError,
      );
      expect(await ops.get(k)).toMatchObject({ status: 'PROCESSED', attempts: 2, leaseOwner: 'owner-b' });

      const doomed = fresh();
      await store.begin(doomed);
      const death = { now: t0 + 1, reason: 'r', expiresAt: 1_900_000_000 };
      await store.markDead(keyOf(doomed), { status: 'PROCESSING', leaseOwner: 'owner-a' }, death);
      await store.markDead(keyOf(doomed), { status: 'PROCESSING', leaseOwner: 'owner-a' }, death);
      expect((await ops.get(keyOf(doomed)))?.status).toBe('DEAD');
    });
  });

  describe('markDead of another attempt', () => {
    it('refuses while that attempt still holds its lease, and succeeds once the lease lapsed', async () => {
      const record = fresh(); // lease until t0 + 10 s
      await store.begin(record);
      const k = keyOf(record);
      const expected = { status: 'PROCESSING' as const, leaseOwner: 'owner-a' };

      await expect(
        store.markDead(k, expected, {
          now: t0 + 5_000,
          reason: 'max attempts',
          expiresAt: 5,
          leaseLapsedBy: t0 + 5_000,
        }),
      ).rejects.toBeInstanceOf(InboxFencedOutError);
      expect((await ops.get(k))?.status).toBe('PROCESSING');

      await store.markDead(k, expected, {
        now: t0 + 11_000,
        reason: 'max attempts',
        expiresAt: 5,
        leaseLapsedBy: t0 + 11_000,
      });
      expect((await ops.get(k))?.status).toBe('DEAD');
    });
  });

  describe('poison', () => {
    it('records DEAD once; a second recording of the same poison is RECORD_EXISTS', async () => {
      const record = poison();
      await store.recordPoison(record);
      expect(await ops.get(keyOf(record))).toMatchObject({
        status: 'DEAD',
        poison: true,
        lastError: record.reason,
        event: { junk: true },
        cloudEventId: null,
      });
      await expect(store.recordPoison(record)).rejects.toBeInstanceOf(InboxRecordExistsError);
    });

    it('overwrites a redriven poison record back to DEAD', async () => {
      const record = poison();
      await store.recordPoison(record);
      await ops.redrive(keyOf(record), t0 + 1);
      await store.recordPoison({ ...record, now: t0 + 2 });
      expect(await ops.get(keyOf(record))).toMatchObject({ status: 'DEAD', updatedAt: t0 + 2 });
    });
  });

  describe('keys without a hot one', () => {
    it("keys each record by its own event, and spreads one consumer's index entries over every shard", async () => {
      // Fixed ids: the shards they hash to are the same on every run.
      const records = Array.from({ length: 4 * shards }, (_, i) => fresh({ eventId: `spread-${i}` }));
      await Promise.all(records.map((r) => store.begin(r)));

      const stored = await Promise.all(records.map((r) => subject().storedKey(keyOf(r))));
      expect(new Set(stored).size).toBe(records.length);
      for (const [i, r] of records.entries()) expect(stored[i]).toBe(`${consumer}#${r.eventId}`);

      const entries = await subject().indexed(consumer, 'PROCESSING');
      expect(entries).toHaveLength(records.length);
      const perShard = new Map<string, number>();
      for (const e of entries) perShard.set(e.openKey, (perShard.get(e.openKey) ?? 0) + 1);
      // Every shard takes a share, none much more than its even share (4 here).
      expect([...perShard.keys()].sort()).toEqual(
        openKeys(consumer, 'PROCESSING', topology.inbox.openIndexShards).sort(),
      );
      expect(Math.max(...perShard.values())).toBeLessThanOrEqual(3 * 4);
      // A record keeps its shard in every status.
      const [first] = records as [NewInboxRecord];
      await store.fail(keyOf(first), 'owner-a', { now: t0 + 1, error: 'e', nextAttemptAt: t0, ...transient });
      const [failed] = await subject().indexed(consumer, 'FAILED');
      expect(failed?.openKey).toBe(
        `${consumer}#FAILED#${openShard(first.eventId, topology.inbox.openIndexShards)}`,
      );
    });

    it('orders each open status by the time its figure ages from: lease start, first attempt, death', async () => {
      const [a, b, c] = [fresh({ now: t0 + 300 }), fresh({ now: t0 + 100 }), fresh({ now: t0 + 200 })];
      for (const r of [a, b, c]) await store.begin(r);
      const times = async (status: OpenStatus) =>
        (await subject().indexed(consumer, status)).map((e) => [e.eventId, openSinceTime(e.openSince)]);
      // PROCESSING: oldest lease first.
      expect(await times('PROCESSING')).toEqual([
        [b.eventId, t0 + 100],
        [c.eventId, t0 + 200],
        [a.eventId, t0 + 300],
      ]);
      // A take-over starts a new lease: the record moves to its start.
      await store.takeOver(
        keyOf(b),
        { status: 'PROCESSING', leaseOwner: 'owner-a' },
        { owner: 'owner-b', leaseUntil: t0 + 99_000, now: t0 + 20_000 },
      );
      expect((await times('PROCESSING')).at(-1)).toEqual([b.eventId, t0 + 20_000]);
      // FAILED: by the first attempt, however late the failure.
      await store.fail(keyOf(a), 'owner-a', {
        ...transient,
        now: t0 + 30_000,
        firstAttemptAt: a.now,
        error: 'e',
        nextAttemptAt: t0 + 31_000,
      });
      expect(await times('FAILED')).toEqual([[a.eventId, t0 + 300]]);
      // DEAD: by the death; a redrive is a fresh first attempt.
      await store.markDead(
        keyOf(c),
        { status: 'PROCESSING', leaseOwner: 'owner-a' },
        { now: t0 + 40_000, reason: 'r', expiresAt: 1 },
      );
      expect(await times('DEAD')).toEqual([[c.eventId, t0 + 40_000]]);
      await ops.redrive(keyOf(c), t0 + 50_000);
      expect(await times('FAILED')).toEqual([
        [a.eventId, t0 + 300],
        [c.eventId, t0 + 50_000],
      ]);
      expect(await times('DEAD')).toEqual([]);
    });
  });

  describe('ops reads and redrive', () => {
    it('counts open records from every shard of the index, across pages of one shard, and nobody else', async () => {
      // Five records on one shard: more than a page (the suite's adapter pages by 3).
      const crowded = idsOnOneShard(5).map((eventId) => fresh({ eventId }));
      const spread = Array.from({ length: 6 }, () => fresh());
      for (const r of [...crowded, ...spread]) await store.begin(r);
      const [failedOne, deadOne, doneOne] = spread as [NewInboxRecord, NewInboxRecord, NewInboxRecord];
      await store.fail(keyOf(failedOne), 'owner-a', { now: t0, error: 'e', nextAttemptAt: t0, ...transient });
      await store.markDead(
        keyOf(deadOne),
        { status: 'PROCESSING', leaseOwner: 'owner-a' },
        { now: t0, reason: 'r', expiresAt: 1 },
      );
      await store.complete(keyOf(doneOne), 'owner-a', { now: t0, expiresAt: 1 });
      await store.recordPoison(poison());
      await store.begin(fresh({ consumer: `${consumer}-other` }));
      expect(openCounts(await ops.openFigures(consumer))).toEqual({ PROCESSING: 8, FAILED: 1, DEAD: 2 });
    });

    it('counts open records from the sparse index: a processed record leaves it, a duplicate begin does not bring it back', async () => {
      const records = Array.from({ length: 4 }, () => fresh());
      for (const r of records) await store.begin(r);
      const [done, failed, dead] = records as [NewInboxRecord, NewInboxRecord, NewInboxRecord];
      await store.complete(keyOf(done), 'owner-a', { now: t0, expiresAt: 1 });
      await store.fail(keyOf(failed), 'owner-a', { now: t0, error: 'e', nextAttemptAt: t0, ...transient });
      await store.markDead(
        keyOf(dead),
        { status: 'PROCESSING', leaseOwner: 'owner-a' },
        { now: t0, reason: 'r', expiresAt: 1 },
      );
      await store.recordPoison(poison());
      await store.begin(fresh({ consumer: `${consumer}-other` }));
      // The duplicate delivery of the processed record finds it and changes nothing.
      expect((await store.begin({ ...done, owner: 'owner-b' })).created).toBe(false);
      expect(openCounts(await ops.openFigures(consumer))).toEqual({ PROCESSING: 1, FAILED: 1, DEAD: 2 });
      expect((await subject().indexed(consumer, 'PROCESSING')).map((e) => e.eventId)).toEqual([
        records[3]?.eventId,
      ]);
    });

    it('reads the time the oldest record of each status ages from, across shards and pages: lease start, first attempt, death', async () => {
      expect(await ops.openFigures(consumer)).toEqual({
        PROCESSING: { count: 0, oldestSince: null },
        FAILED: { count: 0, oldestSince: null },
        DEAD: { count: 0, oldestSince: null },
      });
      // Five on one shard (more than a page of the suite's adapter), the oldest of them not first
      // written; others on other shards, younger.
      const crowded = idsOnOneShard(5).map((eventId, i) =>
        fresh({ eventId, now: t0 + ([40, 30, 10, 50, 20][i] ?? 0) }),
      );
      const spread = Array.from({ length: 6 }, (_, i) => fresh({ now: t0 + 100 + i }));
      for (const r of [...crowded, ...spread]) await store.begin(r);
      const [failA, failB, dies] = spread as [NewInboxRecord, NewInboxRecord, NewInboxRecord];
      // FAILED ages from the first attempt, however late the failure.
      await store.fail(keyOf(failA), 'owner-a', {
        ...transient,
        firstAttemptAt: failA.now,
        now: t0 + 9_000,
        error: 'e',
        nextAttemptAt: t0 + 9_500,
      });
      await store.fail(keyOf(failB), 'owner-a', {
        ...transient,
        firstAttemptAt: failB.now,
        now: t0 + 8_000,
        error: 'e',
        nextAttemptAt: t0 + 8_500,
      });
      await store.markDead(
        keyOf(dies),
        { status: 'PROCESSING', leaseOwner: 'owner-a' },
        { now: t0 + 7_000, reason: 'r', expiresAt: 1 },
      );
      await store.begin(fresh({ consumer: `${consumer}-other`, now: t0 }));
      expect(await ops.openFigures(consumer)).toEqual({
        PROCESSING: { count: 8, oldestSince: t0 + 10 },
        FAILED: { count: 2, oldestSince: failA.now },
        DEAD: { count: 1, oldestSince: t0 + 7_000 },
      });
      // A take-over starts the lease again: the oldest lease is now the next one.
      const oldest = crowded[2] as NewInboxRecord;
      await store.takeOver(
        keyOf(oldest),
        { status: 'PROCESSING', leaseOwner: 'owner-a' },
        { owner: 'owner-b', leaseUntil: t0 + 99_000, now: oldest.leaseUntil + 1 },
      );
      expect((await ops.openFigures(consumer)).PROCESSING).toEqual({ count: 8, oldestSince: t0 + 20 });
    });

    it('tells which records exist, of any consumer and in any state, and nothing of those that do not', async () => {
      const [open, done, dead] = [fresh(), fresh(), fresh()];
      for (const r of [open, done, dead]) await store.begin(r);
      await store.complete(keyOf(done), 'owner-a', { now: t0, expiresAt: 1 });
      await store.markDead(
        keyOf(dead),
        { status: 'PROCESSING', leaseOwner: 'owner-a' },
        { now: t0, reason: 'r', expiresAt: 1 },
      );
      const other = fresh({ consumer: `${consumer}-other`, eventId: open.eventId });
      await store.begin(other);
      // More keys than one request takes (100), most of them absent, one asked twice.
      const absent = Array.from({ length: 230 }, () => ({ consumer, eventId: randomUUID() }));
      const asked = [keyOf(open), ...absent, keyOf(done), keyOf(dead), keyOf(other), keyOf(open)];
      expect([...(await ops.present(asked))].sort()).toEqual(
        [open, done, dead, other].map((r) => `${r.consumer}#${r.eventId}`).sort(),
      );
      expect((await ops.present([])).size).toBe(0);
    });

    it('lists DEAD records page by page with their events, and the cursor resumes exactly', async () => {
      const dead = Array.from({ length: 5 }, (_, i) => poison({ eventId: `dead-${i}`, event: { n: i } }));
      for (const r of dead) await store.recordPoison(r);
      for (let i = 0; i < 4; i++) await store.begin(fresh({ eventId: `live-${i}` }));
      const first = await ops.listDead(consumer, { limit: 2 });
      expect(first.records.map((r) => r.eventId)).toEqual(['dead-0', 'dead-1']);
      expect(first.records[1]?.event).toEqual({ n: 1 });
      const second = await ops.listDead(consumer, { limit: 2, cursor: first.cursor });
      expect(second.records.map((r) => r.eventId)).toEqual(['dead-2', 'dead-3']);
      const last = await ops.listDead(consumer, { limit: 2, cursor: second.cursor });
      expect(last.records.map((r) => r.eventId)).toEqual(['dead-4']);
      expect(last.cursor).toBeUndefined();
    });

    it('lists DEAD records of every shard oldest death first, and the cursor resumes exactly', async () => {
      // Deaths in an order unlike the ids', two at one time, on shards all over the index.
      const deaths = [5, 1, 4, 1, 3, 2, 6].map((minute, i) => ({
        id: `late-${i}`,
        at: t0 + minute * 60_000,
      }));
      for (const d of deaths)
        await store.recordPoison(poison({ eventId: d.id, now: d.at, event: { d: d.id } }));
      await store.begin(fresh());
      const order = [...deaths].sort((x, y) => x.at - y.at || (x.id < y.id ? -1 : 1)).map((d) => d.id);
      expect(new Set(order.map((id) => openShard(id, topology.inbox.openIndexShards))).size).toBeGreaterThan(
        1,
      );

      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await ops.listDead(consumer, { limit: 3, cursor });
        expect(page.records.length).toBeLessThanOrEqual(3);
        for (const r of page.records) expect(r.event).toEqual({ d: r.eventId });
        seen.push(...page.records.map((r) => r.eventId));
        cursor = page.cursor;
        pages++;
      } while (cursor);
      expect(seen).toEqual(order);
      expect(pages).toBe(3);
    });

    it('keeps the order when one shard holds more than a page of what a list asks for', async () => {
      // Five early deaths on one shard (the suite's adapter reads 3 a page), four later ones elsewhere.
      const early = idsOnOneShard(5).map((id, i) => ({ id, at: t0 + (i + 1) * 60_000 }));
      const late: { id: string; at: number }[] = [];
      for (let i = 0; late.length < 4; i++) {
        if (openShard(`elsewhere-${i}`, topology.inbox.openIndexShards) !== 0)
          late.push({ id: `elsewhere-${i}`, at: t0 + (10 + late.length) * 60_000 });
      }
      for (const d of [...late, ...early]) await store.recordPoison(poison({ eventId: d.id, now: d.at }));
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await ops.listDead(consumer, { limit: 8, cursor });
        seen.push(...page.records.map((r) => r.eventId));
        cursor = page.cursor;
      } while (cursor);
      expect(seen).toEqual([...early, ...late].map((d) => d.id));
    });

    it('redrive resets a DEAD record to a due FAILED record at attempt 0 without TTL, its failure window afresh', async () => {
      const record = fresh();
      await store.begin(record);
      const k = keyOf(record);
      await store.takeOver(
        k,
        { status: 'PROCESSING', leaseOwner: 'owner-a' },
        { owner: 'owner-a2', leaseUntil: t0 + 99_000, now: record.leaseUntil + 1 },
      );
      await store.fail(k, 'owner-a2', {
        now: t0,
        firstAttemptAt: t0,
        error: 'e',
        nextAttemptAt: t0,
        kind: 'permanent',
        permanentFailures: 1,
      });
      await store.takeOver(
        k,
        { status: 'FAILED', leaseOwner: 'owner-a2' },
        { owner: 'owner-a', leaseUntil: t0 + 99_000, now: t0 + 1 },
      );
      await store.markDead(
        k,
        { status: 'PROCESSING', leaseOwner: 'owner-a' },
        { now: t0, reason: 'max attempts', expiresAt: 1_900_000_000 },
      );
      const redriven = await ops.redrive(k, t0 + 10);
      expect(redriven).toMatchObject({
        status: 'FAILED',
        attempts: 0,
        nextAttemptAt: 0,
        firstAttemptAt: t0 + 10,
        permanentFailures: 0,
        event: record.event,
      });
      expect(redriven.lastFailure).toBeUndefined();
      expect(redriven.expiresAt).toBeUndefined();
      expect(redriven.leaseOwner).toMatch(/^redrive\//);
      // And a delivery can now take it over.
      const taken = await store.takeOver(
        k,
        { status: 'FAILED', leaseOwner: redriven.leaseOwner },
        { owner: 'owner-z', leaseUntil: t0 + 99_000, now: t0 + 11 },
      );
      expect(taken.attempts).toBe(1);
    });

    it('redrive refuses a record that is not DEAD, or is not there', async () => {
      const record = fresh();
      await store.begin(record);
      await expect(ops.redrive(keyOf(record), t0)).rejects.toBeInstanceOf(InboxNotDeadError);
      await expect(ops.redrive({ consumer, eventId: 'nope' }, t0)).rejects.toBeInstanceOf(
        InboxRecordNotFoundError,
      );
    });
  });
}
