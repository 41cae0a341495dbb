import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { deliveryBoundMs, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { waitFor } from '../support/wait-for';

// Through the local runtime's HTTP server, as an operator reaches it: a pending task is found
// again with GET /tasks, and its rejection travels the outbox and the bus to notify, which
// tells the assignee why; the index and the archive are not sent it (docs/architecture.md "Tasks API").

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

      const trace = await waitFor(
        async () => (await client.call<Trace>('GET', `/ops/tasks/${created.body.taskId}/trace`)).body,
        (t) => t.events[0]?.consumers.notify?.status === 'PROCESSED',
        { timeoutMs: deliveryBoundMs },
      );
      expect(trace.events).toHaveLength(1);
      expect(trace.events[0]).toMatchObject({
        eventType: 'content.rejected',
        consumers: { notify: { status: 'PROCESSED' }, index: null, archive: null },
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
