import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonRequest, openTasksApi, outboxRows } from './tasks-api-harness';

describe('tasks API routes on resource + method behind API Gateway and on path otherwise', () => {
  let h: Awaited<ReturnType<typeof openTasksApi>>;

  beforeAll(async () => {
    h = await openTasksApi();
  });
  afterAll(async () => {
    await h.close();
  });

  async function createTask(): Promise<string> {
    return (await h.call(jsonRequest('POST', '/tasks', { title: 'Routing' }))).body.taskId;
  }

  it('routes an API Gateway event by resource and pathParameters, whatever its path says', async () => {
    const taskId = await createTask();
    // Behind a custom domain base path, `path` carries a prefix the resource does not.
    const event = {
      ...jsonRequest('POST', `/v1/tasks/${taskId}/approve`, { approvedBy: 'rita' }),
      resource: '/tasks/{taskId}/approve',
      pathParameters: { taskId },
    };

    const res = await h.call(event);

    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ taskId, status: 'approved' });
  });

  it('routes a path-only event (the local server) and decodes the path segment', async () => {
    const taskId = await createTask();

    const res = await h.call(jsonRequest('GET', `/tasks/${encodeURIComponent(taskId)}/`, undefined, {}));

    expect(res.status).toBe(200);
    expect(res.body.taskId).toBe(taskId);
  });

  it('falls back to the path for a {proxy+} resource', async () => {
    const taskId = await createTask();
    const event = {
      ...jsonRequest('GET', `/tasks/${taskId}`, undefined, {}),
      resource: '/{proxy+}',
      pathParameters: { proxy: `tasks/${taskId}` },
    };

    const res = await h.call(event);

    expect(res.status).toBe(200);
    expect(res.body.taskId).toBe(taskId);
  });

  it.each([
    ['GET', '/nothing-here'],
    ['POST', '/tasks/abc/publish'],
    ['GET', '/'],
  ])('answers 404 for the unknown route %s %s', async (method, path) => {
    const res = await h.call(jsonRequest(method, path, undefined, {}));

    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: expect.stringContaining(path) });
  });

  it.each([
    ['GET', '/tasks', 'POST'],
    ['DELETE', '/tasks/2b1f3c7e-8d4a-4f6b-9c0d-1e2f3a4b5c6d', 'GET'],
    ['GET', '/tasks/2b1f3c7e-8d4a-4f6b-9c0d-1e2f3a4b5c6d/approve', 'POST'],
    ['PUT', '/tasks/2b1f3c7e-8d4a-4f6b-9c0d-1e2f3a4b5c6d/withdraw', 'POST'],
  ])('answers 405 with Allow for %s %s and changes nothing', async (method, path, allow) => {
    const before = await outboxRows(h.truth);

    const res = await h.call(jsonRequest(method, path, undefined, {}));

    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe(allow);
    expect(res.body).toEqual({ error: expect.stringContaining(method), allow });
    expect(await outboxRows(h.truth)).toEqual(before);
  });
});
