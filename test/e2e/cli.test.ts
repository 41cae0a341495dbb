import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { freePort } from '../../infra/local/ports';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { deliveryBoundMs, tempDataDir } from '../support/pipeline-client';
import { subscriberNames } from '../support/topology-expectations';
import { waitFor } from '../support/wait-for';

// The real launcher as a user runs it (`npx pipeline` runs bin/pipeline.mjs), from another
// directory, against the real local runtime.

const bin = fileURLToPath(new URL('../../bin/pipeline.mjs', import.meta.url));

function pipeline(args: string[], env: Record<string, string> = {}) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      // A bound on a hung launcher: one run takes 1 to 8 s, beside other suites the longer.
      { cwd: tmpdir(), env: { ...process.env, NO_COLOR: '1', ...env }, timeout: 120_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe('bin/pipeline.mjs without a pipeline', () => {
  it('prints its usage with --help and exits 2 on a bad argument', async () => {
    const help = await pipeline(['--help']);
    const bad = await pipeline(['inbox', 'dead', '--consumer', 'search']);

    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: pipeline \[options\] \[command\]/);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(
      `option '--consumer <name>' argument 'search' is invalid. Allowed choices are ${topology.consumerNames.join(', ')}.`,
    );
  });

  it('exits 1 asking whether `npm start` is running when nothing listens on PORT', async () => {
    const port = await freePort();

    const r = await pipeline(['status'], { PORT: String(port) });

    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `pipeline: cannot reach the pipeline at http://127.0.0.1:${port} (ECONNREFUSED): is \`npm start\` running? (or pass --url)\n`,
    );
  });
});

describe('bin/pipeline.mjs against the local runtime', () => {
  let runtime: Runtime;
  let dir: string;
  const at = () => ['--url', runtime.url];

  beforeAll(async () => {
    dir = tempDataDir('pipeline-cli-');
    // Who the local server says every request comes from (PIPELINE_CALLER for `npm start`).
    runtime = await startRuntime({ dataDir: dir, port: 0, sweepMs: 2_000, caller: 'local:cli-tester' });
  });

  afterAll(async () => {
    await runtime?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it(
    'creates and approves a task, then shows it processed by every consumer',
    async () => {
      const created = await pipeline([
        ...at(),
        'tasks',
        'create',
        '--title',
        'CLI task',
        '--assignee',
        'alice',
        '--json',
      ]);
      expect(created.code).toBe(0);
      const { taskId } = JSON.parse(created.stdout) as { taskId: string };

      const approved = await pipeline([...at(), 'tasks', 'approve', taskId]);
      expect(approved).toMatchObject({ code: 0, stderr: '' });
      expect(approved.stdout).toMatch(
        new RegExp(`^approved task ${taskId} \\(version 2, event [0-9a-f-]{36}\\)\\n$`),
      );

      type Shown = {
        task: { status: string; reviewer: string };
        trace: { events: { consumers: Record<string, { status: string } | null> }[] };
      };
      const approvedBy = subscriberNames(topology.eventTypes.approved);
      const shown = await waitFor(
        async () =>
          JSON.parse((await pipeline([...at(), 'tasks', 'show', taskId, '--json'])).stdout) as Shown,
        (s) => approvedBy.every((c) => s.trace.events[0]?.consumers[c]?.status === 'PROCESSED'),
        { timeoutMs: deliveryBoundMs, intervalMs: 250 },
      );
      expect(shown.task.status).toBe('approved');
      // The reviewer is the caller the server vouches for: the CLI sends no name.
      expect(shown.task.reviewer).toBe('local:cli-tester');
      // The trace has an entry for every consumer of the topology, in the registry's order.
      expect(Object.keys(shown.trace.events[0]?.consumers ?? {})).toEqual(topology.consumerNames);

      const human = await pipeline([...at(), 'tasks', 'show', taskId, '--wide']);
      expect(human.stdout).toContain('title     CLI task');
      // One column per consumer: PROCESSED (1) under each consumer of content.approved.
      const processed = approvedBy.map(() => 'PROCESSED \\(1\\)').join('\\s+');
      expect(human.stdout).toMatch(
        new RegExp(`content\\.approved\\s+2\\s+delivered \\(1\\).*${processed}$`, 'm'),
      );
      const approvedLine = human.stdout.split('\n').find((l) => l.includes('content.approved')) ?? '';
      expect(approvedLine.match(/PROCESSED \(1\)/g)).toHaveLength(approvedBy.length);
      const status = JSON.parse((await pipeline([...at(), 'status', '--json'])).stdout) as {
        tasks: Record<string, number>;
      };
      expect(status.tasks.approved).toBe(1);
    },
    2 * deliveryBoundMs,
  );

  it("exits 1 with the server's words on a conflict and on a redrive of nothing dead", async () => {
    const { taskId } = JSON.parse(
      (await pipeline([...at(), 'tasks', 'create', '--title', 'to withdraw', '--json'])).stdout,
    ) as { taskId: string };
    const withdrawn = await pipeline([...at(), 'tasks', 'withdraw', taskId, '--reason', 'dup']);
    expect(withdrawn.code).toBe(0);

    const again = await pipeline([...at(), 'tasks', 'approve', taskId]);
    const missing = '99999999-9999-4999-8999-999999999999';
    const redrive = await pipeline([...at(), 'outbox', 'dead', '--redrive', missing]);

    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`POST /tasks/${taskId}/approve failed: 409`);
    expect(again.stderr).toContain('(current status: withdrawn)');
    expect(redrive.code).toBe(1);
    expect(redrive.stderr).toBe(
      `pipeline: POST /ops/outbox/dead/redrive failed: 404 no dead outbox event ${missing}\n`,
    );
  });

  it('lists the empty dead lists of the real ops API', async () => {
    const outbox = await pipeline([...at(), 'outbox', 'dead']);
    const inbox = await pipeline([...at(), 'inbox', 'dead', '--consumer', 'notify', '--all']);
    const letters = await pipeline([...at(), 'dead-letters', '--json']);

    expect(outbox.stdout).toBe('no dead outbox events\n');
    expect(inbox.stdout).toBe('no dead notify inbox records to redrive\n');
    expect(JSON.parse(letters.stdout)).toEqual([]);
  });
});
