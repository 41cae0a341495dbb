import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import dynalite from 'dynalite';
import { sleep } from '../../shared/db/retry';
import { freePort } from './ports';

/** A DynamoDB engine on loopback. */
export interface LocalDynamo {
  readonly endpoint: string;
  readonly engine: 'dynalite' | 'dynamodb-local';
  stop(): Promise<void>;
}

/**
 * dynalite (pure Node) in this process: with `dir`, its LevelDB lives there so inbox records
 * and the index survive restarts (the local runtime); without, in memory (tests).
 */
export async function startDynalite(dir?: string): Promise<LocalDynamo> {
  if (dir) mkdirSync(dir, { recursive: true });
  const server = dynalite({
    ...(dir ? { path: dir } : {}),
    createTableMs: 0,
    deleteTableMs: 0,
    updateTableMs: 0,
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => ok());
  });
  const { port } = server.address() as AddressInfo;
  // Requests still being handled when the server stops must finish before dynalite closes its
  // LevelDB: a handler that reaches the closed database throws outside any caller ("Database is
  // closed", an uncaught error). So `close` (no new connections, idle ones closed) comes first,
  // and connections are cut only once nothing is in flight, or after a grace period.
  let inFlight = 0;
  let drained: (() => void) | undefined;
  server.on('request', (_req, res) => {
    inFlight++;
    res.once('close', () => {
      inFlight--;
      if (inFlight === 0) drained?.();
    });
  });
  const stopGraceMs = 5_000;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    engine: 'dynalite',
    stop: async () => {
      const closed = new Promise<void>((ok) => server.close(() => ok()));
      server.closeIdleConnections?.();
      if (inFlight > 0) {
        await new Promise<void>((ok) => {
          drained = ok;
          setTimeout(ok, stopGraceMs).unref();
        });
      }
      server.closeAllConnections?.();
      await closed;
    },
  };
}

const emulatorDir = resolve('node_modules', 'amplify-dynamodb-simulator', 'emulator');

/** Why DynamoDB Local cannot run here, or undefined when it can. */
export function dynamoDbLocalUnavailable(): string | undefined {
  if (!existsSync(join(emulatorDir, 'DynamoDBLocal.jar')))
    return `DynamoDBLocal.jar is not in ${emulatorDir}`;
  const java = spawnSync('java', ['-version']);
  if (java.error || java.status !== 0) return 'Java 17+ is not on PATH';
  return undefined;
}

/**
 * AWS's DynamoDB Local (the jar shipped in npm `amplify-dynamodb-simulator`, run with Java 17+)
 * on a free port, one shared database for every credential and region: its file under `dir`,
 * or in memory without one.
 */
export async function startDynamoDbLocal(dir?: string): Promise<LocalDynamo> {
  const unavailable = dynamoDbLocalUnavailable();
  if (unavailable) throw new Error(`DynamoDB Local cannot run here: ${unavailable}`);
  if (dir) mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const child: ChildProcess = spawn(
    'java',
    [
      `-Djava.library.path=${join(emulatorDir, 'DynamoDBLocal_lib')}`,
      '-jar',
      'DynamoDBLocal.jar',
      '-sharedDb',
      ...(dir ? ['-dbPath', resolve(dir)] : ['-inMemory']),
      '-disableTelemetry',
      '-port',
      String(port),
    ],
    { cwd: emulatorDir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const keep = (d: Buffer) => {
    output = (output + d.toString()).slice(-4_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`DynamoDB Local exited (${child.exitCode}): ${output}`);
    try {
      await fetch(endpoint);
      break;
    } catch {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`DynamoDB Local did not answer on ${endpoint}: ${output}`);
      }
      await sleep(100);
    }
  }
  return {
    endpoint,
    engine: 'dynamodb-local',
    stop: () =>
      new Promise<void>((ok) => {
        if (child.exitCode !== null) return ok();
        child.once('exit', () => ok());
        child.kill('SIGTERM');
      }),
  };
}
