import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as pause } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { initCluster, postgresHost, removeLocalPostgres } from '../../infra/local/postgres';
import { clusterMarker } from '../../infra/local/postgres-cluster';
import { converged, deliveryBoundMs, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { killTree, type ProcessInfo, processes, treeOf } from '../support/process-tree';
import { waitFor } from '../support/wait-for';

/**
 * A first `npm start` killed at any moment (a SIGKILL of its whole process tree, as the OOM
 * killer or a container stop deals it) can start again: the moments are found by watching the
 * real processes (initdb and the PostgreSQL programs it runs, the server) and the start's log,
 * not by timing. Before, a kill during initdb left a data directory that looked like a cluster
 * and that no later start could use ("password authentication failed for user postgres").
 */

const children: ChildProcess[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const c of children.splice(0)) if (c.pid) killTree(c.pid);
  for (const d of dirs.splice(0)) {
    await removeLocalPostgres(join(d, 'postgres'));
    rmSync(d, { recursive: true, force: true });
  }
});

/** `npm start`'s entry point on `dataDir`, its output collected. */
function launch(dataDir: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'infra/local/start.ts'], {
    env: { ...process.env, PORT: '0', PIPELINE_DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  const exited = new Promise<number | null>((ok) => child.once('exit', (code) => ok(code)));
  return { child, exited, output: () => output };
}

/** Resolves with the ready URL, or fails with the output if the start ends first. */
async function ready(run: ReturnType<typeof launch>): Promise<string> {
  let code: number | null | undefined;
  void run.exited.then((c) => {
    code = c;
  });
  const url = await waitFor(
    () => /pipeline ready: (http:\/\/\S+)/.exec(run.output())?.[1] ?? (code !== undefined ? 'exited' : ''),
    (u) => u !== '',
    { timeoutMs: 240_000, intervalMs: 50, what: 'pipeline ready' },
  );
  if (url === 'exited') throw new Error(`the start ended (${code}) before it was ready:\n${run.output()}`);
  return url;
}

const has = (tree: readonly ProcessInfo[], pattern: RegExp) => tree.some((p) => pattern.test(p.command));
const initdbRunning = /\/initdb .*--pgdata=/;

/** Whether `path` exists in the directory the running initdb of `tree` was told to make. */
const initdbMade = (tree: readonly ProcessInfo[], path: string) => {
  const pgdata = tree.map((p) => /\/initdb .*--pgdata=(\S+)/.exec(p.command)?.[1]).find(Boolean);
  return pgdata !== undefined && existsSync(join(pgdata, path));
};

/** A moment of the first start: reached when `at` says so of its process tree and its log so far. */
interface Moment {
  readonly name: string;
  readonly at: (tree: readonly ProcessInfo[], output: string) => boolean;
  /** Killed during initdb: the next start makes the cluster again. */
  readonly duringInitdb: boolean;
}

const moments: Moment[] = [
  { name: 'initdb has just started', duringInitdb: true, at: (t) => has(t, initdbRunning) },
  { name: 'initdb is bootstrapping template1', duringInitdb: true, at: (t) => has(t, /postgres --boot/) },
  {
    // Its first statements set the postgres user's password.
    name: "initdb's single-user setup has just started",
    duringInitdb: true,
    at: (t) => has(t, /postgres --single/),
  },
  {
    // template0 is made after the password is set, and the postgres database after it.
    name: "initdb's single-user setup has made template0",
    duringInitdb: true,
    at: (t) => has(t, /postgres --single/) && initdbMade(t, join('base', '4')),
  },
  {
    name: 'PostgreSQL is starting or started, no migration applied yet',
    duringInitdb: false,
    at: (t, out) =>
      !has(t, initdbRunning) && has(t, /postgres -D .* -p \d+/) && !out.includes('migrations applied'),
  },
  {
    name: 'the migrations are applied, the rest is still starting',
    duringInitdb: false,
    at: (_t, out) => out.includes('migrations applied') && !out.includes('pipeline ready'),
  },
];

/**
 * Starts on a fresh data directory and SIGKILLs the whole tree once `moment` is reached. A
 * moment lasts a tenth of a second or so; one that passed between two looks (the start went on,
 * or was ready) is tried again on a new directory.
 */
async function killedAt(moment: Moment): Promise<{ dir: string; killed: ProcessInfo[] }> {
  for (let attempt = 1; attempt <= 8; attempt++) {
    const dir = tempDataDir('pipeline-killed-');
    dirs.push(dir);
    const run = launch(dir);
    for (;;) {
      const pid = run.child.pid;
      if (pid === undefined || run.child.exitCode !== null || run.output().includes('pipeline ready')) break;
      const output = run.output();
      if (moment.at(treeOf(pid, processes()), output)) {
        const killed = killTree(pid);
        await run.exited;
        return { dir, killed };
      }
      await pause(1);
    }
    if (run.child.pid) killTree(run.child.pid);
    await run.exited;
  }
  throw new Error(`the first start never stopped at "${moment.name}" where the test could see it`);
}

describe('a first start killed at any moment', () => {
  it.each(moments)('starts again when killed where $name', async (moment) => {
    const { dir, killed } = await killedAt(moment);
    expect(killed.length).toBeGreaterThan(0);

    const second = launch(dir);
    const url = await ready(second);

    const output = second.output();
    expect(output).toMatch(/the last run on .* \(pid \d+\) did not stop cleanly/);
    if (moment.duringInitdb) {
      // What the killed initdb left is named and made again.
      expect(output).toMatch(
        /removing \S+: a PostgreSQL cluster whose initdb was stopped before it finished/,
      );
      expect(output).toContain('initializing PostgreSQL');
      // Nor is the superuser's password left in a file beside it.
      expect(readdirSync(dir).filter((name) => name.startsWith('.pwfile-'))).toEqual([]);
    } else {
      // A cluster whose initdb completed is never made again.
      expect(output).not.toContain('initializing PostgreSQL');
    }
    const client = pipelineClient(url);
    await client.createAndApprove(2);
    const status = await waitFor(client.status, (s) => converged(s, 2), {
      timeoutMs: deliveryBoundMs,
      intervalMs: 200,
      what: 'two approvals delivered',
    });
    expect(status.tasks.approved).toBe(2);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });

  it('a cluster an earlier version left half-made (initdb killed before the password) is set aside, kept, and made again', async () => {
    const dir = tempDataDir('pipeline-halfmade-');
    dirs.push(dir);
    const data = join(dir, 'postgres');
    // What the runtime before the staging directory did: initdb right into the data directory.
    const initdb = initCluster(data, await postgresHost(), 'pipeline').then(
      () => 'completed',
      (err: unknown) => String(err),
    );
    const setup = await waitFor(
      () => processes().find((p) => initdbRunning.test(p.command) && p.command.includes(`--pgdata=${data}`)),
      (p) => p !== undefined && has(treeOf(p.pid), /postgres --single/),
      { timeoutMs: 120_000, intervalMs: 1, what: "initdb's single-user setup" },
    );
    if (setup) killTree(setup.pid);
    expect(await initdb).toMatch(/initdb failed/);
    expect(existsSync(join(data, 'PG_VERSION'))).toBe(true);

    const run = launch(dir);
    const url = await ready(run);

    const aside = /set aside in (\S+)/.exec(run.output())?.[1];
    expect(aside, run.output()).toBeDefined();
    expect(existsSync(join(aside as string, 'PG_VERSION'))).toBe(true);
    expect(existsSync(join(data, clusterMarker))).toBe(true);
    const client = pipelineClient(url);
    await client.createAndApprove(1);
    await waitFor(client.status, (s) => converged(s, 1), { timeoutMs: deliveryBoundMs, intervalMs: 200 });
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(0);
    rmSync(aside as string, { recursive: true, force: true });
  });

  it('a whole cluster an earlier version made (no marker) is checked and kept, with its data', async () => {
    const dir = tempDataDir('pipeline-unmarked-');
    dirs.push(dir);
    const first = launch(dir);
    const client = pipelineClient(await ready(first));
    await client.createAndApprove(1);
    await waitFor(client.status, (s) => converged(s, 1), { timeoutMs: deliveryBoundMs, intervalMs: 200 });
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    rmSync(join(dir, 'postgres', clusterMarker));

    const second = launch(dir);
    const again = pipelineClient(await ready(second));

    expect((await again.status()).tasks.approved).toBe(1);
    expect(second.output()).not.toContain('set aside');
    expect(second.output()).not.toContain('initializing PostgreSQL');
    expect(existsSync(join(dir, 'postgres', clusterMarker))).toBe(true);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });
});
