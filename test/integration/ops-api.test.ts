import { randomUUID } from 'node:crypto';
import { inspect } from 'node:util';
import { afterAll, beforeAll, beforeEach, expect, it, vi } from 'vitest';
import { topology as project, topologyWith } from '../../functions/topology';
import { DeliveryAuditStore } from '../../shared/audit/audit-store';
import { runDeliveryAudit } from '../../shared/audit/delivery-audit';
import { readDelivery } from '../../shared/consumers/delivery';
import { PgSqlClient } from '../../shared/db/pg-client';
import { type Row, type SqlClient, type SqlValue, sqlParam } from '../../shared/db/sql-client';
import { type OutboundEvent, toCloudEvent } from '../../shared/events/cloud-event';
import { localLambdaContext, toProxyEvent } from '../../shared/http/proxy-event';
import { retryAfterSeconds } from '../../shared/http/unavailable';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { InboxError } from '../../shared/inbox/errors';
import type { InboxOps } from '../../shared/inbox/inbox-ops';
import { createOpsApi, type OpsApiDeps, opsApiResources, opsListLimits } from '../../shared/ops/ops-api';
import type {
  ConsumerRedelivery,
  DeadLetter,
  DeadLetterStore,
  PipelineHealth,
} from '../../shared/ops/ops-ports';
import type { ConsumerName } from '../../shared/topology';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { describeEachEngine } from '../support/dynamo';
import { approvedRow, busEvent } from '../support/dynamo-consumer-fixtures';
import { deferred } from '../support/gates';
import { seedPending } from '../support/outbox-fixtures';

// This test's own pipeline: the three consumers the project ships, whatever else its registry
// holds, so the findings and counts below are exactly these consumers'.
const topology = topologyWith(
  project.registry.filter((c) => ['index', 'notify', 'archive'].includes(c.name)),
);

/** Dead letters in memory, as a bus would keep them. */
class MemoryDeadLetters implements DeadLetterStore {
  letters: DeadLetter[] = [];
  redriven: DeadLetter[] = [];
  async count() {
    return this.letters.length;
  }
  async list(limit: number) {
    return this.letters.slice(0, limit);
  }
  async redrive(target: { id: string; consumer?: ConsumerName } | 'all') {
    const hit = this.letters.filter(
      (d) => target === 'all' || (d.id === target.id && (!target.consumer || d.consumer === target.consumer)),
    );
    this.letters = this.letters.filter((d) => !hit.includes(d));
    this.redriven.push(...hit);
    return hit.length;
  }
}

const health: PipelineHealth = {
  alarms: async () => ({ 'oldest-pending-age': 'OK' }),
  relay: async () => ({ lastRunAt: null, errors: 0 }),
};

describeEachEngine('ops API', (fixture) => {
  let database: TestDatabase;
  let owner: SqlClient;
  let asOps: SqlClient;
  let inbox: DynamoInboxStore;
  let inboxOps: DynamoInboxOps;
  let deadLetters: MemoryDeadLetters;
  let redelivered: { consumer: ConsumerName; event: unknown }[];
  let nudges: number;

  beforeAll(async () => {
    database = await createTestDatabase();
    owner = new PgSqlClient({ connectionString: database.url });
    // The ops API reads and redrives as the ops role: a missing grant fails here.
    asOps = new PgSqlClient({ connectionString: database.urlAs('ops') });
  });
  afterAll(async () => {
    await asOps.close();
    await owner.close();
    await database.drop();
  });
  beforeEach(async () => {
    await owner.query('DELETE FROM outbox');
    await owner.query('DELETE FROM tasks');
    inbox = new DynamoInboxStore(fixture().client, fixture().inbox);
    inboxOps = new DynamoInboxOps(fixture().client, fixture().inbox);
    deadLetters = new MemoryDeadLetters();
    redelivered = [];
    nudges = 0;
  });

  function api(overrides: Partial<OpsApiDeps> = {}) {
    const redelivery: ConsumerRedelivery = {
      redeliver: async (consumer, event) => void redelivered.push({ consumer, event }),
    };
    return createOpsApi({
      topology,
      db: asOps,
      inbox: inboxOps,
      inboxStore: inbox,
      deadLetters,
      redelivery,
      health,
      nudger: { nudge: async () => void nudges++ },
      logger: { error: vi.fn(), warn: vi.fn() },
      ...overrides,
    });
  }

  async function call(
    method: string,
    url: string,
    body?: unknown,
    deps: Partial<OpsApiDeps> = {},
    /** The invocation's remaining time (a redrive of everything answers 5 s before it ends). */
    timeoutMs = 30_000,
  ) {
    const result = await api(deps)(
      toProxyEvent(
        {
          method,
          url,
          headers: body === undefined ? {} : { 'content-type': 'application/json' },
          body: body === undefined ? null : JSON.stringify(body),
        },
        opsApiResources,
      ),
      localLambdaContext('ops-api-test', timeoutMs),
    );
    return { status: result.statusCode, body: JSON.parse(result.body), headers: result.headers ?? {} };
  }

  /** A DEAD record of `consumer` holding a real bus event, as a consumer that gave up leaves it. */
  async function deadRecord(consumer: ConsumerName, event: unknown = busEvent(approvedRow())) {
    const eventId = randomUUID();
    await inbox.begin({
      consumer,
      eventId,
      owner: 'a',
      leaseUntil: 10,
      payloadHash: 'h',
      eventType: 'content.approved',
      subject: null,
      event,
      now: 1,
    });
    await inbox.markDead(
      { consumer, eventId },
      { status: 'PROCESSING', leaseOwner: 'a' },
      { now: 2, reason: 'gave up', expiresAt: 2_000_000_000 },
    );
    return eventId;
  }

  it('answers the status with inbox counts from the sparse index, and nulls where nothing counts', async () => {
    // The fixture's table is shared by this file's tests: count this test's consumer deltas.
    const before = (await call('GET', '/ops/status')).body;
    await deadRecord('notify');
    const logger = { error: vi.fn(), warn: vi.fn() };
    const { status, body } = await call('GET', '/ops/status', undefined, { logger });
    // A 500 says only "internal error": the logged cause goes with the failure.
    expect(status, inspect(logger.error.mock.calls, { depth: 5 })).toBe(200);
    expect(body.consumers.notify.dead).toBe(before.consumers.notify.dead + 1);
    expect(body.consumers.notify.processed).toBeNull();
    expect(body).toMatchObject({
      effects: null,
      journal: null,
      deadLetters: 0,
      alarms: { 'oldest-pending-age': 'OK' },
    });
    expect(Object.keys(body).sort()).toEqual(
      [
        'alarms',
        'audit',
        'components',
        'consumers',
        'deadLetters',
        'effects',
        'journal',
        'outbox',
        'relay',
        'tasks',
      ].sort(),
    );
    expect(body.components).toEqual({ postgres: { up: true }, dynamo: { up: true }, bus: { up: true } });
  });

  it('answers the status with a store down: 200, that component down with its cause, every other section read', async () => {
    await seedPending(owner, 2);
    const down = (what: string) => async () => {
      throw new Error(`connect ECONNREFUSED 127.0.0.1:1 (${what})`);
    };
    const failingInbox = new Proxy(inboxOps, {
      get: (target, name, receiver) =>
        name === 'openFigures' ? down('inbox') : Reflect.get(target, name, receiver),
    });
    const failingLetters: DeadLetterStore = {
      count: down('dead letters'),
      list: (limit) => deadLetters.list(limit),
      redrive: (target) => deadLetters.redrive(target),
    };
    const logger = { error: vi.fn(), warn: vi.fn() };

    const { status, body } = await call('GET', '/ops/status', undefined, {
      inbox: failingInbox,
      deadLetters: failingLetters,
      logger,
    });

    expect(status, inspect(logger.error.mock.calls, { depth: 5 })).toBe(200);
    expect(body.components).toEqual({
      postgres: { up: true },
      dynamo: { up: false, cause: 'connect ECONNREFUSED 127.0.0.1:1 (inbox)' },
      bus: { up: false, cause: 'connect ECONNREFUSED 127.0.0.1:1 (dead letters)' },
    });
    expect(body).toMatchObject({ consumers: null, deadLetters: null, outbox: { pending: 2 } });
    expect(body.tasks).not.toBeNull();
    expect(body.audit).not.toBeNull();
    expect(logger.warn).toHaveBeenCalledWith(
      'a status section could not be read',
      expect.objectContaining({ section: 'consumers', component: 'dynamo' }),
    );
  });

  it('answers at its read deadline while PostgreSQL holds its reads: the status 200 with postgres down and why, a list 503 with Retry-After', async () => {
    await seedPending(owner, 1);
    const locked = deferred();
    const release = deferred();
    // The outbox locked against every read, as a hung holder of a lock keeps it.
    const holder = owner.transaction(async (tx) => {
      await tx.query('SET LOCAL idle_in_transaction_session_timeout = 0');
      await tx.query('LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE');
      locked.resolve();
      await release.promise;
    });
    await locked.promise;
    // Below the ops role's lock_timeout (5 s), so the deadline ends the wait, not PostgreSQL.
    const readTimeoutMs = 2_000;
    let status: Awaited<ReturnType<typeof call>>;
    let list: Awaited<ReturnType<typeof call>>;
    try {
      status = await call('GET', '/ops/status', undefined, { readTimeoutMs });
      list = await call('GET', '/ops/outbox/dead', undefined, { readTimeoutMs });
    } finally {
      release.resolve();
      await holder;
    }

    expect(status.status).toBe(200);
    expect(status.body.components.postgres).toEqual({ up: false, cause: 'no answer within 2 s' });
    expect(status.body).toMatchObject({ outbox: null, deadLetters: 0 });
    expect(list.status).toBe(503);
    expect(list.headers['retry-after']).toBe(String(retryAfterSeconds));
    expect(list.body).toEqual({
      error: 'the stores this read needs gave no answer within 2 s; try again later',
    });
    // What waited on the lock is left to the pool's own bounds; the next read is answered.
    expect((await call('GET', '/ops/outbox/dead')).status).toBe(200);
  });

  it('answers the status with the components the realization watches as it reports them', async () => {
    const since = '2026-01-01T00:00:00.000Z';
    const watching: PipelineHealth = {
      ...health,
      components: async () => ({ postgres: { up: false, cause: 'postmaster exited (SIGKILL)', since } }),
    };

    const { body } = await call('GET', '/ops/status', undefined, { health: watching });

    expect(body.components.postgres).toEqual({ up: false, cause: 'postmaster exited (SIGKILL)', since });
  });

  /** A delivered outbox row of `row`, delivered an hour ago, as the relay leaves it. */
  async function delivered(row: OutboundEvent, busEventId = randomUUID()) {
    await owner.query(
      `INSERT INTO outbox (event_id, event_type, aggregate_id, aggregate_version, payload, created_at,
                           status, delivered_at, bus_event_id)
       VALUES (:eventId, :eventType, :aggregateId, :version, :payload, :createdAt, 'delivered',
               now() - interval '1 hour', :busEventId)`,
      {
        eventId: sqlParam.uuid(row.eventId),
        eventType: row.eventType,
        aggregateId: sqlParam.uuid(row.aggregateId),
        version: row.aggregateVersion,
        payload: sqlParam.json(row.payload),
        createdAt: sqlParam.timestamp(row.createdAt),
        busEventId,
      },
    );
    return busEventId;
  }

  /** One run of the delivery audit as its own role, over this file's inbox. */
  async function audit() {
    const asAudit = new PgSqlClient({ connectionString: database.urlAs('audit') });
    try {
      return await runDeliveryAudit({
        topology,
        store: new DeliveryAuditStore(asAudit),
        inbox: inboxOps,
        bus: { account: '123456789012', region: 'us-east-1' },
      });
    } finally {
      await asAudit.close();
    }
  }

  it('lists what the audit found missing, and re-sends each as the bus delivered it, which the consumer accepts', async () => {
    await owner.query('DELETE FROM delivery_audit_findings');
    const row = approvedRow();
    const busEventId = await delivered(row);
    // index has its record; notify and archive never got the event.
    await inbox.begin({
      consumer: 'index',
      eventId: row.eventId,
      owner: 'o',
      leaseUntil: 5,
      payloadHash: 'h',
      eventType: row.eventType,
      subject: row.aggregateId,
      event: {},
      now: 1,
    });
    expect((await audit()).found).toEqual({ index: 0, notify: 1, archive: 1 });

    const listing = await call('GET', '/ops/audit');
    expect(listing.status).toBe(200);
    expect(listing.body.undelivered).toEqual({ index: 0, notify: 1, archive: 1 });
    expect(listing.body.findings.map((f: { consumer: string }) => f.consumer).sort()).toEqual([
      'archive',
      'notify',
    ]);
    expect(listing.body.findings[0]).toMatchObject({ eventId: row.eventId, redrivenAt: null, redrives: 0 });
    expect((await call('GET', '/ops/audit?consumer=notify')).body.findings).toHaveLength(1);
    expect((await call('GET', '/ops/audit?consumer=nope')).status).toBe(400);
    expect((await call('GET', '/ops/status')).body.audit.undelivered).toEqual({
      index: 0,
      notify: 1,
      archive: 1,
    });

    const one = await call('POST', '/ops/audit/redrive', { eventId: row.eventId, consumer: 'notify' });
    expect(one).toMatchObject({ status: 200, body: { redriven: 1, skipped: 0, complete: true } });
    expect(redelivered).toHaveLength(1);
    const sent = redelivered[0] as { consumer: ConsumerName; event: unknown };
    expect(sent.consumer).toBe('notify');
    // The event as the bus delivered it: the relay's bus event id, the same CloudEvent (so the
    // same payload hash), and a delivery the consumer takes as valid.
    expect(sent.event).toMatchObject({
      id: busEventId,
      'detail-type': row.eventType,
      detail: toCloudEvent(row),
    });
    const read = readDelivery(sent.event, 'notify', topology);
    expect(read).toMatchObject({ valid: true, eventId: row.eventId });
    expect(read.payloadHash).toBe(readDelivery(busEvent(row), 'notify', topology).payloadHash);

    // All: only what was not re-sent within the grace period (notify's is on its way).
    expect(await call('POST', '/ops/audit/redrive', { all: true })).toMatchObject({
      body: { redriven: 1, complete: true },
    });
    expect(redelivered.map((r) => r.consumer)).toEqual(['notify', 'archive']);
    // Still listed, noted as re-sent, until an audit run finds the records.
    expect(
      (await call('GET', '/ops/audit')).body.findings.every((f: { redrives: number }) => f.redrives === 1),
    ).toBe(true);
  });

  it('an audit redrive of everything carried on by its since re-sends no finding twice, however long the call lasts', async () => {
    await owner.query('DELETE FROM delivery_audit_findings');
    const row = approvedRow();
    await delivered(row);
    expect((await audit()).found).toEqual({ index: 1, notify: 1, archive: 1 });
    // The grace period over (0 here): a request without since re-sends the findings again.
    const deps = { auditGraceSeconds: 0 };

    const first = await call('POST', '/ops/audit/redrive', { all: true }, deps);
    const next = await call('POST', '/ops/audit/redrive', { all: true, since: first.body.since }, deps);

    expect(first.body).toMatchObject({ redriven: 3, complete: true, since: expect.any(String) });
    expect(next.body).toMatchObject({ redriven: 0, complete: true });
    expect(redelivered).toHaveLength(3);
    expect((await call('POST', '/ops/audit/redrive', { all: true }, deps)).body).toMatchObject({
      redriven: 3,
    });
    expect((await call('POST', '/ops/audit/redrive', { all: true, since: 'yesterday' })).status).toBe(400);
  });

  it('answers 404 for an audit redrive of an event it found nothing missing for, 400 for a bad body, 409 once the outbox purged it', async () => {
    await owner.query('DELETE FROM delivery_audit_findings');
    expect((await call('POST', '/ops/audit/redrive', { eventId: randomUUID() })).status).toBe(404);
    expect((await call('POST', '/ops/audit/redrive', { eventId: 'x' })).status).toBe(400);
    expect(
      (await call('POST', '/ops/audit/redrive', { eventId: randomUUID(), consumer: 'nope' })).status,
    ).toBe(400);
    const row = approvedRow();
    await delivered(row);
    expect((await audit()).found.index).toBe(1);
    await owner.query('DELETE FROM outbox WHERE event_id = :id', { id: sqlParam.uuid(row.eventId) });
    expect((await call('POST', '/ops/audit/redrive', { eventId: row.eventId })).status).toBe(409);
    expect(await call('POST', '/ops/audit/redrive', { all: true })).toMatchObject({
      body: { redriven: 0, skipped: 3, complete: true },
    });
    expect(redelivered).toEqual([]);
  });

  it.each(['2.5', '0', '501', 'abc', '-1', ''])(
    'refuses /ops/events?limit=%s with a 400 naming limit',
    async (limit) => {
      const { status, body } = await call('GET', `/ops/events?limit=${encodeURIComponent(limit)}`);
      expect(status).toBe(400);
      expect(body.fields[0].path).toBe('limit');
    },
  );

  it('lists the latest events, at most the limit asked for, with their titles', async () => {
    await seedPending(owner, 3);
    const { status, body } = await call('GET', '/ops/events?limit=2');
    expect(status).toBe(200);
    expect(body).toHaveLength(2);
    expect(body[0].title).toMatch(/^task /);
  });

  it.each(['toString', 'constructor', '__proto__', 'nope'])(
    'answers 404 for consumer "%s", reading and redriving alike',
    async (name) => {
      expect((await call('GET', `/ops/inbox/${name}/dead`)).status).toBe(404);
      expect((await call('POST', `/ops/inbox/${name}/dead/redrive`, { all: true })).status).toBe(404);
    },
  );

  it('redrives a dead outbox event as the ops role and nudges the relay; 400 for a non-UUID, 404 for none', async () => {
    await seedPending(owner, 2);
    await owner.query("UPDATE outbox SET status = 'dead', last_error = 'x'");
    const { rows } = await owner.query<{ event_id: string }>(
      'SELECT event_id FROM outbox ORDER BY created_at',
    );
    const [first] = rows;
    expect((await call('POST', '/ops/outbox/dead/redrive', { eventId: 'x' })).status).toBe(400);
    expect((await call('POST', '/ops/outbox/dead/redrive', { eventId: randomUUID() })).status).toBe(404);
    expect(await call('POST', '/ops/outbox/dead/redrive', { eventId: first?.event_id })).toMatchObject({
      status: 200,
      body: { redriven: 1 },
    });
    expect(await call('POST', '/ops/outbox/dead/redrive', { all: true })).toMatchObject({
      body: { redriven: 1 },
    });
    expect(nudges).toBe(2);
    const { rows: after } = await owner.query<{ status: string }>('SELECT DISTINCT status FROM outbox');
    expect(after).toEqual([{ status: 'pending' }]);
  });

  it('a redrive of every dead outbox event stops at the deadline with complete: false, and goes on when sent again', async () => {
    await seedPending(owner, 2_500);
    await owner.query("UPDATE outbox SET status = 'dead'");
    // 5 s left: the margin it keeps for answering is already reached after the first statement.
    expect(await call('POST', '/ops/outbox/dead/redrive', { all: true }, {}, 5_000)).toMatchObject({
      body: { redriven: 1_000, complete: false },
    });
    expect(await call('POST', '/ops/outbox/dead/redrive', { all: true })).toMatchObject({
      body: { redriven: 1_500, complete: true },
    });
    const { rows } = await owner.query<{ status: string }>('SELECT DISTINCT status FROM outbox');
    expect(rows).toEqual([{ status: 'pending' }]);
  });

  it('a redrive of every dead outbox event puts each back once, also those the relay makes dead again meanwhile', async () => {
    await seedPending(owner, 2_500);
    await owner.query("UPDATE outbox SET status = 'dead'");
    // As a relay that claims what was put back and finds every entry too large: dead again at
    // once, after each statement of the redrive, before its next.
    const putBack = new Map<string, number>();
    const relayKillsAgain: SqlClient = {
      query: async <R extends Row = Row>(sql: string, params?: Readonly<Record<string, SqlValue>>) => {
        const result = await asOps.query<R>(sql, params);
        if (/SET status = 'pending'/.test(sql)) {
          const { rows } = await owner.query<{ event_id: string }>(
            "UPDATE outbox SET status = 'dead' WHERE status = 'pending' RETURNING event_id",
          );
          for (const r of rows) putBack.set(r.event_id, (putBack.get(r.event_id) ?? 0) + 1);
        }
        return result;
      },
      transaction: (work) => asOps.transaction(work),
      close: async () => {},
    };

    const answer = await call(
      'POST',
      '/ops/outbox/dead/redrive',
      { all: true },
      { db: relayKillsAgain },
      15_000,
    );

    expect(answer.body).toEqual({ redriven: 2_500, complete: true });
    expect(putBack.size).toBe(2_500);
    expect(new Set(putBack.values())).toEqual(new Set([1]));
  });

  it('a redrive of every DEAD inbox record stops between records at the deadline', async () => {
    const ids = [await deadRecord('archive'), await deadRecord('archive')];
    expect(await call('POST', '/ops/inbox/archive/dead/redrive', { all: true }, {}, 5_000)).toMatchObject({
      body: { redriven: 0, complete: false },
    });
    for (const eventId of ids) {
      expect(await inboxOps.get({ consumer: 'archive', eventId })).toMatchObject({ status: 'DEAD' });
    }
    expect(await call('POST', '/ops/inbox/archive/dead/redrive', { all: true })).toMatchObject({
      body: { redriven: 2, complete: true },
    });
  });

  it('a redrive of every DEAD inbox record redrives each once, also those that die again meanwhile', async () => {
    // Each re-send dies again at once, as a consumer whose effect still fails gives up: the
    // record goes back DEAD (fenced on the redrive's ownership) with a newer death, listed again.
    // By the bus event's id: the record's stored event, read back, is another object. More than
    // a page of the dead list, so the redrive lists again after those it redrove first.
    const events = new Map<string, string>();
    for (let i = 0; i < opsListLimits.inboxDead + 10; i++) {
      const event = busEvent(approvedRow());
      events.set(event.id, await deadRecord('notify', event));
    }
    const sends = new Map<string, number>();
    const diesAgain: ConsumerRedelivery = {
      redeliver: async (consumer, event) => {
        const eventId = events.get((event as { id: string }).id);
        if (eventId === undefined) return;
        sends.set(eventId, (sends.get(eventId) ?? 0) + 1);
        const reset = await inboxOps.get({ consumer, eventId });
        await inbox.markDead(
          { consumer, eventId },
          { status: 'FAILED', leaseOwner: reset?.leaseOwner as string },
          { now: Date.now(), reason: 'failed again', expiresAt: 2_000_000_000 },
        );
      },
    };

    const answer = await call(
      'POST',
      '/ops/inbox/notify/dead/redrive',
      { all: true },
      { redelivery: diesAgain },
      15_000,
    );

    expect(answer.body).toMatchObject({ complete: true });
    expect(Object.fromEntries(sends)).toEqual(Object.fromEntries([...events.values()].map((id) => [id, 1])));
  });

  it('redrives by id a FAILED record nothing will retry (its stored event re-sent, unchanged), not one whose retry is due', async () => {
    const failedAt = async (now: number) => {
      const eventId = randomUUID();
      const event = busEvent(approvedRow());
      const base = {
        consumer: 'index',
        eventId,
        owner: 'a',
        payloadHash: 'h',
        eventType: 'content.approved',
      };
      await inbox.begin({ ...base, leaseUntil: now + 10, subject: null, event, now });
      await inbox.fail({ consumer: 'index', eventId }, 'a', {
        now,
        firstAttemptAt: now,
        error: 'the bus journal line of its retry was lost',
        nextAttemptAt: now + 1_000,
        kind: 'transient',
        permanentFailures: 0,
      });
      return { eventId, event };
    };
    const stuck = await failedAt(Date.now() - 3_600_000);
    const retrying = await failedAt(Date.now());

    expect(
      await call(
        'POST',
        '/ops/inbox/index/dead/redrive',
        { eventId: stuck.eventId },
        { stuckAfterSeconds: 600 },
      ),
    ).toMatchObject({ status: 200, body: { redriven: 1 } });
    expect(redelivered).toEqual([{ consumer: 'index', event: stuck.event }]);
    expect(await inboxOps.get({ consumer: 'index', eventId: stuck.eventId })).toMatchObject({
      status: 'FAILED',
      attempts: 1,
    });
    expect(
      (
        await call(
          'POST',
          '/ops/inbox/index/dead/redrive',
          { eventId: retrying.eventId },
          { stuckAfterSeconds: 600 },
        )
      ).status,
    ).toBe(404);
  });

  it('redrives a dead inbox record: reset, then its stored event handed back to the consumer', async () => {
    const event = busEvent(approvedRow());
    const eventId = await deadRecord('index', event);
    expect(await call('POST', '/ops/inbox/index/dead/redrive', { eventId })).toMatchObject({
      status: 200,
      body: { redriven: 1 },
    });
    expect(redelivered).toEqual([{ consumer: 'index', event }]);
    expect(await inboxOps.get({ consumer: 'index', eventId })).toMatchObject({
      status: 'FAILED',
      attempts: 0,
    });
    expect((await call('POST', '/ops/inbox/index/dead/redrive', { eventId })).status).toBe(404);
  });

  it('puts a record back to DEAD and answers 500 when its event cannot be handed back', async () => {
    const eventId = await deadRecord('archive');
    const failing: ConsumerRedelivery = {
      redeliver: async () => {
        throw new Error('Lambda throttled the invoke');
      },
    };
    const { status } = await call(
      'POST',
      '/ops/inbox/archive/dead/redrive',
      { eventId },
      { redelivery: failing },
    );
    expect(status).toBe(500);
    expect(await inboxOps.get({ consumer: 'archive', eventId })).toMatchObject({
      status: 'DEAD',
      lastError: expect.stringContaining('Lambda throttled the invoke'),
    });
  });

  it('answers 500, never 404, when the inbox store fails during a redrive', async () => {
    const eventId = await deadRecord('notify');
    const broken: InboxOps = Object.assign(Object.create(inboxOps) as InboxOps, {
      redrive: async () => {
        throw new InboxError('STORE_ERROR', 'DynamoDB is throttling', {});
      },
    });
    const { status, body } = await call(
      'POST',
      '/ops/inbox/notify/dead/redrive',
      { eventId },
      { inbox: broken },
    );
    expect(status).toBe(500);
    expect(body).toEqual({ error: 'internal error' });
    expect(redelivered).toEqual([]);
  });

  it.each([
    [
      'the outbox store',
      '/ops/outbox/dead/redrive',
      (): Partial<OpsApiDeps> => ({
        db: {
          query: async () => {
            throw new Error('Connection terminated unexpectedly');
          },
          transaction: async () => {
            throw new Error('Connection terminated unexpectedly');
          },
          close: async () => {},
        },
      }),
    ],
    [
      'the dead-letter store',
      '/ops/dead-letters/redrive',
      (): Partial<OpsApiDeps> => ({
        deadLetters: Object.assign(new MemoryDeadLetters(), {
          redrive: async () => {
            throw new Error('SQS is throttling');
          },
        }),
      }),
    ],
  ])('answers 500, never 404, when %s fails during a redrive', async (_store, path, deps) => {
    const { status, body } = await call('POST', path, { eventId: randomUUID() }, deps());
    expect(status).toBe(500);
    expect(body).toEqual({ error: 'internal error' });
  });

  it('leaves a record whose stored event was truncated DEAD and answers 409', async () => {
    const eventId = await deadRecord('index', { huge: 'x'.repeat(70 * 1024) });
    const { status } = await call('POST', '/ops/inbox/index/dead/redrive', { eventId });
    expect(status).toBe(409);
    expect(await inboxOps.get({ consumer: 'index', eventId })).toMatchObject({ status: 'DEAD' });
  });

  it('redrives dead letters by event id (and consumer), or all; 404 for an unknown one', async () => {
    const letter = (id: string, consumer: ConsumerName): DeadLetter => ({
      id,
      consumer,
      rule: 'content-approved',
      attempts: 3,
      error: 'x',
      deadAt: new Date(0).toISOString(),
      event: { id },
    });
    deadLetters.letters = [letter('e1', 'index'), letter('e1', 'notify'), letter('e2', 'archive')];
    expect((await call('POST', '/ops/dead-letters/redrive', { eventId: 'none' })).status).toBe(404);
    expect(
      await call('POST', '/ops/dead-letters/redrive', { eventId: 'e1', consumer: 'notify' }),
    ).toMatchObject({
      body: { redriven: 1 },
    });
    expect(await call('POST', '/ops/dead-letters/redrive', { all: true })).toMatchObject({
      body: { redriven: 2, complete: true },
    });
    expect(deadLetters.letters).toEqual([]);
    expect(
      (await call('POST', '/ops/dead-letters/redrive', { eventId: 'e1', consumer: 'nope' })).status,
    ).toBe(400);
  });

  it('a redrive of all dead letters passes again until a pass finds none (a queue hands out a bounded batch)', async () => {
    // As an SQS queue: one pass receives at most 2 of them.
    const bounded = new MemoryDeadLetters();
    bounded.letters = Array.from({ length: 5 }, (_, i) => ({
      id: `e${i}`,
      consumer: 'index' as const,
      rule: 'content-approved',
      attempts: 3,
      error: 'x',
      deadAt: new Date(0).toISOString(),
      event: { id: `e${i}` },
    }));
    const passes: number[] = [];
    const store: DeadLetterStore = {
      count: () => bounded.count(),
      list: (limit) => bounded.list(limit),
      async redrive(target) {
        const batch = bounded.letters.slice(0, 2);
        bounded.letters = bounded.letters.slice(2);
        passes.push(batch.length);
        return target === 'all' ? batch.length : 0;
      },
    };
    expect(
      await call('POST', '/ops/dead-letters/redrive', { all: true }, { deadLetters: store }, 5_000),
    ).toMatchObject({ body: { redriven: 2, complete: false } });
    expect(
      await call('POST', '/ops/dead-letters/redrive', { all: true }, { deadLetters: store }),
    ).toMatchObject({ body: { redriven: 3, complete: true } });
    expect(passes).toEqual([2, 2, 1, 0]);
  });

  it('traces a task through every consumer; 400 for a bad id, 404 for an unknown task', async () => {
    expect((await call('GET', '/ops/tasks/not-a-uuid/trace')).status).toBe(400);
    expect((await call('GET', `/ops/tasks/${randomUUID()}/trace`)).status).toBe(404);
    const taskId = randomUUID();
    await owner.query(
      `INSERT INTO tasks (task_id, title, status, version) VALUES ('${taskId}', 'T', 'approved', 2)`,
    );
    const eventId = randomUUID();
    await owner.query(
      `INSERT INTO outbox (event_id, event_type, aggregate_id, aggregate_version, payload)
       VALUES ('${eventId}', 'content.approved', '${taskId}', 2, '{"title":"T"}')`,
    );
    await inbox.begin({
      consumer: 'index',
      eventId,
      owner: 'o',
      leaseUntil: 5,
      payloadHash: 'h',
      eventType: 'content.approved',
      subject: taskId,
      event: {},
      now: 1,
    });
    const { status, body } = await call('GET', `/ops/tasks/${taskId}/trace`);
    expect(status).toBe(200);
    expect(body.events).toHaveLength(1);
    expect(body.events[0]).toMatchObject({
      eventId,
      title: 'T',
      consumers: { index: { status: 'PROCESSING', attempts: 1 }, notify: null, archive: null },
    });
  });

  it("lists a consumer's dead records with the task each is about as taskId (the inbox's subject)", async () => {
    const taskId = randomUUID();
    const eventId = randomUUID();
    await inbox.recordPoison({
      consumer: 'notify',
      eventId,
      cloudEventId: eventId,
      subject: taskId,
      eventType: 'content.approved',
      payloadHash: 'h',
      reason: 'a test poison',
      event: {},
      now: 1,
      expiresAt: Math.floor(Date.now() / 1000) + 3_600,
    });
    const { status, body } = await call('GET', '/ops/inbox/notify/dead');
    expect(status).toBe(200);
    const listed = (body as Record<string, unknown>[]).find((r) => r.eventId === eventId);
    expect(listed).toMatchObject({ consumer: 'notify', status: 'DEAD', taskId });
    expect(listed).not.toHaveProperty('subject');
  });
});
