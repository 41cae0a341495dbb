import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, rmdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { clearStaleServer } from '../../infra/local/postgres';
import type { TaskTrace } from '../../shared/ops/ops-api';
import { deliveryBoundMs, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { waitFor } from '../support/wait-for';

// An inbox redrive resets its DEAD record to FAILED, then hands the stored event to the bus,
// which journals it: two writes. A SIGKILL between them left a FAILED record that no delivery
// would ever come for, and no route redrove (404: not DEAD). The runtime runs in a child
// process held at that moment by a gate (runtime-child.ts), and is killed there.

const children: ChildProcess[] = [];
const dirs: string[] = [];

/** The runtime in a process group of its own; resolves at its ready line, and tells each later line. */
function startChild(
  dataDir: string,
  options: Record<string, unknown>,
  onLine: (line: string) => void = () => undefined,
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/runtime-child.ts'], {
    env: { ...process.env, PIPELINE_DATA_DIR: dataDir, PIPELINE_TEST_RUNTIME: JSON.stringify(options) },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let output = '';
    let buffered = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) onLine(line);
      const ready = /pipeline ready: (http:\/\/\S+)/.exec(output);
      if (ready?.[1]) resolve({ child, url: ready[1] });
    });
    child.stderr?.on('data', (c: Buffer) => {
      output += c.toString();
    });
    child.once('exit', (code) => reject(new Error(`runtime exited (${code}) before ready:\n${output}`)));
  });
}

const killTree = (child: ChildProcess) => {
  if (child.pid) process.kill(-child.pid, 'SIGKILL');
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
};

afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) await killTree(c).catch(() => {});
  }
  for (const d of dirs.splice(0)) {
    await clearStaleServer(join(d, 'postgres'));
    rmSync(d, { recursive: true, force: true });
  }
});

describe('an inbox redrive killed between its reset and its journal write', () => {
  it('leaves a record the delivery audit re-sends: the effect happens once, nothing stays FAILED', async () => {
    const dir = tempDataDir('pipeline-redrive-kill-');
    dirs.push(dir);
    const notifications = join(dir, 'effects', 'notifications.jsonl');
    let held: (line: string) => void = () => undefined;
    const reachedGate = new Promise<string>((resolve) => {
      held = (line) => {
        if (line.startsWith('redelivery held:')) resolve(line);
      };
    });
    const first = await startChild(dir, { holdRedelivery: true, audit: { periodMs: 3_600_000 } }, (l) =>
      held(l),
    );
    const client = pipelineClient(first.url);
    // The notify effect's file is a directory (made after the start, which reads the file):
    // every attempt fails with EISDIR, a permanent failure, so the record goes DEAD after its budget.
    mkdirSync(notifications, { recursive: true });
    const [taskId] = await client.createAndApprove(1);
    const trace = () => client.call<TaskTrace>('GET', `/ops/tasks/${taskId}/trace`).then((r) => r.body);
    const dead = await waitFor(trace, (t) => t.events[0]?.consumers.notify?.status === 'DEAD', {
      timeoutMs: deliveryBoundMs,
      intervalMs: 200,
      what: 'the notify record DEAD',
    });
    const eventId = dead.events[0]?.eventId as string;
    rmdirSync(notifications);

    // The redrive resets the record, then waits at the gate before the bus journals the event.
    void client.call('POST', '/ops/inbox/notify/dead/redrive', { eventId }).catch(() => undefined);
    expect(await reachedGate).toBe(`redelivery held: notify ${eventId}`);
    await killTree(first.child);

    // The next start: the audit runs every half second and takes a record nothing was due on
    // for a second as stuck (the topology's 600 s would make the test wait ten minutes).
    const second = await startChild(dir, {
      audit: { periodMs: 500, settings: { stuckAfterSeconds: 1 } },
    });
    const after = pipelineClient(second.url);
    const traceAfter = () => after.call<TaskTrace>('GET', `/ops/tasks/${taskId}/trace`).then((r) => r.body);
    const done = await waitFor(traceAfter, (t) => t.events[0]?.consumers.notify?.status === 'PROCESSED', {
      // The audit's period and the stuck time are a second or two; a bound for a busy machine.
      timeoutMs: 120_000,
      intervalMs: 200,
      what: 'the redriven notify record PROCESSED',
    });
    expect(done.events[0]?.consumers.notify?.status).toBe('PROCESSED');
    const status = await after.status();
    expect(status.effects.notificationsSent).toBe(1);
    expect(Object.values(status.consumers).every((c) => c.failed + c.dead === 0)).toBe(true);
  }, 600_000);
});
