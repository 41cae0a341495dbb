import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { clearStaleServer } from '../../infra/local/postgres';
import {
  converged,
  deliveryBoundMs,
  leaseExpiryMs,
  pipelineClient,
  tempDataDir,
} from '../support/pipeline-client';
import { approvalEffects } from '../support/topology-expectations';
import { waitFor } from '../support/wait-for';

const children: ChildProcess[] = [];
const dirs: string[] = [];

/** Runs `npm start`'s entry point as its own process group and waits for the ready line. */
function startPipeline(dataDir: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'infra/local/start.ts'], {
    env: { ...process.env, PORT: '0', PIPELINE_DATA_DIR: dataDir },
    detached: true, // its own process group, so the test can SIGKILL the whole tree
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const ready = /pipeline ready: (http:\/\/\S+)/.exec(output);
      if (ready?.[1]) resolve({ child, url: ready[1] });
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (c: Buffer) => {
      output += c.toString();
    });
    child.once('exit', (code) => reject(new Error(`pipeline exited (${code}) before ready:\n${output}`)));
  });
}

const killTree = (child: ChildProcess, signal: NodeJS.Signals) => {
  if (child.pid) process.kill(-child.pid, signal);
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
};

afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) await killTree(c, 'SIGKILL').catch(() => {});
  }
  // PostgreSQL runs in its own process group, so a group kill leaves it running: stop it too.
  for (const d of dirs.splice(0)) {
    await clearStaleServer(join(d, 'postgres'));
    rmSync(d, { recursive: true, force: true });
  }
});

describe('a SIGKILL of the whole process tree', () => {
  it(
    'loses no committed event: the next npm start comes up and delivers every one',
    async () => {
      const dir = tempDataDir('pipeline-kill-');
      dirs.push(dir);
      const first = await startPipeline(dir);
      const client = pipelineClient(first.url);
      const ids = await client.createAndApprove(40);
      expect(ids).toHaveLength(40);
      // Kill mid-flight: approvals are committed, deliveries are likely still under way.
      await killTree(first.child, 'SIGKILL');

      const second = await startPipeline(dir);
      const after = pipelineClient(second.url);
      // Rows the killed relay had claimed come back when their lease runs out, when the relay
      // runner's next run is due: the pipeline's own timing in a process of its own, which only
      // waiting can follow.
      const status = await waitFor(after.status, (s) => converged(s, 40), {
        timeoutMs: leaseExpiryMs + deliveryBoundMs,
        intervalMs: 500,
      });
      expect(status.tasks.approved).toBe(40);
      expect(status.outbox).toMatchObject({ pending: 0, dead: 0, delivered: 40 });
      // Counts added after a SIGKILL'd effect may be missing: the start after it recounted.
      expect(status.effects).toEqual(approvalEffects(40));

      // SIGTERM stops it gracefully with exit code 0.
      const exited = new Promise<number | null>((resolve) =>
        second.child.once('exit', (code) => resolve(code)),
      );
      if (second.child.pid) process.kill(second.child.pid, 'SIGTERM');
      expect(await exited).toBe(0);
    },
    leaseExpiryMs + 2 * deliveryBoundMs,
  );
});
