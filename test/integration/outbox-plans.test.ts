import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { DeliveryAuditStore } from '../../shared/audit/audit-store';
import type { QueryResult, Row, SqlClient, SqlParams } from '../../shared/db/sql-client';
import { latestEvents, taskCounts } from '../../shared/ops/ops-queries';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { RelayCircuitStore } from '../../shared/outbox/relay-circuit';
import { seedPending, testSettings } from '../support/outbox-fixtures';
import { openTestDatabase, pgAdapter } from '../support/sql-adapters';

// Every statement the relay runs on its hot path, and what an operator reads, must cost what
// the rows still to deliver cost, never what the delivered history costs. Asserted on plans,
// not timings: with 200,000 delivered rows (analyzed, as autovacuum would have), no statement's
// plan reads `outbox` sequentially. `npm run bench:growth` measures the times.

/** A SqlClient that records each statement it runs, with its parameters. */
function recording(db: SqlClient) {
  const statements: { sql: string; params: SqlParams | undefined }[] = [];
  const client: SqlClient = {
    query<R extends Row = Row>(sql: string, params?: SqlParams): Promise<QueryResult<R>> {
      statements.push({ sql, params });
      return db.query<R>(sql, params);
    },
    transaction: (work) => db.transaction(work),
    close: async () => {},
  };
  return { client, statements };
}

interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly 'Index Name'?: string;
  readonly 'Index Cond'?: string;
  readonly Plans?: readonly PlanNode[];
}

/** A plain or parallel sequential scan of the outbox. */
const readsOutboxSequentially = (n: PlanNode) =>
  /Seq Scan/.test(n['Node Type']) && n['Relation Name'] === 'outbox';

/** Every node of a plan, depth first. */
const nodesOf = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodesOf)];

describe('the relay and ops statements on an outbox with a long delivered history', () => {
  let db: SqlClient;
  let close: () => Promise<void>;
  const plans = new Map<string, PlanNode[]>();

  beforeAll(async () => {
    const opened = await openTestDatabase(pgAdapter);
    db = opened.db;
    close = opened.close;
    await db.query(
      `INSERT INTO outbox (event_id, event_type, aggregate_id, aggregate_version, payload, status,
                           created_at, delivered_at, bus_event_id)
       SELECT gen_random_uuid(), 'content.approved', gen_random_uuid(), 2, '{"title":"delivered"}', 'delivered',
              now() - make_interval(secs => g::float8 / 10), now() - make_interval(secs => g::float8 / 10), 'bus'
         FROM generate_series(1, 200000) AS g`,
    );
    await seedPending(db, 300);
    await db.query(
      "UPDATE outbox SET status = 'dead' WHERE event_id IN (SELECT event_id FROM outbox WHERE status = 'pending' LIMIT 20)",
    );
    await db.query('ANALYZE outbox');

    // Each statement once, as the relay and the ops API send it.
    const { client, statements } = recording(db);
    const store = new OutboxStore(client);
    const settings = testSettings();
    const claim = await store.claim('relay-plans', {
      rows: settings.claimBatchSize,
      leaseSeconds: settings.leaseSeconds,
      bytes: settings.claimBytes,
      maxUnsettledClaims: settings.maxUnsettledClaims,
    });
    const [first, second, third] = claim.claimed;
    if (!first || !second || !third) throw new Error('expected claimed rows');
    const named = (name: string, run: () => Promise<unknown>) => async () => {
      const before = statements.length;
      await run();
      for (const [i, s] of statements.slice(before).entries()) plans.set(`${name}#${i}`, await planOf(s));
    };
    const planOf = async (s: { sql: string; params: SqlParams | undefined }) => {
      const { rows } = await db.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(
        `EXPLAIN (FORMAT JSON) ${s.sql}`,
        s.params,
      );
      const plan = rows[0]?.['QUERY PLAN'][0]?.Plan;
      if (!plan) throw new Error(`no plan for ${s.sql}`);
      return nodesOf(plan);
    };
    plans.set('claim#0', await planOf(statements[0] as (typeof statements)[number]));
    await named('markDelivered', () =>
      store.markDelivered([{ eventId: first.eventId, busEventId: randomUUID() }]),
    )();
    await named('markFailed', () =>
      store.markFailed('relay-plans', [{ ...second, error: 'x', dead: false, retryInMs: 1_000 }]),
    )();
    await named('release', () => store.release('relay-plans', [third]))();
    await named('stats', () => store.stats())();
    // Closing the circuit makes every waiting row due in the same statement.
    await new RelayCircuitStore(db).open('the plans test', 0);
    await named('circuitClose', () => new RelayCircuitStore(client).close())();
    await named('purgeDelivered', () => store.purgeDelivered(24 * 7, 500))();
    await named('deliveredCount', () => store.deliveredCount())();
    await named('listDead', () => store.listDead(100))();
    await named('redriveDeadBatch', () => store.redriveDeadBatch(10))();
    await named('latestEvents', () => latestEvents(client, 20))();
    await named('taskCounts', () => taskCounts(client))();
    // The delivery audit's walk: from the start, and from a cursor deep into the history (the
    // rows before it must not be read again), and its lag.
    const audit = new DeliveryAuditStore(client);
    await named('auditFirstPage', () =>
      audit.nextPage(null, 1_000, 300, topology.relay.claimBytes.perClaim),
    )();
    const { rows: deep } = await db.query<{ at: string; id: string }>(
      `SELECT delivered_at::text AS at, event_id AS id FROM outbox WHERE status = 'delivered'
        ORDER BY delivered_at DESC, event_id DESC OFFSET 1000 LIMIT 1`,
    );
    const cursor = { deliveredAt: deep[0]?.at as string, eventId: deep[0]?.id as string };
    await named('auditPageAfterCursor', () =>
      audit.nextPage(cursor, 1_000, 300, topology.relay.claimBytes.perClaim),
    )();
    await named('auditState', () => audit.state(300))();
  }, 600_000);
  afterAll(() => close());

  it('plans every statement it meant to', () => {
    expect([...plans.keys()].map((k) => k.split('#')[0])).toEqual([
      'claim',
      'markDelivered',
      'markFailed',
      'release',
      'stats',
      'circuitClose',
      'purgeDelivered',
      'deliveredCount',
      'listDead',
      'redriveDeadBatch',
      'latestEvents',
      'taskCounts',
      'auditFirstPage',
      'auditPageAfterCursor',
      'auditState',
      'auditState',
    ]);
  });

  it('no statement reads the outbox sequentially', () => {
    const scans = [...plans].flatMap(([name, nodes]) =>
      nodes.filter(readsOutboxSequentially).map(() => name),
    );
    expect(scans).toEqual([]);
  });

  it('the audit reads a page after its cursor as a range of the delivered rows’ index, not from the start', () => {
    const page = plans.get('auditPageAfterCursor#0') ?? [];
    const scans = page.filter((n) => n['Relation Name'] === 'outbox');
    expect(scans.map((n) => n['Node Type'])).toEqual(['Index Scan']);
    expect(scans[0]?.['Index Name']).toBe('outbox_delivered_walk_idx');
    expect(String(scans[0]?.['Index Cond'])).toContain('ROW(');
  });

  it('the test would see one: a count of every row is planned as a sequential scan', async () => {
    const { rows } = await db.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(
      "EXPLAIN (FORMAT JSON) SELECT count(*) FILTER (WHERE status = 'delivered') FROM outbox",
    );
    const nodes = nodesOf(rows[0]?.['QUERY PLAN'][0]?.Plan as PlanNode);
    expect(nodes.some(readsOutboxSequentially)).toBe(true);
  });
});
