import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { deliveryBoundMs, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { perConsumer, subscriberNames } from '../support/topology-expectations';
import { waitFor } from '../support/wait-for';

// Through the local runtime's HTTP server, as an operator reaches it: a pending task is found
// again with GET /tasks, and its rejection travels the outbox and the bus to notify, which
// tells the assignee why; no consumer that does not subscribe to it is sent it (docs/architecture.md "Tasks API").

interface Trace {
  events: { eventType: string; consumers: Record<string, { status: string } | null> }[];
}

describe('rejecting a task found in the listing, on the local runtime', () => {
  let runtime: Runtime;
  const dataDir = tempDataDir('pipeline-reject-');

  beforeAll(async () => {
    runtime = await startRuntime({ dataDir, port: 0, sweepMs: 3_000 });
  });
  afterAll(async () => {
    await runtime?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(
    'lists the pending task, rejects it, and notify alone tells the assignee the reason',
    async () => {
      const client = pipelineClient(runtime.url);
      const created = await client.call<{ taskId: string }>('POST', '/tasks', {
        title: 'Autumn banner',
        assignee: 'ana',
      });
      const other = await client.call<{ taskId: string }>('POST', '/tasks', { title: 'Other' });
      await client.call('POST', `/tasks/${other.body.taskId}/approve`, {});

      const pending = await client.call<{ tasks: { taskId: string; status: string }[]; nextCursor: null }>(
        'GET',
        '/tasks?status=pending&limit=5',
      );
      expect(pending.status).toBe(200);
      expect(pending.body).toEqual({
        tasks: [expect.objectContaining({ taskId: created.body.taskId, status: 'pending_review' })],
        nextCursor: null,
      });

      const rejected = await client.call<{ status: string; eventId: string }>(
        'POST',
        `/tasks/${created.body.taskId}/reject`,
        { reason: 'The banner is off brand' },
      );
      expect(rejected).toMatchObject({ status: 200, body: { status: 'rejected' } });

      // notify among them: the consumers of content.rejected, as the topology routes it.
      const rejectedBy = subscriberNames(topology.eventTypes.rejected);
      expect(rejectedBy).toContain('notify');
      const trace = await waitFor(
        async () => (await client.call<Trace>('GET', `/ops/tasks/${created.body.taskId}/trace`)).body,
        (t) => rejectedBy.every((c) => t.events[0]?.consumers[c]?.status === 'PROCESSED'),
        { timeoutMs: deliveryBoundMs },
      );
      expect(trace.events).toHaveLength(1);
      expect(trace.events[0]).toMatchObject({
        eventType: 'content.rejected',
        consumers: perConsumer((c) => (rejectedBy.includes(c) ? { status: 'PROCESSED' } : null)),
      });
      // One topic message a line, its body the notification.
      const lines = readFileSync(join(dataDir, 'effects', 'notifications.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(lines.filter((m) => m.id === rejected.body.eventId)).toEqual([
        expect.objectContaining({
          subject: expect.stringMatching(/^Rejected: /),
          body: expect.objectContaining({
            eventId: rejected.body.eventId,
            eventType: 'content.rejected',
            taskId: created.body.taskId,
            assignee: 'ana',
            reason: 'The banner is off brand',
            message: expect.stringContaining('rejected'),
          }),
        }),
      ]);
      const listedRejected = await client.call<{ tasks: { taskId: string }[] }>(
        'GET',
        '/tasks?status=rejected',
      );
      expect(listedRejected.body.tasks.map((t) => t.taskId)).toEqual([created.body.taskId]);
    },
    2 * deliveryBoundMs,
  );
});
