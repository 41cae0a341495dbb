import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonRequest, openTasksApi } from './tasks-api-harness';

/** `POST /tasks` with an Idempotency-Key (or several values of it), as API Gateway passes it. */
const createWith = (body: unknown, key: string | string[]) =>
  jsonRequest('POST', '/tasks', body, {
    'Content-Type': 'application/json',
    'Idempotency-Key': key as string,
  });

describe('POST /tasks with an Idempotency-Key makes one task per key', () => {
  let h: Awaited<ReturnType<typeof openTasksApi>>;

  beforeAll(async () => {
    h = await openTasksApi();
  });
  afterAll(async () => {
    await h.close();
  });

  async function taskCount(): Promise<number> {
    const { rows } = await h.truth.query<{ n: number }>('SELECT count(*)::int AS n FROM tasks');
    return rows[0]?.n ?? -1;
  }

  it('answers the same request sent again under the same key with the same task, marked replayed', async () => {
    const key = randomUUID();
    const before = await taskCount();

    const first = await h.call(createWith({ title: 'Retried launch post' }, key));
    // A retry spelt differently (padding the title trims away) is the same request.
    const again = await h.call(createWith({ title: '  Retried launch post ' }, key));

    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.headers.location).toBe(`/tasks/${first.body.taskId}`);
    expect(again.body).toEqual(first.body);
    expect(await taskCount()).toBe(before + 1);
  });

  it('answers the same key with another request 422 and changes nothing', async () => {
    const key = randomUUID();
    const first = await h.call(createWith({ title: 'First request' }, key));
    const before = await taskCount();

    const other = await h.call(createWith({ title: 'Another request', assignee: 'ana' }, key));

    expect(first.status).toBe(201);
    expect(other.status).toBe(422);
    expect(other.body).toEqual({
      error:
        'this Idempotency-Key was already used with another request; nothing was created: send a new key for a new task',
    });
    expect(await taskCount()).toBe(before);
  });

  it('reads the header whatever its casing, and accepts a key of 255 printable characters', async () => {
    const key = `${'k'.repeat(250)} ~!@#`;
    const first = await h.call(
      jsonRequest(
        'POST',
        '/tasks',
        { title: 'cased' },
        { 'content-type': 'application/json', 'IDEMPOTENCY-KEY': key },
      ),
    );
    const again = await h.call(createWith({ title: 'cased' }, key));

    expect(key).toHaveLength(255);
    expect(first.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.taskId).toBe(first.body.taskId);
  });

  it.each([
    ['empty', '', 'must not be empty'],
    ['longer than 255 characters', 'k'.repeat(256), 'must be at most 255 characters'],
    [
      'holding a control character',
      'key\twith a tab',
      'must be printable ASCII characters only (space to ~)',
    ],
    ['holding a byte outside ASCII', 'clé', 'must be printable ASCII characters only (space to ~)'],
  ])('answers a key %s 400 naming the header, and creates nothing', async (_, key, message) => {
    const before = await taskCount();

    const res = await h.call(createWith({ title: 'bad key' }, key));

    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'invalid request', fields: [{ path: 'idempotency-key', message }] });
    expect(await taskCount()).toBe(before);
  });

  it('answers a key sent twice 400: which one was meant is not the server’s to guess', async () => {
    const before = await taskCount();

    const res = await h.call(createWith({ title: 'two keys' }, [randomUUID(), randomUUID()]));

    expect(res.status).toBe(400);
    expect(res.body.fields).toEqual([{ path: 'idempotency-key', message: 'must be sent once' }]);
    expect(await taskCount()).toBe(before);
  });

  it('makes a new task of each create without a key, as before', async () => {
    const before = await taskCount();

    const a = await h.call(jsonRequest('POST', '/tasks', { title: 'no key' }));
    const b = await h.call(jsonRequest('POST', '/tasks', { title: 'no key' }));

    expect([a.status, b.status]).toEqual([201, 201]);
    expect(a.body.taskId).not.toBe(b.body.taskId);
    expect(await taskCount()).toBe(before + 2);
  });
});
