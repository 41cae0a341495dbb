import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SqlClient } from '../../shared/db/sql-client';
import { listTasks } from '../../shared/tasks/task-store';
import { createTestDatabase } from '../support/database';
import { sqlAdapters } from '../support/sql-adapters';
import { jsonRequest, openTasksApi } from './tasks-api-harness';

// `GET /tasks` finds a task whose id was lost: newest first, one status or all, in pages whose
// cursor resumes exactly after the last row shown. The seed puts several tasks in the same
// microsecond, so a cursor that kept only the time (or only milliseconds) would skip or repeat.

interface Seeded {
  readonly taskId: string;
  readonly status: string;
  readonly createdAt: string;
}

const statuses = ['pending_review', 'approved', 'withdrawn', 'rejected'] as const;

/** 45 tasks: one a second from 2026-06-01, except tasks 10-15, which share one microsecond. */
async function seed(truth: SqlClient): Promise<Seeded[]> {
  const seeded: Seeded[] = [];
  for (let i = 0; i < 45; i++) {
    const second = i >= 10 && i <= 15 ? 10 : i;
    seeded.push({
      taskId: randomUUID(),
      status: statuses[i % statuses.length] as string,
      createdAt: `2026-06-01T00:00:${String(second).padStart(2, '0')}.123456Z`,
    });
  }
  await truth.query(
    `INSERT INTO tasks (task_id, title, assignee, status, created_at, updated_at)
     SELECT (t->>'taskId')::uuid, 'task ' || (t->>'taskId'), 'ana', t->>'status',
            (t->>'createdAt')::timestamptz, (t->>'createdAt')::timestamptz
       FROM jsonb_array_elements(:tasks::jsonb) AS t`,
    { tasks: JSON.stringify(seeded) },
  );
  return seeded;
}

/** The seeded tasks as the listing must order them: newest first, the larger id first among equals. */
const newestFirst = (tasks: readonly Seeded[]) =>
  [...tasks].sort((a, b) =>
    a.createdAt === b.createdAt ? (a.taskId < b.taskId ? 1 : -1) : a.createdAt < b.createdAt ? 1 : -1,
  );

describe('GET /tasks lists tasks newest first in keyset pages', () => {
  let h: Awaited<ReturnType<typeof openTasksApi>>;
  let seeded: Seeded[];

  beforeAll(async () => {
    h = await openTasksApi();
    seeded = await seed(h.truth);
  });
  afterAll(async () => {
    await h.close();
  });

  const get = (query: string) => h.call(jsonRequest('GET', `/tasks${query}`, undefined, {}));

  /** Every page of `query`, following nextCursor to the end. */
  async function allPages(query: Record<string, string>) {
    const pages: { taskId: string; status: string }[][] = [];
    let cursor: string | null = null;
    do {
      const params = new URLSearchParams({ ...query, ...(cursor ? { cursor } : {}) });
      const res = await get(`?${params}`);
      expect(res.status).toBe(200);
      pages.push(res.body.tasks);
      cursor = res.body.nextCursor;
      expect(pages.length).toBeLessThan(50);
    } while (cursor);
    return pages;
  }

  it('answers the newest 20 by default, each with its id, title, assignee, status, version and times', async () => {
    const res = await get('');

    expect(res.status).toBe(200);
    expect(res.body.tasks).toHaveLength(20);
    const newest = newestFirst(seeded)[0] as Seeded;
    expect(res.body.tasks[0]).toEqual({
      taskId: newest.taskId,
      title: `task ${newest.taskId}`,
      assignee: 'ana',
      status: newest.status,
      version: 1,
      createdAt: '2026-06-01T00:00:44.123Z',
      updatedAt: '2026-06-01T00:00:44.123Z',
    });
    expect(res.body.nextCursor).toEqual(expect.any(String));
  });

  it('pages through every task exactly once, in order, ties in one microsecond included', async () => {
    const pages = await allPages({ limit: '4' });

    expect(pages.map((p) => p.length)).toEqual([...Array(11).fill(4), 1]);
    expect(pages.flat().map((t) => t.taskId)).toEqual(newestFirst(seeded).map((t) => t.taskId));
  });

  it.each([
    ['pending', 'pending_review'],
    ['pending_review', 'pending_review'],
    ['approved', 'approved'],
    ['withdrawn', 'withdrawn'],
    ['rejected', 'rejected'],
  ])('status=%s lists only %s tasks, every one of them across pages', async (asked, stored) => {
    const pages = await allPages({ status: asked, limit: '5' });

    expect(pages.flat().map((t) => t.taskId)).toEqual(
      newestFirst(seeded.filter((t) => t.status === stored)).map((t) => t.taskId),
    );
  });

  it('answers all 45 in one page of 100, with no cursor after the last page', async () => {
    const res = await get('?limit=100');

    expect(res.body.tasks).toHaveLength(45);
    expect(res.body.nextCursor).toBeNull();
  });

  it.each([
    ['status=stale', 'status', /pending_review \(or pending\), approved, withdrawn, rejected/],
    ['status=', 'status', /pending_review \(or pending\), approved, withdrawn, rejected/],
    ['limit=0', 'limit', /1 to 100/],
    ['limit=101', 'limit', /1 to 100/],
    ['limit=-1', 'limit', /1 to 100/],
    ['limit=2.5', 'limit', /1 to 100/],
    ['limit=ten', 'limit', /1 to 100/],
    ['cursor=garbage', 'cursor', /not a cursor this API gave/],
    [`cursor=${Buffer.from('{"s":null,"at":"x","id":"y"}').toString('base64url')}`, 'cursor', /not a cursor/],
    ['stauts=pending', 'stauts', /unknown field/],
  ])('answers 400 naming the parameter for ?%s, and changes nothing', async (query, field, message) => {
    const before = await h.truth.query(
      'SELECT task_id, status, version, updated_at FROM tasks ORDER BY task_id',
    );

    const res = await get(`?${query}`);

    expect(res.status).toBe(400);
    expect(res.body.fields).toEqual([{ path: field, message: expect.stringMatching(message) }]);
    const after = await h.truth.query(
      'SELECT task_id, status, version, updated_at FROM tasks ORDER BY task_id',
    );
    expect(after.rows).toEqual(before.rows);
  });

  it('refuses a cursor given for another status: it would resume a different listing', async () => {
    const first = await get('?status=approved&limit=2');

    const res = await get(`?status=pending&limit=2&cursor=${first.body.nextCursor}`);

    expect(res.status).toBe(400);
    expect(res.body.fields[0]).toMatchObject({ path: 'cursor' });
  });

  it('keeps its pages while tasks change and new ones arrive: the key is the creation time', async () => {
    const first = await get('?limit=10');
    const shown = first.body.tasks.map((t: { taskId: string }) => t.taskId);
    await h.call(jsonRequest('POST', '/tasks', { title: 'arrived meanwhile' }));
    await h.call(jsonRequest('POST', `/tasks/${newestFirst(seeded)[12]?.taskId}/approve`, {}));

    const rest = await get(`?limit=100&cursor=${first.body.nextCursor}`);

    const expected = newestFirst(seeded)
      .map((t) => t.taskId)
      .filter((id) => !shown.includes(id));
    expect(rest.body.tasks.map((t: { taskId: string }) => t.taskId)).toEqual(expected);
  });
});

describe.each(sqlAdapters)('listTasks on the $name adapter', (adapter) => {
  let db: SqlClient;
  let truth: SqlClient;
  let close: () => Promise<void>;
  let seeded: Seeded[];

  beforeAll(async () => {
    const database = await createTestDatabase();
    const { PgSqlClient } = await import('../../shared/db/pg-client');
    truth = new PgSqlClient({ connectionString: database.url });
    const opened = await adapter.open(database.urlAs('tasksApi'), 'tasksApi');
    db = opened.db;
    seeded = await seed(truth);
    close = async () => {
      await opened.close();
      await truth.close();
      await database.drop();
    };
  });
  afterAll(() => close());

  it('resumes after the last row to the microsecond, as the tasks API role', async () => {
    const ids: string[] = [];
    let page = await listTasks(db, { limit: 7 });
    ids.push(...page.tasks.map((t) => t.taskId));
    while (page.next) {
      page = await listTasks(db, { limit: 7, after: page.next });
      ids.push(...page.tasks.map((t) => t.taskId));
    }

    expect(ids).toEqual(newestFirst(seeded).map((t) => t.taskId));
  });
});
