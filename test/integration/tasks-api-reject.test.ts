import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contentRejectedData } from '../../shared/events/schemas';
import { asCaller, jsonRequest, openTasksApi, outboxRows, taskState, testCaller } from './tasks-api-harness';

// A reviewer's "no": a pending task becomes `rejected` and its `content.rejected` event joins
// the outbox in the same statement, as an approval does; the rejecter is the caller, and the
// reason (required, for the assignee) travels in the event.

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('POST /tasks/{taskId}/reject', () => {
  let h: Awaited<ReturnType<typeof openTasksApi>>;

  beforeAll(async () => {
    h = await openTasksApi();
  });
  afterAll(async () => {
    await h.close();
  });

  async function createTask(title = 'Summer teaser'): Promise<string> {
    const res = await h.call(jsonRequest('POST', '/tasks', { title, assignee: 'ana' }));
    expect(res.status).toBe(201);
    return res.body.taskId;
  }
  const reject = (taskId: string, body: unknown, caller = testCaller) =>
    h.call(asCaller(jsonRequest('POST', `/tasks/${taskId}/reject`, body), caller));

  it('answers 200 like an approval and commits the rejection with exactly one content.rejected row', async () => {
    const taskId = await createTask();

    const res = await reject(taskId, { reason: 'Off brand: see the style guide' }, 'arn:aws:iam::1:user/sam');

    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      taskId,
      status: 'rejected',
      version: 2,
      eventId: expect.stringMatching(uuid),
    });
    const rows = (await outboxRows(h.truth)).filter((r) => r.aggregate_id === taskId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      event_id: res.body.eventId,
      event_type: 'content.rejected',
      aggregate_version: 2,
      status: 'pending',
    });
    const task = (await h.call(jsonRequest('GET', `/tasks/${taskId}`, undefined, {}))).body;
    expect(task).toMatchObject({
      status: 'rejected',
      version: 2,
      reviewer: 'arn:aws:iam::1:user/sam',
      rejectReason: 'Off brand: see the style guide',
      rejectedAt: expect.any(String),
      approvedAt: null,
    });
    expect(contentRejectedData.parse(rows[0]?.payload)).toEqual({
      taskId,
      version: 2,
      title: 'Summer teaser',
      assignee: 'ana',
      reviewer: 'arn:aws:iam::1:user/sam',
      reason: 'Off brand: see the style guide',
      rejectedAt: task.rejectedAt,
    });
    expect(h.nudger.nudge).toHaveBeenCalled();
  });

  it.each([
    ['a rejected task cannot be rejected again', 'reject', 'rejected'],
    ['a rejected task cannot be approved', 'approve', 'rejected'],
    ['a rejected task cannot be withdrawn', 'withdraw', 'rejected'],
  ])('%s: 409 with currentStatus, no second event', async (_name, verb, current) => {
    const taskId = await createTask();
    expect((await reject(taskId, { reason: 'no' })).status).toBe(200);

    const res = await h.call(
      jsonRequest('POST', `/tasks/${taskId}/${verb}`, verb === 'reject' ? { reason: 'again' } : {}),
    );

    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error: expect.any(String), currentStatus: current });
    expect((await outboxRows(h.truth)).filter((r) => r.aggregate_id === taskId)).toHaveLength(1);
  });

  it.each([
    ['approved', 'approve'],
    ['withdrawn', 'withdraw'],
  ])('an %s task cannot be rejected: 409 with currentStatus', async (status, verb) => {
    const taskId = await createTask();
    await h.call(jsonRequest('POST', `/tasks/${taskId}/${verb}`, {}));

    const res = await reject(taskId, { reason: 'too late' });

    expect(res.status).toBe(409);
    expect(res.body.currentStatus).toBe(status);
    expect(await taskState(h.truth, taskId)).toMatchObject({ status, version: 2 });
  });

  it.each([
    ['no body', undefined, [{ path: 'reason', message: 'required' }]],
    ['no reason', {}, [{ path: 'reason', message: 'required' }]],
    ['an empty reason', { reason: '   ' }, [{ path: 'reason', message: 'must not be empty' }]],
    [
      'a reason over 1,000 characters',
      { reason: 'x'.repeat(1001) },
      [{ path: 'reason', message: expect.any(String) }],
    ],
    ['a reason that is not text', { reason: 42 }, [{ path: 'reason', message: expect.any(String) }]],
    [
      'a body naming the rejecter',
      { reason: 'no', rejectedBy: 'sam' },
      [{ path: 'rejectedBy', message: expect.stringContaining("the caller's identity") }],
    ],
    ['an unknown field', { reason: 'no', reson: 'no' }, [{ path: 'reson', message: 'unknown field' }]],
  ])('answers 400 naming the field for %s, and changes nothing', async (_name, body, fields) => {
    const taskId = await createTask();
    const before = await outboxRows(h.truth);

    const res = await reject(taskId, body);

    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'invalid request', fields });
    expect(await taskState(h.truth, taskId)).toEqual({
      status: 'pending_review',
      version: 1,
      reviewer: null,
    });
    expect(await outboxRows(h.truth)).toEqual(before);
  });

  it('accepts a reason of exactly 1,000 characters', async () => {
    const taskId = await createTask();

    expect((await reject(taskId, { reason: 'y'.repeat(1000) })).status).toBe(200);
  });

  it('answers 403 and changes nothing when no identity vouches for the caller', async () => {
    const taskId = await createTask();
    const before = await outboxRows(h.truth);

    const res = await h.call(
      asCaller(jsonRequest('POST', `/tasks/${taskId}/reject`, { reason: 'no' }), null),
    );

    expect(res.status).toBe(403);
    expect(await taskState(h.truth, taskId)).toMatchObject({ status: 'pending_review', version: 1 });
    expect(await outboxRows(h.truth)).toEqual(before);
  });

  it('of a concurrent approve and reject exactly one wins', async () => {
    const taskId = await createTask();

    const answers = await Promise.all([
      h.call(jsonRequest('POST', `/tasks/${taskId}/approve`, {})),
      reject(taskId, { reason: 'no' }),
    ]);

    expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
    expect((await outboxRows(h.truth)).filter((r) => r.aggregate_id === taskId)).toHaveLength(1);
  });
});
