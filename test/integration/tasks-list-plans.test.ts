import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { QueryResult, Row, SqlClient, SqlParams } from '../../shared/db/sql-client';
import { listTasks, type TaskStatus } from '../../shared/tasks/task-store';
import { openTestDatabase, pgAdapter } from '../support/sql-adapters';

// `GET /tasks` must cost a page, never the table: with 100,000 tasks (analyzed, as autovacuum
// would have), each listing statement (all tasks or one status, first page or deep behind a
// cursor) reads an index backwards and never scans `tasks` sequentially. Asserted on plans,
// not timings, as test/integration/outbox-plans.test.ts does for the outbox.

interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly 'Index Name'?: string;
  readonly 'Scan Direction'?: string;
  readonly Plans?: readonly PlanNode[];
}

const nodesOf = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodesOf)];

describe('the task listing on a table of 100,000 tasks', () => {
  let db: SqlClient;
  let close: () => Promise<void>;
  const statements: { sql: string; params: SqlParams | undefined }[] = [];

  beforeAll(async () => {
    const opened = await openTestDatabase(pgAdapter);
    db = opened.db;
    close = opened.close;
    await db.query(
      `INSERT INTO tasks (task_id, title, status, created_at, updated_at)
       SELECT gen_random_uuid(), 'task ' || g,
              (ARRAY['pending_review', 'approved', 'approved', 'withdrawn', 'rejected'])[1 + g % 5],
              now() - make_interval(secs => g::float8), now()
         FROM generate_series(1, 100000) AS g`,
    );
    await db.query('ANALYZE tasks');
  });
  afterAll(() => close());

  const recording: SqlClient = {
    query<R extends Row = Row>(sql: string, params?: SqlParams): Promise<QueryResult<R>> {
      statements.push({ sql, params });
      return db.query<R>(sql, params);
    },
    transaction: (work) => db.transaction(work),
    close: async () => {},
  };

  async function planOf(run: () => Promise<unknown>): Promise<PlanNode[]> {
    const before = statements.length;
    await run();
    const [s] = statements.slice(before);
    if (!s) throw new Error('the listing ran no statement');
    const { rows } = await db.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(
      `EXPLAIN (FORMAT JSON) ${s.sql}`,
      s.params,
    );
    const plan = rows[0]?.['QUERY PLAN'][0]?.Plan;
    if (!plan) throw new Error(`no plan for ${s.sql}`);
    return nodesOf(plan);
  }

  /** The key of the task 15,000 deep into the listing of `status` (or of all). */
  async function deepKey(status?: TaskStatus) {
    const { rows } = await db.query<{ at: string; id: string }>(
      `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at, task_id AS id
         FROM tasks ${status ? 'WHERE status = :status' : ''}
        ORDER BY created_at DESC, task_id DESC OFFSET 15000 LIMIT 1`,
      status ? { status } : {},
    );
    const row = rows[0];
    if (!row) throw new Error('no task that deep');
    return { createdAt: row.at, taskId: row.id };
  }

  it.each([
    ['every task, first page', undefined, false, 'tasks_created_idx'],
    ['every task, deep behind a cursor', undefined, true, 'tasks_created_idx'],
    ['pending tasks, first page', 'pending_review', false, 'tasks_status_created_idx'],
    ['approved tasks, deep behind a cursor', 'approved', true, 'tasks_status_created_idx'],
    ['rejected tasks, deep behind a cursor', 'rejected', true, 'tasks_status_created_idx'],
  ] as const)(
    '%s: reads its index backwards, no sort, no sequential scan of tasks',
    async (_name, status, deep, index) => {
      const after = deep ? await deepKey(status) : undefined;

      const plan = await planOf(() => listTasks(recording, { status, limit: 20, after }));

      expect(plan.filter((n) => /Seq Scan/.test(n['Node Type']) && n['Relation Name'] === 'tasks')).toEqual(
        [],
      );
      expect(plan.filter((n) => /Sort/.test(n['Node Type']))).toEqual([]);
      expect(plan.find((n) => n['Relation Name'] === 'tasks')).toMatchObject({
        'Index Name': index,
        'Scan Direction': 'Backward',
      });
    },
  );
});
