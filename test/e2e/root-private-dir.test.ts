import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { removeLocalPostgres } from '../../infra/local/postgres';
import { converged, deliveryBoundMs, leaseExpiryMs, pipelineClient } from '../support/pipeline-client';
import { waitFor } from '../support/wait-for';

const repo = resolve(import.meta.dirname, '../..');
const asRoot = process.getuid?.() === 0;
const cleanups: (() => Promise<void> | void)[] = [];
const children: ChildProcess[] = [];

if (!asRoot) {
  console.warn(
    '[root-private-dir] not running as root: PostgreSQL runs as this user, so these tests check the non-root path (no staged binaries, data in place); CI runs them as root',
  );
}

/**
 * A fresh `mkdtemp` directory (mode 0700, owned by whoever runs the tests: root in CI and in
 * the usual container) holding `project/`, the clone as if it lived there: every top-level entry
 * is a symlink to this checkout, and the children run with `--preserve-symlinks`, so Node loads
 * the PostgreSQL binaries package (and everything else) by its path under the private directory,
 * as it does for a clone made there, without copying `node_modules`.
 */
function privateProject(): { root: string; project: string } {
  const root = mkdtempSync(join(tmpdir(), 'pipeline-private-'));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  const project = join(root, 'project');
  mkdirSync(project);
  for (const entry of readdirSync(repo)) {
    if (entry === '.git' || entry === '.pipeline') continue;
    symlinkSync(join(repo, entry), join(project, entry));
  }
  return { root, project };
}

const modeOf = (path: string) => statSync(path).mode & 0o7777;

/** Whether the `postgres` OS user can enter `dir` (the premise of these tests as root). */
const postgresCanEnter = (dir: string) => {
  const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout);
  const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout);
  return spawnSync('test', ['-x', dir], { uid, gid }).status === 0;
};

/** Runs `node` in `cwd` as if the project lived there (see {@link privateProject}). */
function node(cwd: string, args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['--preserve-symlinks', '--preserve-symlinks-main', ...args], {
    cwd,
    env: { ...process.env, ...env },
    detached: true, // its own process group, so a test can SIGKILL the whole tree
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

/** `npm start`'s entry point from `project`, resolved with its ready URL (or rejected with its output). */
function startPipeline(project: string, dataDir: string) {
  const run = node(project, ['--import', 'tsx', 'infra/local/start.ts'], {
    PORT: '0',
    PIPELINE_DATA_DIR: dataDir,
  });
  return new Promise<{ child: ChildProcess; url: string }>((ok, fail) => {
    run.child.stdout?.on('data', () => {
      const ready = /pipeline ready: (http:\/\/\S+)/.exec(run.output());
      if (ready?.[1]) ok({ child: run.child, url: ready[1] });
    });
    run.exited.then((code) => fail(new Error(`pipeline exited (${code}) before ready:\n${run.output()}`)));
  });
}

const killTree = (child: ChildProcess, signal: NodeJS.Signals) => {
  const exited = new Promise<void>((ok) => {
    if (child.exitCode !== null || child.signalCode !== null) ok();
    else child.once('exit', () => ok());
  });
  if (child.pid && child.exitCode === null && child.signalCode === null) process.kill(-child.pid, signal);
  return exited;
};

afterEach(async () => {
  for (const c of children.splice(0)) await killTree(c, 'SIGKILL').catch(() => {});
  for (const clean of cleanups.splice(0).reverse()) await clean();
});

describe('the local runtime with the clone and PIPELINE_DATA_DIR in a fresh mkdtemp directory', () => {
  it(
    'starts, approves and delivers; a restart and a SIGKILL of the tree keep every committed task; a second pipeline on the directory is refused',
    async () => {
      const { root, project } = privateProject();
      const dataDir = join(root, 'data');
      cleanups.push(() => removeLocalPostgres(join(dataDir, 'postgres')));
      // The premise: only its owner can enter the directory.
      expect(modeOf(root)).toBe(0o700);
      if (asRoot) expect(postgresCanEnter(root)).toBe(false);
      const tmpMode = modeOf(tmpdir());

      const first = await startPipeline(project, dataDir);
      const client = pipelineClient(first.url);
      await client.createAndApprove(5, 5);
      const delivered = await waitFor(client.status, (s) => converged(s, 5), {
        timeoutMs: deliveryBoundMs,
        intervalMs: 250,
      });
      expect(delivered.tasks.approved).toBe(5);
      expect(delivered.outbox).toMatchObject({ pending: 0, delivered: 5, dead: 0 });
      expect(delivered.effects).toMatchObject({ indexDocuments: 5, archivedObjects: 5 });

      const refused = node(project, ['--import', 'tsx', 'infra/local/start.ts'], {
        PORT: '0',
        PIPELINE_DATA_DIR: dataDir,
      });
      expect(await refused.exited).toBe(1);
      expect(refused.output()).toMatch(/another pipeline \(pid \d+\) is running on/);

      // A graceful stop, then a start on the same directory: everything committed is there.
      if (first.child.pid) process.kill(first.child.pid, 'SIGTERM');
      expect(await new Promise((ok) => first.child.once('exit', ok))).toBe(0);
      const second = await startPipeline(project, dataDir);
      const again = pipelineClient(second.url);
      expect((await again.status()).tasks.approved).toBe(5);
      await again.createAndApprove(3, 3);

      // A SIGKILL of the whole tree leaves PostgreSQL running with a postmaster.pid: the next start
      // stops it and finds every committed approval.
      await killTree(second.child, 'SIGKILL');
      const third = await startPipeline(project, dataDir);
      // Rows the killed relay had claimed come back when their lease runs out, when the relay
      // runner's next run is due, as in crash-recovery.test.ts.
      const status = await waitFor(pipelineClient(third.url).status, (s) => converged(s, 8), {
        timeoutMs: leaseExpiryMs + deliveryBoundMs,
        intervalMs: 250,
      });
      expect(status.tasks.approved).toBe(8);
      expect(status.outbox).toMatchObject({ pending: 0, delivered: 8, dead: 0 });
      await killTree(third.child, 'SIGTERM');

      // Nothing the user did not name changed its permissions.
      expect(modeOf(root)).toBe(0o700);
      expect(modeOf(tmpdir())).toBe(tmpMode);
    },
    leaseExpiryMs + 3 * deliveryBoundMs,
  );
});

describe("the test support's embedded PostgreSQL with the project in a fresh mkdtemp directory", () => {
  it('starts one server (as the global setup does) and a restartable one that stops and starts again', async () => {
    const { root, project } = privateProject();
    expect(modeOf(root)).toBe(0o700);
    if (asRoot) expect(postgresCanEnter(root)).toBe(false);
    const script = `
      import pg from 'pg';
      import { startEmbeddedPostgres, startRestartablePostgres } from './test/support/embedded-pg.ts';
      const one = async (url) => {
        const c = new pg.Client({ connectionString: url });
        await c.connect();
        const r = await c.query('SELECT 1 AS one');
        await c.end();
        return r.rows[0].one;
      };
      const server = await startEmbeddedPostgres();
      const restartable = await startRestartablePostgres();
      await restartable.halt();
      await restartable.resume();
      console.log(JSON.stringify({ server: await one(server.url), restarted: await one(restartable.url) }));
      await restartable.stop();
      await server.stop();
    `;
    const run = node(project, ['--import', 'tsx', '--input-type=module', '-e', script]);
    const code = await run.exited;
    expect(run.output()).toContain('{"server":1,"restarted":1}');
    expect(code).toBe(0);
  });
});
