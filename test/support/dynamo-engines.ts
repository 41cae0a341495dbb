import { spawn } from 'node:child_process';
import { createConnection, createServer, type Socket } from 'node:net';
import {
  type LocalDynamo,
  startDynalite,
  startDynamoDbLocal as startDynamoDbLocalEngine,
} from '../../infra/local/dynamo';
import { freePort } from './embedded-pg';

// The engines the local runtime starts, in memory here: one implementation for both.
export { dynamoDbLocalUnavailable, startDynalite } from '../../infra/local/dynamo';

/**
 * How long DynamoDB Local's JVM may take to answer in the tests: it took 75 and 107 s beside
 * loaded suites (load average 25 to 32 on 2 cores), past the runtime's 60 s. The start is
 * another process's, with no event to wait on but its port answering: the bound only ends a
 * JVM that never answers.
 */
export const dynamoDbLocalStartTimeoutMs = 600_000;

/** DynamoDB Local as the runtime starts it, with the tests' bound on its start. */
export const startDynamoDbLocal = (dir?: string) =>
  startDynamoDbLocalEngine(dir, { startTimeoutMs: dynamoDbLocalStartTimeoutMs });

/** A running DynamoDB engine on loopback. */
export interface RunningDynamo {
  readonly endpoint: string;
  stop(): Promise<void>;
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

/** A DynamoDB engine a test can stop and start again under running clients, data kept. */
export interface RestartableDynamo extends RunningDynamo {
  /** Stops the engine: open connections are cut, new ones refused, until `resume`. */
  halt(): Promise<void>;
  /** Starts the engine again on the same data; the endpoint is the same as before. */
  resume(): Promise<void>;
  /** False between `halt` and `resume`. */
  readonly running: boolean;
}

/**
 * Starts `engine` with its data in `dir` (so records survive a restart) behind a fixed loopback
 * endpoint. The engines pick a free port at every start; the endpoint a client was built with
 * must not change across a restart, so a plain TCP relay holds the address: it listens only
 * while the engine runs (a stopped engine refuses connections, as a stopped server does) and
 * cuts every open connection when the engine stops.
 */
export async function startRestartableDynamo(
  engine: LocalDynamo['engine'],
  dir: string,
): Promise<RestartableDynamo> {
  const start = () => (engine === 'dynalite' ? startDynalite(dir) : startDynamoDbLocal(dir));
  let current: LocalDynamo | undefined = await start();
  const sockets = new Set<Socket>();
  const relay = createServer((client) => {
    const target = current ? new URL(current.endpoint) : undefined;
    if (!target) return client.destroy();
    const upstream = createConnection(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  const port = await freePort();
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      relay.once('error', reject);
      relay.listen(port, '127.0.0.1', () => {
        relay.off('error', reject);
        resolve();
      });
    });
  const unlisten = () => new Promise<void>((resolve) => relay.close(() => resolve()));
  await listen();
  const halt = async () => {
    const stopping = current;
    current = undefined;
    const closed = unlisten();
    for (const s of sockets) s.destroy();
    await closed;
    await stopping?.stop();
  };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    get running() {
      return current !== undefined;
    },
    halt,
    async resume() {
      if (current) return;
      current = await start();
      await listen();
    },
    async stop() {
      await halt();
    },
  };
}
