import { spawn } from 'node:child_process';
import {
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { clearStaleServer } from '../../infra/local/postgres';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { deliveryBoundMs, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { approvalCounters, approvalEffects } from '../support/topology-expectations';
import { waitFor } from '../support/wait-for';

/**
 * The bus journal at start: one of over 512 MiB (a million lines, what about half a million
 * approvals leave) is read as a stream, compacted, and what it holds pending is delivered once;
 * a start that fails for any reason exits non-zero with one line naming the cause.
 */

const dirs: string[] = [];
const runtimes: Runtime[] = [];

afterEach(async () => {
  for (const r of runtimes.splice(0)) await r.stop();
  for (const d of dirs.splice(0)) {
    await clearStaleServer(join(d, 'postgres'));
    rmSync(d, { recursive: true, force: true });
  }
}, 120_000);

/** V8's longest string (2^29 - 24 characters): a journal past it cannot be read as one. */
const longestString = 2 ** 29 - 24;

/**
 * Writes `count` delivered events before the journal's own lines: each an event line padded to
 * about a kilobyte (an approval's is about that) and its done line, as a long run leaves them.
 */
function prependDelivered(path: string, count: number): void {
  const own = readFileSync(path, 'utf8');
  const sample = JSON.parse(own.split('\n')[0] as string) as { event: Record<string, unknown> };
  const pad = 'x'.repeat(800);
  const fd = openSync(`${path}.big`, 'w');
  try {
    let chunk = '';
    for (let i = 0; i < count; i++) {
      const id = `delivered-${i}`;
      chunk += `${JSON.stringify({
        t: 'event',
        event: { ...sample.event, id, detail: { padding: pad } },
        targets: [{ rule: 'history', consumer: 'index' }],
      })}\n${JSON.stringify({ t: 'done', id, consumer: 'index', rule: 'history' })}\n`;
      if (chunk.length > 8 << 20) {
        writeSync(fd, chunk);
        chunk = '';
      }
    }
    writeSync(fd, `${chunk}${own}`);
  } finally {
    closeSync(fd);
  }
  renameSync(`${path}.big`, path);
}

describe('the bus journal at start', () => {
  it('recovers a journal of a million lines (over 512 MiB) as a stream and delivers what it holds pending, once each', async () => {
    const dataDir = tempDataDir('pipeline-bigjournal-');
    dirs.push(dataDir);
    // First run: five approvals the bus journals, whose consumers never get to run (their
    // invocations fail before the handler), so they are pending when it stops.
    const first = await startRuntime({
      dataDir,
      port: 0,
      seams: {
        lambda: (name, fn) =>
          name.startsWith('consumer-')
            ? async () => {
                throw new Error('held for the next start');
              }
            : fn,
      },
    });
    runtimes.push(first);
    await pipelineClient(first.url).createAndApprove(5);
    await waitFor(
      () => first.status(),
      (s) => s.outbox?.delivered === 5,
      { timeoutMs: deliveryBoundMs, intervalMs: 100, what: 'five events on the bus' },
    );
    await first.stop();
    runtimes.splice(0);
    const journal = join(dataDir, 'bus', 'journal.jsonl');
    prependDelivered(journal, 500_000);
    const bigBytes = statSync(journal).size;

    const logged: { message: string; extra?: Record<string, unknown> }[] = [];
    const second = await startRuntime({
      dataDir,
      port: 0,
      log: (message, extra) => logged.push({ message, extra }),
    });
    runtimes.push(second);
    const smallBytes = statSync(journal).size;
    const status = await waitFor(
      pipelineClient(second.url).status,
      (s) => approvalCounters().every((counter) => (s.effects[counter] ?? 0) >= 5),
      { timeoutMs: deliveryBoundMs, intervalMs: 200, what: 'the five pending events delivered' },
    );
    await second.bus.idle();

    expect(bigBytes).toBeGreaterThan(longestString);
    // Compacted at start to the five pending events.
    expect(smallBytes).toBeLessThan(64 * 1024);
    expect(status.tasks.approved).toBe(5);
    expect(await second.consumers.countEffects()).toEqual(approvalEffects(5));
    const recovered = logged.find((l) => l.message === 'bus journal recovered');
    console.log(
      `a ${Math.round(bigBytes / 2 ** 20)} MiB journal recovered at start in ${recovered?.extra?.ms} ms`,
    );
  }, 1_800_000);

  it('a start that fails exits non-zero with one line naming the cause', async () => {
    const dataDir = tempDataDir('pipeline-badstart-');
    dirs.push(dataDir);
    // A journal the bus cannot read: a directory in its place.
    mkdirSync(join(dataDir, 'bus', 'journal.jsonl'), { recursive: true });

    const child = spawn(process.execPath, ['--import', 'tsx', 'infra/local/start.ts'], {
      env: { ...process.env, PORT: '0', PIPELINE_DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr?.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));

    expect(code).toBe(1);
    expect(stdout).not.toContain('pipeline ready');
    const failures = stderr.split('\n').filter((l) => l.startsWith('pipeline failed to start'));
    expect(failures).toEqual([
      `pipeline failed to start: the bus could not recover its journal ${join(dataDir, 'bus', 'journal.jsonl')}: EISDIR: illegal operation on a directory, read`,
    ]);
  }, 600_000);
});
