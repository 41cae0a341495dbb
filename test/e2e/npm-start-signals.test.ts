import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { removeLocalPostgres } from '../../infra/local/postgres';
import { tempDataDir } from '../support/pipeline-client';
import { alive, killTree, type ProcessInfo, processes, treeOf } from '../support/process-tree';
import { waitFor } from '../support/wait-for';

/**
 * `npm start` as a user types it (npm's own binary, its start script), stopped by a signal to
 * the npm process alone: what `timeout`, `kill <pid>`, supervisors and `docker stop` (npm as
 * the container's first process) send. Every process of the tree must end, PostgreSQL with
 * them, and the next start must find a clean stop. Before, npm handed SIGTERM to the shell of
 * its script, which died without passing it on, and npm ignored nothing else: the runtime and
 * PostgreSQL ran on, orphaned.
 */

const repo = resolve(import.meta.dirname, '../..');
const children: ChildProcess[] = [];
/** Processes seen in a tree: a failing stop leaves them orphaned, out of their npm's tree. */
const seen: ProcessInfo[] = [];
const dirs: string[] = [];

afterEach(async () => {
  // Only a process that is still the one seen (its id not reused by another since).
  const now = processes();
  const left = seen.splice(0).filter((p) => now.some((q) => q.pid === p.pid && q.command === p.command));
  killTree(...children.splice(0).flatMap((c) => (c.pid ? [c.pid] : [])), ...left.map((p) => p.pid));
  for (const d of dirs.splice(0)) {
    await removeLocalPostgres(join(d, 'postgres'));
    rmSync(d, { recursive: true, force: true });
  }
});

function npmStart(dataDir: string) {
  const child = spawn('npm', ['start'], {
    cwd: repo,
    env: { ...process.env, PORT: '0', PIPELINE_DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  const seen: ((output: string) => void)[] = [];
  const collect = (c: Buffer) => {
    output += c.toString();
    for (const s of seen) s(output);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  return {
    child,
    output: () => output,
    /** Calls `f` with the output so far on each new chunk of it. */
    onOutput: (f: (output: string) => void) => seen.push(f),
  };
}

/** Resolves once the start says it is ready; fails with its output if npm ends first. */
async function ready(run: ReturnType<typeof npmStart>): Promise<void> {
  await waitFor(
    () => run.output(),
    (o) => {
      if (run.child.exitCode !== null || run.child.signalCode !== null) {
        throw new Error(`npm start ended before it was ready:\n${o}`);
      }
      return o.includes('pipeline ready:');
    },
    { timeoutMs: 240_000, intervalMs: 50, what: 'pipeline ready' },
  );
}

/** Waits until no process of `tree` is left; fails naming those still running. */
async function allGone(tree: readonly ProcessInfo[]): Promise<void> {
  seen.push(...tree);
  await waitFor(
    () => tree.filter((p) => alive(p.pid)).map((p) => `${p.pid} ${p.command}`),
    (left) => left.length === 0,
    { timeoutMs: 120_000, intervalMs: 50, what: 'every process of the tree gone' },
  );
}

const postmasterOf = (tree: readonly ProcessInfo[]) => tree.find((p) => /\/postgres -D /.test(p.command));

/** A start after `dir`'s last stop: ready, and saying nothing of an unclean one; then stopped. */
async function startsClean(dir: string): Promise<string> {
  const next = npmStart(dir);
  await ready(next);
  const tree = treeOf(next.child.pid as number);
  process.kill(next.child.pid as number, 'SIGINT');
  await allGone(tree);
  return next.output();
}

const uncleanSigns = /did not stop cleanly|left running by an earlier start|stale postmaster\.pid/;

describe('npm start stopped by a signal to npm alone', () => {
  it.each(['SIGTERM', 'SIGHUP', 'SIGINT'] as const)(
    '%s: the runtime stops gracefully, nothing of the tree is left, the next start finds a clean stop',
    async (signal) => {
      const dir = tempDataDir('pipeline-npm-signal-');
      dirs.push(dir);
      const run = npmStart(dir);
      await ready(run);
      const npm = run.child.pid as number;
      const tree = treeOf(npm);
      const postmaster = postmasterOf(tree);
      expect(postmaster, JSON.stringify(tree)).toBeDefined();

      process.kill(npm, signal);
      await allGone(tree);

      expect(alive(postmaster?.pid as number)).toBe(false);
      // Stopped as Ctrl-C stops it, not killed.
      expect(run.output()).toMatch(/: stopping \(finishing in-flight work/);
      expect(run.output()).toMatch(/\d stopped\n/);
      expect(await startsClean(dir)).not.toMatch(uncleanSigns);
    },
  );

  it('SIGTERM while it starts (PostgreSQL running, the rest starting): everything it started stops', async () => {
    const dir = tempDataDir('pipeline-npm-signal-');
    dirs.push(dir);
    const run = npmStart(dir);
    const npm = run.child.pid as number;
    let tree: ProcessInfo[] = [];
    const signalled = new Promise<void>((ok) =>
      run.onOutput((output) => {
        if (tree.length > 0 || !output.includes('migrations applied')) return;
        tree = treeOf(npm);
        process.kill(npm, 'SIGTERM');
        ok();
      }),
    );
    await signalled;
    expect(postmasterOf(tree)).toBeDefined();

    await allGone(tree);

    // Stopped before it was ready, or (when the start had just finished) as a running one.
    expect(run.output()).toMatch(/stopped before it was ready|\d stopped\n/);
    expect(await startsClean(dir)).not.toMatch(uncleanSigns);
  });
});
