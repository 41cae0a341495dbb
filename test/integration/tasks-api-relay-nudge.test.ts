import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { LambdaRelayNudger } from '../../shared/tasks/relay-nudger';
import { jsonRequest, openTasksApi, outboxRows, taskState } from './tasks-api-harness';

describe('tasks API nudges the relay after a committed change, and a failed nudge never fails the request', () => {
  let h: Awaited<ReturnType<typeof openTasksApi>>;
  const committedRowsSeenByNudge: number[] = [];
  const nudge = vi.fn(async () => {
    // Counted from another connection: only committed rows are visible there.
    committedRowsSeenByNudge.push((await outboxRows(h.truth)).length);
  });

  beforeAll(async () => {
    h = await openTasksApi({ nudger: { nudge } });
  });
  afterAll(async () => {
    await h.close();
  });
  beforeEach(() => {
    nudge.mockClear();
    committedRowsSeenByNudge.length = 0;
  });

  const newTask = async () => (await h.call(jsonRequest('POST', '/tasks', { title: 'Nudge' }))).body.taskId;

  it('nudges once after an approve, when the outbox row is already committed', async () => {
    const taskId = await newTask();
    const before = (await outboxRows(h.truth)).length;

    const res = await h.call(jsonRequest('POST', `/tasks/${taskId}/approve`, {}));

    expect(res.status).toBe(200);
    expect(nudge).toHaveBeenCalledOnce();
    expect(committedRowsSeenByNudge).toEqual([before + 1]);
  });

  it('nudges once after a withdraw', async () => {
    const taskId = await newTask();

    const res = await h.call(jsonRequest('POST', `/tasks/${taskId}/withdraw`, {}));

    expect(res.status).toBe(200);
    expect(nudge).toHaveBeenCalledOnce();
  });

  it('does not nudge while a relay run holds the run lease, and nudges again once it lapsed or was released', async () => {
    const [first, second, third] = [await newTask(), await newTask(), await newTask()];
    await h.truth.query(
      "UPDATE relay_lease SET owner = 'relay-draining', lease_until = now() + interval '1 minute' WHERE slot = 0",
    );
    try {
      const held = await h.call(jsonRequest('POST', `/tasks/${first}/approve`, {}));
      expect(held.status).toBe(200);
      expect(nudge).not.toHaveBeenCalled();

      // A run that died keeps the slot only until its lease runs out.
      await h.truth.query("UPDATE relay_lease SET lease_until = now() - interval '1 second' WHERE slot = 0");
      await h.call(jsonRequest('POST', `/tasks/${second}/approve`, {}));
      expect(nudge).toHaveBeenCalledOnce();

      await h.truth.query('UPDATE relay_lease SET owner = NULL, lease_until = NULL WHERE slot = 0');
      await h.call(jsonRequest('POST', `/tasks/${third}/withdraw`, {}));
      expect(nudge).toHaveBeenCalledTimes(2);
    } finally {
      await h.truth.query('UPDATE relay_lease SET owner = NULL, lease_until = NULL WHERE slot = 0');
    }
  });

  it('does not nudge on a create, a 409 or a 400', async () => {
    const taskId = await newTask();
    await h.call(jsonRequest('POST', `/tasks/${taskId}/withdraw`, {}));
    nudge.mockClear();

    const conflict = await h.call(jsonRequest('POST', `/tasks/${taskId}/approve`, {}));
    // A body naming a reviewer is refused: the caller is the reviewer.
    const invalid = await h.call(jsonRequest('POST', `/tasks/${taskId}/approve`, { approvedBy: 'sam' }));

    expect([conflict.status, invalid.status]).toEqual([409, 400]);
    expect(nudge).not.toHaveBeenCalled();
  });
});

describe('tasks API with a failing nudger', () => {
  it('still answers 200, keeps the committed change and logs the failure', async () => {
    const failure = new Error('Lambda is throttling');
    const h = await openTasksApi({ nudger: { nudge: vi.fn().mockRejectedValue(failure) } });
    try {
      const taskId = (await h.call(jsonRequest('POST', '/tasks', { title: 'Nudge fails' }))).body.taskId;

      const res = await h.call(jsonRequest('POST', `/tasks/${taskId}/approve`, {}));

      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ taskId, status: 'approved', version: 2 });
      expect(await taskState(h.truth, taskId)).toMatchObject({ status: 'approved', version: 2 });
      expect(h.logger.warn).toHaveBeenCalledWith(expect.stringContaining('nudge failed'), {
        eventId: res.body.eventId,
        error: failure,
      });
      expect(h.logger.error).not.toHaveBeenCalled();
    } finally {
      await h.close();
    }
  });
});

describe('tasks API with the Lambda relay nudger', () => {
  const lambda = mockClient(LambdaClient);

  beforeEach(() => {
    lambda.reset();
  });

  it('sends one asynchronous (Event) invoke of the relay with {"nudge":true} after an approve', async () => {
    lambda.on(InvokeCommand).resolves({ StatusCode: 202 });
    const nudger = new LambdaRelayNudger({
      client: new LambdaClient({ region: 'eu-west-1' }),
      functionName: 'relay',
    });
    const h = await openTasksApi({ nudger });
    try {
      const taskId = (await h.call(jsonRequest('POST', '/tasks', { title: 'Via Lambda' }))).body.taskId;

      const res = await h.call(jsonRequest('POST', `/tasks/${taskId}/approve`, {}));

      expect(res.status).toBe(200);
      const calls = lambda.commandCalls(InvokeCommand);
      expect(calls).toHaveLength(1);
      const input = calls[0]?.args[0].input;
      expect(input).toMatchObject({ FunctionName: 'relay', InvocationType: 'Event' });
      expect(JSON.parse(new TextDecoder().decode(input?.Payload as Uint8Array))).toEqual({ nudge: true });
    } finally {
      await h.close();
    }
  });

  it('answers 200 when the invoke is rejected, and logs it', async () => {
    lambda.on(InvokeCommand).rejects(new Error('TooManyRequestsException'));
    const nudger = new LambdaRelayNudger({
      client: new LambdaClient({ region: 'eu-west-1' }),
      functionName: 'relay',
    });
    const h = await openTasksApi({ nudger });
    try {
      const taskId = (await h.call(jsonRequest('POST', '/tasks', { title: 'Via Lambda' }))).body.taskId;

      const res = await h.call(jsonRequest('POST', `/tasks/${taskId}/approve`, {}));

      expect(res.status).toBe(200);
      expect(h.logger.warn).toHaveBeenCalledOnce();
    } finally {
      await h.close();
    }
  });
});
