import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import dynalite from 'dynalite';
import { freePort } from './embedded-pg';

/** A running DynamoDB engine on loopback. */
export interface RunningDynamo {
  readonly endpoint: string;
  stop(): Promise<void>;
}

/** dynalite in this process, in memory; tables become ACTIVE at once. */
export async function startDynalite(): Promise<RunningDynamo> {
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * dynalite in a child process of its own, in memory: for the benchmark, so the engine's work
 * does not share a thread with the client code being measured (as with a real DynamoDB).
 */
export async function startDynaliteProcess(): Promise<RunningDynamo> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      '-e',
      `require('dynalite')({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 }).listen(${port}, '127.0.0.1', () => console.log('ready'))`,
    ],
    { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`dynalite exited (${code}) before it was ready`)));
    child.stdout?.once('data', () => resolve());
  });
  return {
    endpoint: `http://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

const emulatorDir = join(process.cwd(), 'node_modules', 'amplify-dynamodb-simulator', 'emulator');

/** Why DynamoDB Local cannot run here, or `undefined` when it can (Java on PATH, jar installed). */
export function dynamoDbLocalUnavailable(): string | undefined {
  if (!existsSync(join(emulatorDir, 'DynamoDBLocal.jar'))) {
    return `DynamoDBLocal.jar not found in ${emulatorDir} (npm package amplify-dynamodb-simulator)`;
  }
  const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
  if (java.error || java.status !== 0) {
    return `no Java runtime on PATH (java -version: ${java.error?.message ?? `exit ${java.status}`})`;
  }
  return undefined;
}

/**
 * DynamoDB Local (the amplify-dynamodb-simulator jar) on a free port, in memory, one shared
 * database for every credential and region, telemetry off. Resolves once it answers HTTP;
 * rejects with its output if it exits or stays silent for 60 s.
 */
export async function startDynamoDbLocal(): Promise<RunningDynamo> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    'java',
    [
      `-Djava.library.path=${join(emulatorDir, 'DynamoDBLocal_lib')}`,
      '-jar',
      'DynamoDBLocal.jar',
      '-inMemory',
      '-sharedDb',
      '-disableTelemetry',
      '-port',
      String(port),
    ],
    { cwd: emulatorDir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout?.on('data', (d: Buffer) => {
    output += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    output += d.toString();
  });
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) => reject(new Error(`DynamoDB Local exited (${code}):\n${output}`))),
  );
  const endpoint = `http://127.0.0.1:${port}`;
  const ready = (async () => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        await fetch(endpoint);
        return;
      } catch {
        if (Date.now() > deadline)
          throw new Error(`DynamoDB Local did not answer on ${endpoint}:\n${output}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  })();
  try {
    await Promise.race([ready, exited]);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  exited.catch(() => undefined);
  return {
    endpoint,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
