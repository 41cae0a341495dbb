import {
  EventBridgeClient,
  PutEventsCommand,
  type PutEventsCommandInput,
  type PutEventsCommandOutput,
} from '@aws-sdk/client-eventbridge';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { PgSqlClient } from '../../shared/db/pg-client';
import type { SqlClient } from '../../shared/db/sql-client';
import { EventBridgePublisher } from '../../shared/outbox/eventbridge-publisher';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { type RunReport, runRelay } from '../../shared/outbox/relay';
import { RelayCircuitStore } from '../../shared/outbox/relay-circuit';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { seedPending, statusCounts, testSettings } from '../support/outbox-fixtures';
import { sqlAdapters } from '../support/sql-adapters';

// The relay over a transport that refuses everything, as AWS answers it: PutEvents through the
// real SDK client (aws-sdk-client-mock in place of the network) answering every entry
// ThrottlingException or InternalFailure, or failing the whole call with a 5xx, then accepting
// again. The same core runs on the local runtime (test/e2e/bus-disk-full.test.ts). The relay
// runs as its own database role, through each SqlClient adapter (pg, and the Data API).

const eventBridge = mockClient(EventBridgeClient);

function publisher() {
  // maxAttempts 1: what the SDK's own retries would add is not what these tests are about.
  return new EventBridgePublisher(new EventBridgeClient({ region: 'us-east-1', maxAttempts: 1 }), {
    busName: topology.busName,
    source: topology.source,
    maxEntries: topology.relay.putEventsMaxEntries,
    maxRequestBytes: topology.relay.maxRequestBytes,
    concurrency: topology.relay.publishConcurrency,
  });
}

/** PutEvents answering every entry with `code` (HTTP 200, FailedEntryCount = all of them). */
const refuseEveryEntry =
  (code: string) =>
  (input: PutEventsCommandInput): PutEventsCommandOutput => ({
    $metadata: {},
    FailedEntryCount: input.Entries?.length ?? 0,
    Entries: (input.Entries ?? []).map(() => ({ ErrorCode: code, ErrorMessage: `${code} for every entry` })),
  });

/** PutEvents accepting every entry. */
const acceptEveryEntry = (input: PutEventsCommandInput): PutEventsCommandOutput => ({
  $metadata: {},
  FailedEntryCount: 0,
  Entries: (input.Entries ?? []).map((_, i) => ({ EventId: `bus-${i}` })),
});

/** Entries PutEvents was sent so far, over every call. */
const entriesSent = () =>
  eventBridge
    .commandCalls(PutEventsCommand)
    .reduce((n, c) => n + ((c.args[0].input as PutEventsCommandInput).Entries?.length ?? 0), 0);

describe.each(sqlAdapters)(
  'the relay treats a transport that refuses everything as a circuit ($name)',
  (adapter) => {
    let database: TestDatabase;
    let owner: SqlClient;
    let relay: { db: SqlClient; close: () => Promise<void> };
    let circuit: RelayCircuitStore;
    let outbox: OutboxStore;

    beforeAll(async () => {
      database = await createTestDatabase();
      owner = new PgSqlClient({ connectionString: database.url });
      relay = await adapter.open(database.urlAs('relay'));
      circuit = new RelayCircuitStore(relay.db);
      outbox = new OutboxStore(relay.db);
    });
    afterAll(async () => {
      await relay.close();
      await owner.close();
      await database.drop();
    });
    beforeEach(async () => {
      eventBridge.reset();
      await owner.query('DELETE FROM outbox');
      await owner.query(
        'UPDATE relay_circuit SET opened_at = NULL, probe_at = NULL, failed_probes = 0, cause = NULL',
      );
    });

    const run = (settings = testSettings()): Promise<RunReport> =>
      runRelay(
        { outbox, circuit, publisher: publisher(), owner: 'relay-circuit', settings },
        { remainingMs: () => 60_000, sleep: async () => {} },
      );
    /**
     * Time passes until the next probe is due, as the database judges time: the state a test sets
     * rather than waits for. Every pending row's wait moves by as much (a refused probe's row is
     * held a little past the next probe, and no longer).
     */
    const probeDue = async () => {
      await owner.query(
        `UPDATE outbox SET next_attempt_at = next_attempt_at - (SELECT probe_at - now() FROM relay_circuit)
        WHERE status = 'pending' AND (SELECT probe_at > now() FROM relay_circuit)`,
      );
      await owner.query('UPDATE relay_circuit SET probe_at = now() WHERE opened_at IS NOT NULL');
    };
    const rows = async () =>
      (
        await owner.query<{ attempts: number; waiting: boolean; last_error: string | null; status: string }>(
          `SELECT attempts, next_attempt_at > now() AS waiting, last_error, status FROM outbox ORDER BY created_at`,
        )
      ).rows;

    it.each(['ThrottlingException', 'InternalFailure'])(
      'PutEvents answering every entry %s: the circuit opens, rows gain no attempt or backoff while it is open, and the first accepted probe makes them all due',
      async (code) => {
        await seedPending(owner, 25);
        eventBridge.on(PutEventsCommand).callsFake(refuseEveryEntry(code));

        const opening = await run();
        const afterOpening = await rows();
        const sentOpening = entriesSent();
        const whileOpen = await run();
        await probeDue();
        const refusedProbe = await run();
        const afterRefusedProbe = await rows();
        const sentThroughRefusedProbe = entriesSent();
        eventBridge.on(PutEventsCommand).callsFake(acceptEveryEntry);
        await probeDue();
        const closing = await run();
        const view = await circuit.read();

        expect(opening).toMatchObject({ claimed: 25, published: 0, failed: 0, dead: 0, held: 25 });
        expect(opening.circuit).toMatchObject({
          open: true,
          opened: expect.stringContaining(code),
          probeInMs: topology.relay.circuit.probeBaseMs,
        });
        expect(sentOpening).toBe(25);
        // Given back as they were: no attempt counted, no backoff, the refusal kept for an operator.
        expect(afterOpening.every((r) => r.attempts === 0 && !r.waiting && r.status === 'pending')).toBe(
          true,
        );
        expect(afterOpening.every((r) => r.last_error?.startsWith(code))).toBe(true);
        // Open, with the probe not due: no claim, no call.
        expect(whileOpen).toMatchObject({ claimed: 0, rounds: 0 });
        expect(whileOpen.circuit).toMatchObject({ open: true, probeInMs: expect.any(Number) });
        expect(whileOpen.circuit.opened).toBeUndefined();
        // The probe: one entry, refused; the next one waits twice as long; still no attempt anywhere.
        expect(sentThroughRefusedProbe - sentOpening).toBe(1);
        expect(refusedProbe).toMatchObject({ claimed: 1, held: 1, failed: 0, dead: 0 });
        expect(refusedProbe.circuit).toMatchObject({
          open: true,
          failedProbes: 1,
          probeInMs: 2 * topology.relay.circuit.probeBaseMs,
        });
        expect(afterRefusedProbe.every((r) => r.attempts === 0 && r.status === 'pending')).toBe(true);
        // The refused probe's row waits past the next probe, so that probe takes another row.
        expect(afterRefusedProbe.filter((r) => r.waiting)).toHaveLength(1);
        // Accepted: closed, every waiting row due, and the run drains them all.
        expect(closing.circuit).toMatchObject({ open: false, closed: { madeDue: 1 } });
        expect(closing).toMatchObject({ published: 25, failed: 0, dead: 0, held: 0 });
        expect(view).toEqual({ open: false });
        expect(await statusCounts(owner)).toEqual({ delivered: 25 });
      },
    );

    it('a whole call failing (a 5xx after the SDK’s retries) opens it too', async () => {
      await seedPending(owner, 3);
      eventBridge
        .on(PutEventsCommand)
        .rejects(Object.assign(new Error('We encountered an internal error'), { name: 'InternalException' }));

      const report = await run();

      expect(report).toMatchObject({ held: 3, failed: 0 });
      expect(report.circuit.opened).toMatch(/^InternalException: /);
      expect((await rows()).every((r) => r.attempts === 0 && !r.waiting)).toBe(true);
    });

    it('an outage past the maximum event age turns no row dead, and its rows are delivered once it ends', async () => {
      await seedPending(owner, 4);
      // Older than the maximum age: a per-row failure would make each of them dead at once.
      await owner.query("UPDATE outbox SET created_at = created_at - interval '2 days'");
      eventBridge.on(PutEventsCommand).callsFake(refuseEveryEntry('ThrottlingException'));

      await run();
      for (let i = 0; i < 5; i++) {
        await probeDue();
        await run();
      }
      const during = await rows();
      eventBridge.on(PutEventsCommand).callsFake(acceptEveryEntry);
      await probeDue();
      const ended = await run();

      expect(during.map((r) => r.status)).toEqual(['pending', 'pending', 'pending', 'pending']);
      expect(during.every((r) => r.attempts === 0)).toBe(true);
      expect(ended).toMatchObject({ published: 4, dead: 0 });
      expect(await statusCounts(owner)).toEqual({ delivered: 4 });
    });

    it('what fails alone keeps its per-row backoff: entries refused beside accepted ones, the circuit stays closed', async () => {
      await seedPending(owner, 10);
      eventBridge.on(PutEventsCommand).callsFake((input: PutEventsCommandInput) => ({
        $metadata: {},
        FailedEntryCount: 2,
        Entries: (input.Entries ?? []).map((_, i) =>
          i === 3 || i === 6
            ? { ErrorCode: 'ThrottlingException', ErrorMessage: 'Rate exceeded' }
            : { EventId: `bus-${i}` },
        ),
      }));

      const report = await run(testSettings({ backoff: { baseMs: 60_000, maxMs: 60_000 } }));
      const failed = (await rows()).filter((r) => r.status === 'pending');

      expect(report).toMatchObject({ published: 8, failed: 2, held: 0 });
      expect(report.circuit).toEqual({ open: false, probeInMs: null, failedProbes: 0 });
      expect(failed).toHaveLength(2);
      expect(failed.every((r) => r.attempts === 1 && r.waiting)).toBe(true);
      expect(await circuit.read()).toEqual({ open: false });
    });

    it('an entry that can never succeed, in a round refused as a whole, is still dead on its own', async () => {
      await seedPending(owner, 3);
      eventBridge.on(PutEventsCommand).callsFake((input: PutEventsCommandInput) => ({
        $metadata: {},
        FailedEntryCount: input.Entries?.length ?? 0,
        Entries: (input.Entries ?? []).map((_, i) =>
          i === 0
            ? { ErrorCode: 'MalformedDetail', ErrorMessage: 'Detail is malformed.' }
            : { ErrorCode: 'InternalFailure', ErrorMessage: 'internal' },
        ),
      }));

      const report = await run();

      expect(report).toMatchObject({ dead: 1, held: 2, failed: 0 });
      expect(report.circuit.open).toBe(true);
      expect(await statusCounts(owner)).toEqual({ dead: 1, pending: 2 });
    });

    it('one event refused on its own cannot keep the circuit shut: the next probe takes another row', async () => {
      await seedPending(owner, 3);
      const { rows: first } = await owner.query<{ event_id: string }>(
        'SELECT event_id FROM outbox ORDER BY created_at LIMIT 1',
      );
      const stubborn = first[0]?.event_id as string;
      eventBridge.on(PutEventsCommand).callsFake(refuseEveryEntry('InternalFailure'));
      await run();
      // The transport is back, but the oldest event alone is refused, for a while, every time.
      eventBridge.on(PutEventsCommand).callsFake((input: PutEventsCommandInput) => ({
        $metadata: {},
        FailedEntryCount: 0,
        Entries: (input.Entries ?? []).map((e, i) =>
          JSON.parse(e.Detail ?? '{}').id === stubborn
            ? { ErrorCode: 'InternalFailure', ErrorMessage: 'internal' }
            : { EventId: `bus-${i}` },
        ),
      }));

      await probeDue();
      const refused = await run();
      await probeDue();
      const accepted = await run();

      expect(refused.circuit).toMatchObject({ open: true, failedProbes: 1 });
      expect(accepted.circuit.closed).toBeDefined();
      const { rows: delivered } = await owner.query<{ event_id: string }>(
        "SELECT event_id FROM outbox WHERE status = 'delivered'",
      );
      expect(delivered.map((r) => r.event_id).sort()).toEqual(
        (
          await owner.query<{ event_id: string }>('SELECT event_id FROM outbox WHERE event_id <> :id', {
            id: stubborn,
          })
        ).rows
          .map((r) => r.event_id)
          .sort(),
      );
    });

    it('one run at a time probes: of two runs whose probe is due, one publishes it and the other claims nothing', async () => {
      await seedPending(owner, 2);
      eventBridge.on(PutEventsCommand).callsFake(refuseEveryEntry('ThrottlingException'));
      await run();
      await probeDue();

      const [a, b] = await Promise.all([run(), run()]);

      expect([a.claimed, b.claimed].sort()).toEqual([0, 1]);
      expect(entriesSent()).toBe(3);
    });
  },
);
