import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { clearStaleServer } from '../../infra/local/postgres';
import { tempDataDir } from '../support/pipeline-client';
import { waitFor } from '../support/wait-for';

// `npm start`'s entry point as a terminal runs it: its output piped into a reader that dies on
// Ctrl-C (`npm start 2>&1 | tee log`), and started on a port something else holds.

const children: ChildProcess[] = [];
const dirs: string[] = [];
const servers: Server[] = [];

afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  }
  for (const d of dirs.splice(0)) {
    await clearStaleServer(join(d, 'postgres'));
    rmSync(d, { recursive: true, force: true });
  }
  for (const s of servers.splice(0)) s.close();
});

const exited = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Starts start.ts with stdout and stderr on one pipe whose only reader is `reader` (like `| tee`). */
function startPiped(dataDir: string) {
  // Dies on SIGINT as tee does: no handler.
  const reader = spawn(process.execPath, ['-e', 'process.stdin.on("data", (d) => process.stdout.write(d))'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const start = spawn(process.execPath, ['--import', 'tsx', 'infra/local/start.ts'], {
    env: { ...process.env, PORT: '0', PIPELINE_DATA_DIR: dataDir },
    stdio: ['ignore', reader.stdin, reader.stdin],
  });
  // The test's own copy of the pipe's write end: from now on start.ts alone writes into it.
  reader.stdin?.destroy();
  children.push(reader, start);
  let output = '';
  reader.stdout?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  return { reader, start, output: () => output };
}

describe('npm start in a terminal', () => {
  it('Ctrl-C after the reader of its piped output died still stops PostgreSQL, and prints no SDK notice', async () => {
    const dir = tempDataDir('pipeline-epipe-');
    dirs.push(dir);
    const { reader, start, output } = startPiped(dir);
    await waitFor(
      async () => output(),
      (o) => o.includes('pipeline ready:') || start.exitCode !== null,
      { timeoutMs: 240_000, intervalMs: 100 },
    );
    expect(output()).toContain('pipeline ready:');
    expect(output()).not.toContain('NodeVersionSupportWarning');
    const postgres = Number(readFileSync(join(dir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
    expect(alive(postgres)).toBe(true);

    // The terminal's Ctrl-C: the reader goes first, so every later write of start.ts hits EPIPE.
    reader.kill('SIGINT');
    await exited(reader);
    start.kill('SIGINT');
    const code = await exited(start);

    expect(code).toBe(0);
    expect(alive(postgres)).toBe(false);
  }, 300_000);

  it('a port in use fails the start at once, naming PORT, before PostgreSQL is created', async () => {
    const taken = createServer();
    servers.push(taken);
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    const dir = join(tempDataDir('pipeline-port-'), 'data');
    dirs.push(join(dir, '..'));
    let stderr = '';
    const start = spawn(process.execPath, ['--import', 'tsx', 'infra/local/start.ts'], {
      env: { ...process.env, PORT: String(port), PIPELINE_DATA_DIR: dir },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(start);
    start.stderr?.on('data', (c: Buffer) => {
      stderr += c.toString();
    });

    const code = await exited(start);

    expect(code).toBe(1);
    expect(stderr).toContain(`pipeline failed to start: port ${port} on 127.0.0.1 is in use`);
    expect(stderr).toContain(`PORT=${port + 1} npm start`);
    expect(existsSync(join(dir, 'postgres'))).toBe(false);
  }, 120_000);
});
