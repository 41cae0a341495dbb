import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SqlClient } from '../../shared/db/sql-client';
import { toProxyEvent } from '../../shared/http/proxy-event';
import { tasksApiRoutes } from '../../shared/tasks/tasks-api';
import {
  asCaller,
  callApi,
  jsonRequest,
  openTasksApi,
  outboxRows,
  taskState,
  testCaller,
} from './tasks-api-harness';

describe('tasks API refuses bad input with a clear JSON error and changes nothing', () => {
  let h: Awaited<ReturnType<typeof openTasksApi>>;

  beforeAll(async () => {
    h = await openTasksApi();
  });
  afterAll(async () => {
    await h.close();
  });

  async function freshTask(): Promise<string> {
    return (await h.call(jsonRequest('POST', '/tasks', { title: 'Bad input' }))).body.taskId;
  }

  async function taskCount(): Promise<number> {
    const { rows } = await h.truth.query<{ n: number }>('SELECT count(*)::int AS n FROM tasks');
    return rows[0]?.n ?? -1;
  }

  async function expectUnchanged(id: string, outboxBefore: unknown[]): Promise<void> {
    expect(await taskState(h.truth, id)).toEqual({ status: 'pending_review', version: 1, reviewer: null });
    expect(await outboxRows(h.truth)).toEqual(outboxBefore);
  }

  it('answers 400 with a body-level field for invalid JSON', async () => {
    const id = await freshTask();
    const before = await outboxRows(h.truth);

    const res = await h.call(jsonRequest('POST', `/tasks/${id}/approve`, '{"approvedBy": "rita",'));

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: 'request body is not valid JSON',
      fields: [{ path: '', message: expect.any(String) }],
    });
    await expectUnchanged(id, before);
  });

  it('answers 400 naming taskId for a non-UUID id', async () => {
    const before = await outboxRows(h.truth);

    const res = await h.call(jsonRequest('POST', '/tasks/not-a-uuid/approve', {}));

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: 'invalid request',
      fields: [{ path: 'taskId', message: 'must be a UUID' }],
    });
    expect(await outboxRows(h.truth)).toEqual(before);
  });

  it('answers 400 naming taskId for a GET with a non-UUID id', async () => {
    const res = await h.call(jsonRequest('GET', '/tasks/42', undefined, {}));

    expect(res.status).toBe(400);
    expect(res.body.fields).toEqual([{ path: 'taskId', message: 'must be a UUID' }]);
  });

  it('answers 400 naming approvedBy when a body still names a reviewer: the caller is the reviewer', async () => {
    const id = await freshTask();
    const before = await outboxRows(h.truth);

    // Before, any caller could approve in anyone's name; rita may not approve as sam.
    const res = await h.call(jsonRequest('POST', `/tasks/${id}/approve`, { approvedBy: 'sam' }));

    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: 'invalid request',
      fields: [{ path: 'approvedBy', message: expect.stringContaining("the caller's identity") }],
    });
    await expectUnchanged(id, before);
  });

  it('records the caller as the reviewer, with or without a body', async () => {
    const [withBody, without] = [await freshTask(), await freshTask()];

    const a = await h.call(
      asCaller(jsonRequest('POST', `/tasks/${withBody}/approve`, {}), 'arn:aws:iam::123456789012:user/sam'),
    );
    const b = await h.call(jsonRequest('POST', `/tasks/${without}/approve`, undefined, {}));

    expect([a.status, b.status]).toEqual([200, 200]);
    expect(await taskState(h.truth, withBody)).toMatchObject({
      reviewer: 'arn:aws:iam::123456789012:user/sam',
    });
    expect(await taskState(h.truth, without)).toMatchObject({ reviewer: testCaller });
  });

  it('answers 403 and changes nothing when no identity vouches for the caller', async () => {
    const id = await freshTask();
    const before = await outboxRows(h.truth);

    const approve = await h.call(asCaller(jsonRequest('POST', `/tasks/${id}/approve`, {}), null));
    const withdraw = await h.call(asCaller(jsonRequest('POST', `/tasks/${id}/withdraw`, {}), '  '));

    expect([approve.status, withdraw.status]).toEqual([403, 403]);
    expect(approve.body).toEqual({ error: expect.stringContaining('no caller identity') });
    await expectUnchanged(id, before);
  });

  it('lists every bad field at once: the id, a named approver and an unknown field', async () => {
    const res = await h.call(
      jsonRequest('POST', '/tasks/xyz/approve', { approvedBy: '   ', approvedAt: 'now' }),
    );

    expect(res.status).toBe(400);
    expect(res.body.fields).toEqual(
      expect.arrayContaining([
        { path: 'taskId', message: 'must be a UUID' },
        { path: 'approvedBy', message: expect.stringContaining("the caller's identity") },
        { path: 'approvedAt', message: 'unknown field' },
      ]),
    );
    expect(res.body.fields).toHaveLength(3);
  });

  it('answers 400 naming title for a create without one, and inserts no task', async () => {
    const before = await taskCount();

    const res = await h.call(jsonRequest('POST', '/tasks', { body: 'text only' }));

    expect(res.status).toBe(400);
    expect(res.body.fields).toEqual([{ path: 'title', message: 'required' }]);
    expect(await taskCount()).toBe(before);
  });

  it('answers 400 naming title when it is too long for the schema', async () => {
    const res = await h.call(jsonRequest('POST', '/tasks', { title: 'x'.repeat(501) }));

    expect(res.status).toBe(400);
    expect(res.body.fields).toEqual([{ path: 'title', message: expect.any(String) }]);
  });

  it('answers 400 naming withdrawnBy when a withdraw names a withdrawer: the caller is the withdrawer', async () => {
    const id = await freshTask();
    const before = await outboxRows(h.truth);

    const res = await h.call(
      jsonRequest('POST', `/tasks/${id}/withdraw`, { withdrawnBy: 'sam', reason: 'no longer needed' }),
    );

    expect(res.status).toBe(400);
    expect(res.body.fields).toEqual([
      { path: 'withdrawnBy', message: expect.stringContaining("the caller's identity") },
    ]);
    await expectUnchanged(id, before);
  });

  it('answers 413 for a body over 64 KB and inserts no task', async () => {
    const before = await taskCount();

    const res = await h.call(jsonRequest('POST', '/tasks', { title: 'Big', body: 'x'.repeat(65 * 1024) }));

    expect(res.status).toBe(413);
    expect(res.body).toEqual({ error: expect.stringContaining('65536'), maxBytes: 65536 });
    expect(await taskCount()).toBe(before);
  });

  it('measures the limit in bytes, not characters', async () => {
    // 40,000 characters, 80,000 bytes in UTF-8.
    const res = await h.call(jsonRequest('POST', '/tasks', { title: 'Wide', body: 'é'.repeat(40_000) }));

    expect(res.status).toBe(413);
  });

  /** A POST /tasks whose body arrives as bytes, so the proxy event carries it base64-encoded. */
  const binaryPost = (json: string) =>
    toProxyEvent(
      {
        method: 'POST',
        url: '/tasks',
        headers: { 'content-type': 'application/json' },
        body: new TextEncoder().encode(json),
      },
      tasksApiRoutes,
    );

  it('decodes a base64 body before measuring and parsing it', async () => {
    // 60 KB of JSON is about 80 KB as base64: accepted, because the limit is on the decoded body.
    const json = JSON.stringify({ title: 'Encoded', body: 'y'.repeat(60 * 1024) });
    const event = binaryPost(json);

    const res = await h.call(event);

    expect(event.isBase64Encoded).toBe(true);
    expect(res.status).toBe(201);
    const got = await h.call(jsonRequest('GET', `/tasks/${res.body.taskId}`, undefined, {}));
    expect(got.body).toMatchObject({ title: 'Encoded', body: 'y'.repeat(60 * 1024) });
  });

  it('answers 413 for a base64 body whose decoded size is over 64 KB', async () => {
    const json = JSON.stringify({ title: 'Encoded', body: 'y'.repeat(65 * 1024) });
    const event = binaryPost(json);

    const res = await h.call(event);

    expect(res.status).toBe(413);
  });

  it('answers 415 for a text/plain body and changes nothing', async () => {
    const id = await freshTask();
    const before = await outboxRows(h.truth);

    const res = await h.call(
      jsonRequest('POST', `/tasks/${id}/approve`, JSON.stringify({}), {
        'Content-Type': 'text/plain',
      }),
    );

    expect(res.status).toBe(415);
    expect(res.body).toEqual({ error: expect.stringContaining('text/plain') });
    await expectUnchanged(id, before);
  });

  it('answers 415 for a body without a content type', async () => {
    const res = await h.call(jsonRequest('POST', '/tasks', { title: 'No type' }, {}));

    expect(res.status).toBe(415);
  });

  it.each<Record<string, string>>([
    { 'CONTENT-TYPE': 'Application/JSON; charset=UTF-8' },
    { 'content-type': 'application/merge-patch+json' },
  ])('accepts JSON content types whatever the header casing: %o', async (headers) => {
    const res = await h.call(jsonRequest('POST', '/tasks', { title: 'Casing' }, headers));

    expect(res.status).toBe(201);
  });
});

describe('tasks API hides unexpected errors behind a generic 500', () => {
  it('answers 500 {error: "internal error"} without the message and logs the error', async () => {
    const secret = new Error('connection to db.internal:5432 failed for user admin password=hunter2');
    const broken: SqlClient = {
      query: () => Promise.reject(secret),
      transaction: () => Promise.reject(secret),
      close: async () => {},
    };
    const h = await openTasksApi({ db: () => broken });
    try {
      const res = await callApi(h.api, jsonRequest('POST', '/tasks', { title: 'Boom' }));

      expect(res.status).toBe(500);
      expect(res.body).toEqual({ error: 'internal error' });
      expect(JSON.stringify(res)).not.toContain('hunter2');
      expect(h.logger.error).toHaveBeenCalledWith('unhandled error', secret);
    } finally {
      await h.close();
    }
  });
});
