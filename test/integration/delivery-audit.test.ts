import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { topology as project, topologyWith } from '../../functions/topology';
import { DeliveryAuditStore } from '../../shared/audit/audit-store';
import { runDeliveryAudit } from '../../shared/audit/delivery-audit';
import { type SqlClient, sqlParam } from '../../shared/db/sql-client';
import { recordKey } from '../../shared/inbox/dynamo-inbox-table';
import type { InboxPresence } from '../../shared/inbox/inbox-ops';
import type { InboxKey, InboxRecord } from '../../shared/inbox/inbox-store';
import type { AuditSettings, ConsumerName } from '../../shared/topology';
import { openTestDatabase, type SqlAdapterFactory, sqlAdapters } from '../support/sql-adapters';

// This test's own pipeline: the three consumers the project ships, whatever else its registry
// holds, so the findings and counts below are exactly these consumers'.
const topology = topologyWith(
  project.registry.filter((c) => ['index', 'notify', 'archive'].includes(c.name)),
);

const bus = { account: '123456789012', region: 'us-east-1' };
const settings: AuditSettings = { ...topology.audit, pageSize: 4, maxPagesPerRun: 2, recheckPerRun: 6 };

/** An inbox that holds exactly the keys a test puts in it (any state: presence is all the audit asks). */
class KeysInbox implements InboxPresence {
  readonly keys = new Set<string>();
  readonly asked: number[] = [];
  add(...keys: InboxKey[]): void {
    for (const k of keys) this.keys.add(recordKey(k));
  }
  async present(keys: readonly InboxKey[]): Promise<ReadonlySet<string>> {
    this.asked.push(keys.length);
    return new Set(keys.map(recordKey).filter((k) => this.keys.has(k)));
  }
}

/** Inserts delivered outbox rows of `type`, delivered `agoSeconds` ago (one delivered_at for all: one mark). */
async function seedDelivered(
  db: SqlClient,
  type: string,
  count: number,
  agoSeconds = 3600,
): Promise<string[]> {
  const { rows } = await db.query<{ event_id: string }>(
    `WITH t AS (SELECT g, gen_random_uuid() AS id FROM generate_series(1, :count) AS g)
     INSERT INTO outbox (event_id, event_type, aggregate_id, aggregate_version, payload, status,
                         delivered_at, bus_event_id)
     SELECT gen_random_uuid(), :type, t.id, 2,
            jsonb_build_object('taskId', t.id, 'version', 2, 'title', 'audited'),
            'delivered', now() - make_interval(secs => :ago::float8), 'bus-' || t.g
       FROM t
     RETURNING event_id`,
    { type, count, ago: agoSeconds },
  );
  return rows.map((r) => r.event_id);
}

const keysOf = (ids: readonly string[], consumers: readonly ConsumerName[]): InboxKey[] =>
  ids.flatMap((eventId) => consumers.map((consumer) => ({ consumer, eventId })));
const everyConsumer: readonly ConsumerName[] = topology.consumerNames;

describe.each(sqlAdapters)('delivery audit [$name]', (adapter: SqlAdapterFactory) => {
  let owner: SqlClient;
  let store: DeliveryAuditStore;
  let closeAll: () => Promise<void>;
  let inbox: KeysInbox;

  beforeAll(async () => {
    const opened = await openTestDatabase(adapter);
    owner = opened.db;
    // The audit as its own role: a statement its grants do not allow fails the test.
    const asAudit = await adapter.open(opened.urlAs('audit'), 'audit');
    store = new DeliveryAuditStore(asAudit.db);
    closeAll = async () => {
      await asAudit.close();
      await opened.close();
    };
  }, 120_000);
  afterAll(() => closeAll());

  beforeEach(async () => {
    inbox = new KeysInbox();
    // Each test walks from an empty outbox and a fresh cursor.
    await owner.query('DELETE FROM outbox');
    await owner.query('DELETE FROM delivery_audit_findings');
    await owner.query(
      'UPDATE delivery_audit SET cursor_delivered_at = NULL, cursor_event_id = NULL, lease_owner = NULL, lease_until = NULL, audited = 0',
    );
  });

  const run = (over: Partial<AuditSettings> = {}) =>
    runDeliveryAudit({ topology, store, inbox, bus, settings: { ...settings, ...over } });

  it('reports exactly the events missing from each consumer the rules route them to, in any state counting as there', async () => {
    const approved = await seedDelivered(owner, topology.eventTypes.approved, 3);
    const withdrawn = await seedDelivered(owner, topology.eventTypes.withdrawn, 2);
    // A type no rule routes: expected nowhere, so missing nowhere.
    await seedDelivered(owner, 'content.unrouted', 2);
    const [a0, a1, a2] = approved as [string, string, string];
    const [w0, w1] = withdrawn as [string, string];
    inbox.add(
      ...keysOf([a0, a2], everyConsumer),
      ...keysOf([a1], ['index', 'notify']),
      ...keysOf([w0], ['index']),
    );
    // Records of consumers no rule routes withdrawals to change nothing.
    inbox.add(...keysOf([w1], ['notify', 'archive']));

    const report = await run({ pageSize: 100 });

    expect(report).toMatchObject({
      ran: true,
      audited: 7,
      pages: 1,
      caughtUp: true,
      found: { index: 1, notify: 0, archive: 1 },
      undelivered: { index: 1, notify: 0, archive: 1 },
    });
    const listed = await store.list(100);
    expect(listed.map((f) => [f.eventId, f.consumer]).sort()).toEqual(
      [
        [a1, 'archive'],
        [w1, 'index'],
      ].sort(),
    );
  });

  it('re-sends the inbox records nothing will retry: the stored event, or one rebuilt from its outbox row', async () => {
    const [whole, truncated, purged] = (await seedDelivered(owner, topology.eventTypes.approved, 3)) as [
      string,
      string,
      string,
    ];
    await owner.query('DELETE FROM outbox WHERE event_id = :purged', { purged: sqlParam.uuid(purged) });
    const stored = { id: 'bus-stored', detail: { id: whole } };
    const record = (eventId: string, event: unknown) =>
      ({ consumer: 'notify', eventId, event }) as InboxRecord;
    const asked: { consumer: string; before: number }[] = [];
    const sent: { consumer: ConsumerName; event: unknown }[] = [];
    const now = Date.parse('2026-12-05T12:00:00Z');

    const report = await runDeliveryAudit({
      topology,
      store,
      inbox,
      bus,
      settings: { ...settings, stuckAfterSeconds: 600 },
      stuck: {
        inbox: {
          stuck: async (consumer, before) => {
            asked.push({ consumer, before });
            return consumer === 'notify'
              ? [record(whole, stored), record(truncated, '{"version":"0","id":"bus-'), record(purged, '{')]
              : [];
          },
        },
        redelivery: { redeliver: async (consumer, event) => void sent.push({ consumer, event }) },
        clock: () => now,
      },
    });

    expect(asked.map((a) => a.before)).toEqual(everyConsumer.map(() => now - 600_000));
    expect(report).toMatchObject({ resent: { index: 0, notify: 2, archive: 0 }, unsendable: 1 });
    expect(sent).toEqual([
      { consumer: 'notify', event: stored },
      {
        consumer: 'notify',
        event: expect.objectContaining({ detail: expect.objectContaining({ id: truncated }) }),
      },
    ]);
  });

  it('leaves an event delivered within the grace period for a later run, by the database’s clock', async () => {
    const [recent] = await seedDelivered(owner, topology.eventTypes.approved, 1, 10);
    expect(await run({ graceSeconds: 300 })).toMatchObject({ audited: 0, caughtUp: true });
    await owner.query("UPDATE outbox SET delivered_at = delivered_at - interval '5 minutes'");
    const report = await run({ graceSeconds: 300 });
    expect(report).toMatchObject({ audited: 1, found: { index: 1, notify: 1, archive: 1 } });
    expect((await store.list(10)).map((f) => f.eventId)).toEqual([recent, recent, recent]);
  });

  it('walks in bounded pages behind its cursor: each run reads at most maxPagesPerRun pages, the next goes on, no event twice', async () => {
    // 19 events with one delivered_at (one relay mark): the event id orders the ties.
    const ids = await seedDelivered(owner, topology.eventTypes.withdrawn, 19);
    const audited: number[] = [];
    for (let i = 0; i < 4; i++) audited.push((await run()).audited);
    expect(audited).toEqual([8, 8, 3, 0]);
    // Each presence check asked one page's keys (4 events x 1 consumer) or the open findings a
    // run rechecks (at most 6), never the history.
    expect(Math.max(...inbox.asked)).toBe(6);
    expect((await store.list(100)).map((f) => f.eventId).sort()).toEqual([...ids].sort());
    expect((await store.state(0)).audited).toBe(19);
    // A later delivery is read from where the walk stopped, not from the start.
    const [later] = await seedDelivered(owner, topology.eventTypes.withdrawn, 1, 600);
    expect(await run()).toMatchObject({ audited: 1, found: { index: 1 } });
    expect((await store.list(100)).filter((f) => f.eventId === later)).toHaveLength(1);
  });

  it('clears a finding once its record arrives (a redrive, or a delivery that was only late), and not before', async () => {
    const [id] = (await seedDelivered(owner, topology.eventTypes.withdrawn, 1)) as [string];
    expect((await run()).undelivered.index).toBe(1);
    expect(await run()).toMatchObject({ cleared: 0, undelivered: { index: 1 } });
    inbox.add({ consumer: 'index', eventId: id });
    expect(await run()).toMatchObject({ cleared: 1, undelivered: { index: 0 } });
    expect(await store.list(10)).toEqual([]);
  });

  it('tells how far behind it is, and nothing once caught up', async () => {
    await seedDelivered(owner, topology.eventTypes.withdrawn, 9, 3600);
    const before = await store.state(0);
    expect(before.cursor).toBeNull();
    expect(before.behindSeconds).toBeGreaterThanOrEqual(3600);
    await run();
    const midway = await store.state(0);
    expect(midway.cursor).not.toBeNull();
    expect(midway.lastRunAudited).toBe(8);
    await run();
    expect((await store.state(0)).behindSeconds).toBe(0);
  });

  it('does nothing while another run holds the lease, and takes over once it lapses', async () => {
    await seedDelivered(owner, topology.eventTypes.withdrawn, 1);
    expect(await store.acquire('another-run', 60)).toBe(true);
    expect(await run()).toMatchObject({ ran: false, audited: 0 });
    await owner.query("UPDATE delivery_audit SET lease_until = now() - interval '1 second'");
    expect(await run()).toMatchObject({ ran: true, audited: 1 });
  });

  it('cuts a page to what one Data API answer holds, whatever the payloads', async () => {
    const ids = await seedDelivered(owner, topology.eventTypes.withdrawn, 30);
    await owner.query(
      `UPDATE outbox SET payload = payload || jsonb_build_object('padding', repeat('x', 50000))`,
    );
    const first = await store.nextPage(null, 1_000, 0, topology.relay.claimBytes.perClaim);
    expect(first.length).toBeGreaterThan(0);
    expect(first.length).toBeLessThan(ids.length);
    // And the walk still reaches every event, a cut page at a time.
    let audited = 0;
    for (let i = 0; i < 10 && audited < ids.length; i++) audited += (await run({ pageSize: 1_000 })).audited;
    expect(audited).toBe(ids.length);
  });
});

describe('delivery audit on an empty outbox', () => {
  it('a run over an empty outbox audits nothing and finds nothing', async () => {
    const opened = await openTestDatabase();
    try {
      const report = await runDeliveryAudit({
        topology,
        store: new DeliveryAuditStore(opened.db),
        inbox: new KeysInbox(),
        bus,
        settings,
      });
      expect(report).toEqual({
        ran: true,
        audited: 0,
        pages: 0,
        found: { index: 0, notify: 0, archive: 0 },
        cleared: 0,
        caughtUp: true,
        undelivered: { index: 0, notify: 0, archive: 0 },
        resent: { index: 0, notify: 0, archive: 0 },
        unsendable: 0,
      });
    } finally {
      await opened.close();
    }
  });
});
