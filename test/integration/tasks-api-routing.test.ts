import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonRequest, openTasksApi, outboxRows } from './tasks-api-harness';

describe('tasks API routes on resource + method, which API Gateway and the local server fill alike', () => {
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
      ...jsonRequest('POST', `/v1/tasks/${taskId}/approve`, {}),
      resource: '/tasks/{taskId}/approve',
      pathParameters: { taskId },
    };

    const res = await h.call(event);

    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ taskId, status: 'approved' });
  });

  it('routes the event the local server builds: the resource and the decoded path parameter, as API Gateway fills them', async () => {
    const taskId = await createTask();
    const event = jsonRequest('GET', `/tasks/${encodeURIComponent(taskId)}/`, undefined, {});

    const res = await h.call(event);

    expect(event).toMatchObject({ resource: '/tasks/{taskId}', pathParameters: { taskId } });
    expect(event.requestContext.resourcePath).toBe('/tasks/{taskId}');
    expect(res.status).toBe(200);
    expect(res.body.taskId).toBe(taskId);
  });

  it('answers 404 for a resource the API does not define ({proxy+}), never routing on the path instead', async () => {
    const taskId = await createTask();
    const event = {
      ...jsonRequest('GET', `/tasks/${taskId}`, undefined, {}),
      resource: '/{proxy+}',
      pathParameters: { proxy: `tasks/${taskId}` },
    };

    const res = await h.call(event);

    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: expect.stringContaining(`/tasks/${taskId}`) });
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
    ['DELETE', '/tasks', 'POST, GET'],
    ['GET', '/tasks/2b1f3c7e-8d4a-4f6b-9c0d-1e2f3a4b5c6d/reject', 'POST'],
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
