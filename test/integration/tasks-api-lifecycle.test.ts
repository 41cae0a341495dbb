import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contentApprovedData, contentWithdrawnData } from '../../shared/events/schemas';
import { asCaller, jsonRequest, openTasksApi, outboxRows, taskState } from './tasks-api-harness';

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const isoTimestamp = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe('tasks API creates, reads, approves and withdraws tasks on PostgreSQL', () => {
  let h: Awaited<ReturnType<typeof openTasksApi>>;

  beforeAll(async () => {
    h = await openTasksApi();
  });
  afterAll(async () => {
    await h.close();
  });

  async function createTask(
    body: Record<string, unknown> = { title: 'Spring launch post' },
  ): Promise<string> {
    const res = await h.call(jsonRequest('POST', '/tasks', body));
    expect(res.status).toBe(201);
    return res.body.taskId;
  }

  it('POST /tasks answers 201 with the new pending task at version 1', async () => {
    const res = await h.call(jsonRequest('POST', '/tasks', { title: 'Spring launch post', assignee: 'ana' }));

    expect(res.status).toBe(201);
    expect(res.body).toEqual({ taskId: expect.stringMatching(uuid), status: 'pending_review', version: 1 });
    expect(res.headers.location).toBe(`/tasks/${res.body.taskId}`);
    expect(await taskState(h.truth, res.body.taskId)).toEqual({
      status: 'pending_review',
      version: 1,
      reviewer: null,
    });
  });

  it('GET /tasks/{taskId} answers the task as a flat object with ISO timestamps', async () => {
    const taskId = await createTask({ title: 'Launch', body: 'The full text', assignee: 'ana' });

    const res = await h.call(jsonRequest('GET', `/tasks/${taskId}`, undefined, {}));

    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      taskId,
      title: 'Launch',
      body: 'The full text',
      assignee: 'ana',
      status: 'pending_review',
      version: 1,
      reviewer: null,
      createdAt: expect.stringMatching(isoTimestamp),
      updatedAt: expect.stringMatching(isoTimestamp),
      approvedAt: null,
      withdrawnAt: null,
      withdrawnBy: null,
      withdrawReason: null,
      rejectedAt: null,
      rejectReason: null,
    });
  });

  it('POST /tasks/{taskId}/approve answers 200 and commits the task change with exactly one content.approved row', async () => {
    const taskId = await createTask({ title: 'Launch', assignee: 'ana' });
    const before = (await outboxRows(h.truth)).length;

    const res = await h.call(jsonRequest('POST', `/tasks/${taskId}/approve`, {}));

    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      taskId,
      status: 'approved',
      version: 2,
      eventId: expect.stringMatching(uuid),
    });
    const rows = (await outboxRows(h.truth)).filter((r) => r.aggregate_id === taskId);
    expect(rows).toHaveLength(1);
    expect((await outboxRows(h.truth)).length).toBe(before + 1);
    const row = rows[0];
    expect(row).toMatchObject({
      event_id: res.body.eventId,
      event_type: 'content.approved',
      aggregate_version: 2,
      status: 'pending',
    });
    const task = (await h.call(jsonRequest('GET', `/tasks/${taskId}`, undefined, {}))).body;
    expect(contentApprovedData.parse(row?.payload)).toEqual({
      taskId,
      version: 2,
      title: 'Launch',
      assignee: 'ana',
      reviewer: 'rita',
      approvedAt: task.approvedAt,
    });
    expect(task).toMatchObject({
      status: 'approved',
      version: 2,
      reviewer: 'rita',
      approvedAt: expect.stringMatching(isoTimestamp),
    });
  });

  it('POST /tasks/{taskId}/withdraw of an approved task answers 200 and writes a content.withdrawn row', async () => {
    const taskId = await createTask({ title: 'Launch' });
    await h.call(jsonRequest('POST', `/tasks/${taskId}/approve`, {}));

    const res = await h.call(jsonRequest('POST', `/tasks/${taskId}/withdraw`, { reason: 'legal hold' }));

    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      taskId,
      status: 'withdrawn',
      version: 3,
      eventId: expect.stringMatching(uuid),
    });
    const row = (await outboxRows(h.truth)).find((r) => r.event_id === res.body.eventId);
    expect(row).toMatchObject({
      event_type: 'content.withdrawn',
      aggregate_id: taskId,
      aggregate_version: 3,
    });
    const task = (await h.call(jsonRequest('GET', `/tasks/${taskId}`, undefined, {}))).body;
    expect(contentWithdrawnData.parse(row?.payload)).toEqual({
      taskId,
      version: 3,
      title: 'Launch',
      withdrawnBy: 'rita',
      reason: 'legal hold',
      withdrawnAt: task.withdrawnAt,
    });
    expect(task).toMatchObject({ status: 'withdrawn', withdrawnBy: 'rita', withdrawReason: 'legal hold' });
  });

  it('POST /tasks/{taskId}/withdraw of a pending task answers 200 with reason null in the event', async () => {
    const taskId = await createTask();

    const res = await h.call(asCaller(jsonRequest('POST', `/tasks/${taskId}/withdraw`, {}), 'ana'));

    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ taskId, status: 'withdrawn', version: 2 });
    const row = (await outboxRows(h.truth)).find((r) => r.event_id === res.body.eventId);
    expect(row?.payload).toMatchObject({ withdrawnBy: 'ana', reason: null, version: 2 });
  });

  it('a second approve answers 409 with currentStatus and writes no second outbox row', async () => {
    const taskId = await createTask();
    await h.call(jsonRequest('POST', `/tasks/${taskId}/approve`, {}));

    const res = await h.call(asCaller(jsonRequest('POST', `/tasks/${taskId}/approve`, {}), 'sam'));

    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error: expect.any(String), currentStatus: 'approved' });
    expect((await outboxRows(h.truth)).filter((r) => r.aggregate_id === taskId)).toHaveLength(1);
    expect(await taskState(h.truth, taskId)).toEqual({ status: 'approved', version: 2, reviewer: 'rita' });
  });

  it('withdrawing a withdrawn task answers 409 with currentStatus withdrawn', async () => {
    const taskId = await createTask();
    await h.call(asCaller(jsonRequest('POST', `/tasks/${taskId}/withdraw`, {}), 'ana'));

    const res = await h.call(asCaller(jsonRequest('POST', `/tasks/${taskId}/withdraw`, {}), 'ana'));

    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error: expect.any(String), currentStatus: 'withdrawn' });
    expect(await taskState(h.truth, taskId)).toMatchObject({ status: 'withdrawn', version: 2 });
  });

  it('approving a withdrawn task answers 409 with currentStatus withdrawn', async () => {
    const taskId = await createTask();
    await h.call(asCaller(jsonRequest('POST', `/tasks/${taskId}/withdraw`, {}), 'ana'));

    const res = await h.call(jsonRequest('POST', `/tasks/${taskId}/approve`, {}));

    expect(res.status).toBe(409);
    expect(res.body.currentStatus).toBe('withdrawn');
  });

  it.each([
    ['GET', '', undefined],
    ['POST', '/approve', {}],
    ['POST', '/withdraw', {}],
    ['POST', '/reject', { reason: 'off brief' }],
  ])('%s /tasks/{unknown id}%s answers 404 and writes nothing', async (method, suffix, body) => {
    const before = await outboxRows(h.truth);
    const unknown = crypto.randomUUID();

    const res = await h.call(jsonRequest(method, `/tasks/${unknown}${suffix}`, body));

    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: `task ${unknown} not found`, taskId: unknown });
    expect(await outboxRows(h.truth)).toEqual(before);
  });
});
