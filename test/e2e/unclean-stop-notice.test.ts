import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { removeLocalPostgres } from '../../infra/local/postgres';
import { tempDataDir } from '../support/pipeline-client';
import { killTree } from '../support/process-tree';
import { waitFor } from '../support/wait-for';

/**
 * What `npm start`'s entry point says of the run before it, on one data directory: nothing on
 * its first start (there was no run before: until e107860 its recount of the new counters said
 * "the last run did not stop cleanly"), nothing after a clean stop, and that the last run did
 * not stop cleanly after a SIGKILL of its whole process tree.
 */

const children: ChildProcess[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const c of children.splice(0))
    if (c.pid && c.exitCode === null && c.signalCode === null) killTree(c.pid);
  for (const d of dirs.splice(0)) {
    await removeLocalPostgres(join(d, 'postgres'));
    rmSync(d, { recursive: true, force: true });
  }
});

/** Whatever the start could say of a run before it that stopped without a clean stop. */
const uncleanSigns =
  /did not stop cleanly|killed|crashed|left running by an earlier start|stale postmaster\.pid/;

/** `npm start`'s entry point on `dataDir`, ready, its output so far readable. */
async function started(dataDir: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'infra/local/start.ts'], {
    env: { ...process.env, PORT: '0', PIPELINE_DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  const collect = (c: Buffer) => {
    output += c.toString();
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<number | null>((ok) => child.once('exit', (code) => ok(code)));
  await waitFor(
    () => output,
    (o) => {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`the start ended before it was ready:\n${o}`);
      }
      return o.includes('pipeline ready:');
    },
    { timeoutMs: 240_000, intervalMs: 50, what: 'pipeline ready' },
  );
  return { child, exited, output: () => output };
}

describe('a start on a data directory', () => {
  it('says the last run did not stop cleanly after a SIGKILL, and neither on the first start nor after a clean stop', async () => {
    const dir = tempDataDir('pipeline-unclean-notice-');
    dirs.push(dir);

    const first = await started(dir);
    const firstLog = first.output();
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);

    const afterClean = await started(dir);
    const afterCleanLog = afterClean.output();
    killTree(afterClean.child.pid as number);
    await afterClean.exited;

    const afterKill = await started(dir);
    const afterKillLog = afterKill.output();
    afterKill.child.kill('SIGTERM');
    expect(await afterKill.exited).toBe(0);

    expect(firstLog).not.toMatch(uncleanSigns);
    expect(afterCleanLog).not.toMatch(uncleanSigns);
    expect(afterKillLog).toMatch(
      new RegExp(`the last run on \\S+ \\(pid ${afterClean.child.pid}\\) did not stop cleanly`),
    );
    expect(afterKillLog).toMatch(/counters recounted from the stores \(the last run did not stop cleanly\)/);
  }, 600_000);
});
