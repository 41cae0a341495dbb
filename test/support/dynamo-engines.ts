import { spawn } from 'node:child_process';
import { freePort } from './embedded-pg';

// The engines the local runtime starts, in memory here: one implementation for both.
export { dynamoDbLocalUnavailable, startDynalite, startDynamoDbLocal } from '../../infra/local/dynamo';

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
