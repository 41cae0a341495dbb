import { EventBridgeClient, PutEventsCommand, type PutEventsCommandInput } from '@aws-sdk/client-eventbridge';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import type { SqlClient } from '../../shared/db/sql-client';
import { EventBridgePublisher } from '../../shared/outbox/eventbridge-publisher';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { type RunReport, relayOnce, runRelay } from '../../shared/outbox/relay';
import { type HeldPublish, PublishGate } from '../support/gates';
import {
  expireLeases,
  makeAllDue,
  RecordingPublisher,
  seedPending,
  statusCounts,
  testSettings,
} from '../support/outbox-fixtures';
import { openRelayTestDatabase, pgAdapter } from '../support/sql-adapters';

const eventBridge = mockClient(EventBridgeClient);

function ebPublisher(maxRequestBytes: number = topology.relay.maxRequestBytes) {
  // maxAttempts 1: the SDK's own retries are not what these tests are about.
  const client = new EventBridgeClient({ region: 'us-east-1', maxAttempts: 1 });
  return new EventBridgePublisher(client, {
    busName: topology.busName,
    source: topology.source,
    maxEntries: topology.relay.putEventsMaxEntries,
    maxRequestBytes,
    concurrency: topology.relay.publishConcurrency,
  });
}

/** The PutEvents input of the n-th call the mock saw. */
const putEventsInput = (call: number): PutEventsCommandInput => {
  const recorded = eventBridge.commandCalls(PutEventsCommand)[call];
  if (!recorded) throw new Error(`no PutEvents call #${call}`);
  return recorded.args[0].input as PutEventsCommandInput;
};

const sentEventIds = (call: number) =>
  (putEventsInput(call).Entries ?? []).map((e) => JSON.parse(e.Detail ?? '{}').id as string);

describe('relay on real PostgreSQL', () => {
  let db: SqlClient;
  let store: OutboxStore;
  let url: string;
  let cleanup: () => Promise<void>;

  // Fixtures and checks as the schema owner; the relay itself as its own role, with its grants only.
  beforeAll(async () => {
    const opened = await openRelayTestDatabase();
    ({ db, relayUrl: url, close: cleanup } = opened);
    store = new OutboxStore(opened.relayDb);
  });
  afterAll(() => cleanup());
  beforeEach(async () => {
    eventBridge.reset();
    await db.query('DELETE FROM outbox');
  });

  it('four relays draining 5,000 events concurrently publish each exactly once', async () => {
    await seedPending(db, 5_000);
    const publisher = new RecordingPublisher();
    const relays = await Promise.all(
      [1, 2, 3, 4].map(async (n) => {
        const own = await pgAdapter.open(url);
        try {
          return await runRelay(
            { outbox: new OutboxStore(own.db), publisher, owner: `relay-${n}`, settings: testSettings() },
            { remainingMs: () => 60_000 },
          );
        } finally {
          await own.close();
        }
      }),
    );
    const ids = publisher.published.map((e) => e.eventId);
    expect(ids).toHaveLength(5_000);
    expect(new Set(ids).size).toBe(5_000);
    expect(relays.reduce((n, r) => n + r.published, 0)).toBe(5_000);
    // Work really was shared, not done by one relay while the others idled.
    expect(relays.filter((r) => r.published > 0).length).toBeGreaterThan(1);
    expect(await statusCounts(db)).toEqual({ delivered: 5_000 });
  });

  it('rounds slower than the lease: the first accepted publish settles each event, attempts stay bounded', async () => {
    await seedPending(db, 5);
    // Each relay's PutEvents stays in flight until the test lets it go; meanwhile the test lets
    // the claim's lease lapse and the next relay takes the rows over: three claims of each row,
    // three publishes in flight.
    const gate = new PublishGate();
    const accepted = new RecordingPublisher();
    const publisher = gate.wrap(accepted);
    const settings = testSettings({ roundsInFlight: 1 });
    const connections: { close: () => Promise<void> }[] = [];
    const runs: Promise<RunReport>[] = [];
    const inFlight: HeldPublish[] = [];
    try {
      for (const n of [1, 2, 3]) {
        if (n > 1) await expireLeases(db);
        const own = await pgAdapter.open(url);
        connections.push(own);
        runs.push(
          runRelay(
            { outbox: new OutboxStore(own.db), publisher, owner: `relay-${n}`, settings },
            { remainingMs: () => 60_000 },
          ),
        );
        const held = await gate.next();
        expect(held.events).toHaveLength(5);
        inFlight.push(held);
      }
      const [first, second, third] = inFlight;
      if (!first || !second || !third) throw new Error('expected three publishes in flight');
      // The first relay's publish, whose claim was taken over twice, is the first accepted: it settles all five.
      await first.release();
      await runs[0];
      expect(await statusCounts(db)).toEqual({ delivered: 5 });
      // The later ones are accepted too (the bus has each event up to three times), and change nothing.
      await third.release();
      await second.release();
      const reports = await Promise.all(runs);

      expect(await statusCounts(db)).toEqual({ delivered: 5 });
      const { rows } = await db.query<{ attempts: number }>('SELECT attempts FROM outbox');
      // One claim per relay before the first accepted publish was recorded, and none after it.
      expect(rows.map((r) => r.attempts)).toEqual([3, 3, 3, 3, 3]);
      expect(accepted.published).toHaveLength(15);
      expect(reports.map((r) => [r.published, r.expiredLeases, r.fencedOut])).toEqual([
        [5, 0, 0],
        [0, 5, 5],
        [0, 5, 5],
      ]);
    } finally {
      for (const held of inFlight) void held.release();
      await Promise.allSettled(runs);
      for (const own of connections) await own.close();
    }
  });

  it('publishes CloudEvents and stores the bus EventId of each entry', async () => {
    await seedPending(db, 3);
    eventBridge.on(PutEventsCommand).callsFake((input: PutEventsCommandInput) => ({
      FailedEntryCount: 0,
      Entries: (input.Entries ?? []).map((_, i) => ({ EventId: `bus-${i}` })),
    }));
    const round = await relayOnce({
      outbox: store,
      publisher: ebPublisher(),
      owner: 'r',
      settings: testSettings(),
    });
    expect(round).toMatchObject({ claimed: 3, published: 3, failed: 0, dead: 0 });
    const entry = putEventsInput(0).Entries?.[0];
    expect(entry).toMatchObject({
      Source: topology.source,
      DetailType: 'content.approved',
      EventBusName: topology.busName,
    });
    const detail = JSON.parse(entry?.Detail ?? '{}');
    expect(detail).toMatchObject({ specversion: '1.0', source: topology.source, type: 'content.approved' });
    expect(detail.subject).toBe(detail.data.taskId);
    const { rows } = await db.query<{ bus_event_id: string; event_id: string }>(
      'SELECT event_id, bus_event_id FROM outbox ORDER BY created_at',
    );
    expect(rows.map((r) => r.bus_event_id)).toEqual(['bus-0', 'bus-1', 'bus-2']);
    expect(rows[0]?.event_id).toBe(detail.id);
  });

  it('a PutEvents response with some failed entries re-sends only those', async () => {
    await seedPending(db, 10);
    eventBridge
      .on(PutEventsCommand)
      .resolvesOnce({
        FailedEntryCount: 2,
        Entries: Array.from({ length: 10 }, (_, i) =>
          i === 2 || i === 7
            ? { ErrorCode: 'InternalFailure', ErrorMessage: 'try again' }
            : { EventId: `ok-${i}` },
        ),
      })
      .callsFake((input: PutEventsCommandInput) => ({
        FailedEntryCount: 0,
        Entries: (input.Entries ?? []).map((_, i) => ({ EventId: `retry-${i}` })),
      }));
    const publisher = ebPublisher();
    const first = await relayOnce({ outbox: store, publisher, owner: 'r', settings: testSettings() });
    expect(first).toMatchObject({ claimed: 10, published: 8, failed: 2, dead: 0 });
    const failedIds = [sentEventIds(0)[2], sentEventIds(0)[7]];

    await makeAllDue(db);
    const second = await relayOnce({ outbox: store, publisher, owner: 'r', settings: testSettings() });
    expect(second).toMatchObject({ claimed: 2, published: 2 });
    expect(sentEventIds(1).sort()).toEqual(failedIds.sort());
    expect(await statusCounts(db)).toEqual({ delivered: 10 });
  });

  it('throttling: the whole call and single entries are retried later, nothing goes dead', async () => {
    await seedPending(db, 4);
    const throttled = Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
    eventBridge
      .on(PutEventsCommand)
      .rejectsOnce(throttled)
      .resolvesOnce({
        FailedEntryCount: 1,
        Entries: [
          { ErrorCode: 'ThrottlingException', ErrorMessage: 'Rate exceeded' },
          { EventId: 'a' },
          { EventId: 'b' },
          { EventId: 'c' },
        ],
      })
      .resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'd' }] });
    const publisher = ebPublisher();
    const settings = testSettings({ backoff: { baseMs: 60_000, maxMs: 60_000 } });

    const first = await relayOnce({ outbox: store, publisher, owner: 'r', settings, random: () => 0.5 });
    expect(first).toMatchObject({ claimed: 4, published: 0, failed: 4, dead: 0 });
    // Backoff holds them back: nothing is due yet.
    expect(await relayOnce({ outbox: store, publisher, owner: 'r', settings })).toMatchObject({ claimed: 0 });
    const { rows } = await db.query<{ last_error: string; delay: number }>(
      'SELECT last_error, extract(epoch FROM next_attempt_at - now())::float8 AS delay FROM outbox',
    );
    expect(rows.every((r) => r.last_error.startsWith('ThrottlingException'))).toBe(true);
    expect(rows.every((r) => r.delay > 20 && r.delay <= 30)).toBe(true);

    await makeAllDue(db);
    expect(await relayOnce({ outbox: store, publisher, owner: 'r', settings })).toMatchObject({
      published: 3,
      failed: 1,
    });
    await makeAllDue(db);
    expect(await relayOnce({ outbox: store, publisher, owner: 'r', settings })).toMatchObject({
      published: 1,
    });
    expect(await statusCounts(db)).toEqual({ delivered: 4 });
  });

  it('a transient failure is retried past any count of attempts, and goes dead only at the maximum age', async () => {
    await seedPending(db, 1);
    eventBridge.on(PutEventsCommand).resolves({
      FailedEntryCount: 1,
      Entries: [{ ErrorCode: 'InternalFailure', ErrorMessage: 'internal' }],
    });
    const settings = testSettings({ maxEventAgeSeconds: 3600 });
    const publisher = ebPublisher();
    let now = Date.now();
    const round = () => relayOnce({ outbox: store, publisher, owner: 'r', settings, clock: () => now });
    // Twenty failures within the hour: every one is scheduled again, none is dead.
    for (let i = 0; i < 20; i++) {
      expect(await round()).toMatchObject({ failed: 1, dead: 0 });
      await makeAllDue(db);
    }
    // An hour later the next try would be past the maximum age: dead, with the reason.
    now += 3600 * 1000;
    expect(await round()).toMatchObject({ failed: 0, dead: 1 });
    const [dead] = await store.listDead();
    expect(dead?.attempts).toBe(21);
    expect(dead?.lastError).toMatch(
      /undelivered after 21 attempts over \d+ s \(maximum age 3600 s\).*InternalFailure/,
    );
    expect(await round()).toMatchObject({ claimed: 0 });
  });

  it('an entry that can never succeed goes dead at once', async () => {
    await seedPending(db, 1);
    eventBridge.on(PutEventsCommand).resolves({
      FailedEntryCount: 1,
      Entries: [{ ErrorCode: 'MalformedDetail', ErrorMessage: 'Detail is malformed.' }],
    });
    const round = await relayOnce({
      outbox: store,
      publisher: ebPublisher(),
      owner: 'r',
      settings: testSettings(),
    });
    expect(round).toMatchObject({ dead: 1, failed: 0 });
    expect((await store.listDead())[0]?.lastError).toBe('MalformedDetail: Detail is malformed.');
  });

  it('an oversize entry goes dead at once without being sent; its batch mates are published', async () => {
    await seedPending(db, 2);
    await db.query(
      `UPDATE outbox SET payload = payload || jsonb_build_object('padding', repeat('x', 20000))
        WHERE event_id = (SELECT event_id FROM outbox ORDER BY created_at LIMIT 1)`,
    );
    eventBridge.on(PutEventsCommand).callsFake((input: PutEventsCommandInput) => ({
      FailedEntryCount: 0,
      Entries: (input.Entries ?? []).map(() => ({ EventId: 'ok' })),
    }));
    const round = await relayOnce({
      outbox: store,
      publisher: ebPublisher(10_000),
      owner: 'r',
      settings: testSettings(),
    });
    expect(round).toMatchObject({ claimed: 2, published: 1, dead: 1 });
    expect(eventBridge.commandCalls(PutEventsCommand)).toHaveLength(1);
    expect(sentEventIds(0)).toHaveLength(1);
    expect((await store.listDead())[0]?.lastError).toMatch(
      /^EntryTooLarge: entry is \d+ bytes, over the 10000/,
    );
  });

  it('a payload too large for one Data API row is claimed without it and goes dead, unsent', async () => {
    await seedPending(db, 2);
    await db.query(
      `UPDATE outbox SET payload = payload || jsonb_build_object('padding', repeat('x', 300000))
        WHERE event_id = (SELECT event_id FROM outbox ORDER BY created_at LIMIT 1)`,
    );
    const publisher = new RecordingPublisher();
    const round = await relayOnce({ outbox: store, publisher, owner: 'r', settings: testSettings() });
    expect(round).toMatchObject({ claimed: 2, published: 1, dead: 1 });
    expect(publisher.published).toHaveLength(1);
    expect((await store.listDead())[0]?.lastError).toMatch(
      /^PayloadTooLarge: the payload is \d+ bytes in a Data API response, over the 61440-byte row limit/,
    );
  });

  it('the loop stops claiming when the time budget is spent', async () => {
    await seedPending(db, 250);
    let remaining = 100_000;
    const inner = new RecordingPublisher();
    // Each round costs 30 s of the invocation: 100 s minus a 10 s margin allows three rounds.
    const slowPublisher = {
      publish: async (events: Parameters<RecordingPublisher['publish']>[0]) => {
        remaining -= 30_000;
        return inner.publish(events);
      },
    };
    const settings = testSettings({ claimBatchSize: 50, budgetMarginMs: 10_000, roundsInFlight: 1 });
    const report = await runRelay(
      { outbox: store, publisher: slowPublisher, owner: 'r', settings },
      { remainingMs: () => remaining, sleep: async () => {} },
    );
    expect(report).toMatchObject({ rounds: 3, published: 150 });
    expect(report.stats).toMatchObject({ pending: 100, nextDueInMs: 0 });
  });

  it('returns as soon as nothing is pending, without sleeping: an idle pipeline is touched once per run', async () => {
    const slept: number[] = [];
    const report = await runRelay(
      {
        outbox: store,
        publisher: new RecordingPublisher(),
        owner: 'r',
        settings: testSettings({ roundsInFlight: 2 }),
      },
      { remainingMs: () => 60_000, sleep: async (ms) => void slept.push(ms) },
    );
    // One claim, whatever the rounds in flight: a run widens only while claims come back full.
    expect(report.rounds).toBe(1);
    expect(slept).toEqual([]);
  });

  it('returns at once when the pending rows are backing off, saying when they are due (the caller wakes a run then)', async () => {
    await seedPending(db, 3);
    // Far enough out that the rows stay backing off however slow the machine is.
    await db.query("UPDATE outbox SET next_attempt_at = now() + interval '30 seconds'");
    const slept: number[] = [];
    const report = await runRelay(
      {
        outbox: store,
        publisher: new RecordingPublisher(),
        owner: 'r',
        settings: testSettings({ roundsInFlight: 1, pollIntervalMs: 50 }),
      },
      { remainingMs: () => 60_000, sleep: async (ms) => void slept.push(ms) },
    );
    // A run that waited out backoffs would hold the run lease while new approvals nudge nobody.
    expect(slept).toEqual([]);
    expect(report).toMatchObject({ published: 0, stats: { pending: 3 } });
    expect(report.stats.nextDueInMs).toBeGreaterThan(0);
    expect(report.stats.nextDueInMs).toBeLessThanOrEqual(30_000);
  });

  it('rows due after an hour are no different: the run returns and says when', async () => {
    await seedPending(db, 2);
    await db.query("UPDATE outbox SET next_attempt_at = now() + interval '1 hour'");
    const slept: number[] = [];
    const report = await runRelay(
      { outbox: store, publisher: new RecordingPublisher(), owner: 'r', settings: testSettings() },
      { remainingMs: () => 60_000, sleep: async (ms) => void slept.push(ms) },
    );
    expect(slept).toEqual([]);
    expect(report).toMatchObject({ published: 0, stats: { pending: 2 } });
    expect(report.stats.nextDueInMs).toBeGreaterThan(3_000_000);
  });

  it('purges twice what it delivered when more is past retention: the purge outpaces any steady rate', async () => {
    // 400 rows past retention; a run that delivers 100 purges 200, whatever maxBatchesPerRun says.
    await seedPending(db, 400);
    await db.query("UPDATE outbox SET status = 'delivered', delivered_at = now() - interval '30 days'");
    await seedPending(db, 100);
    const settings = testSettings({ purge: { retentionHours: 24, batchSize: 50, maxBatchesPerRun: 1 } });

    const report = await runRelay(
      { outbox: store, publisher: new RecordingPublisher(), owner: 'r', settings },
      { remainingMs: () => 60_000 },
    );

    expect(report.published).toBe(100);
    expect(report.purged).toBe(200);
  });

  it('purges delivered rows past retention in small batches, keeping recent and pending ones', async () => {
    await seedPending(db, 130);
    await db.query(
      `UPDATE outbox SET status = 'delivered', delivered_at = now() - interval '30 days'
        WHERE event_id IN (SELECT event_id FROM outbox ORDER BY created_at LIMIT 120)`,
    );
    await db.query(
      `UPDATE outbox SET status = 'delivered', delivered_at = now()
        WHERE event_id IN (SELECT event_id FROM outbox WHERE status = 'pending' ORDER BY created_at LIMIT 5)`,
    );
    const settings = testSettings({
      claimBatchSize: 1,
      purge: { retentionHours: 24, batchSize: 50, maxBatchesPerRun: 20 },
    });
    const report = await runRelay(
      { outbox: store, publisher: new RecordingPublisher(), owner: 'r', settings },
      { remainingMs: () => 60_000, signal: AbortSignal.abort() },
    );
    expect(report.rounds).toBe(0);
    expect(report.purged).toBe(120);
    expect(await statusCounts(db)).toEqual({ delivered: 5, pending: 5 });
  });
});
