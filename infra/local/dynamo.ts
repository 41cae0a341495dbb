import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { sleep } from '../../shared/db/retry';
import { type LocalAwsCredentials, localRegion } from './local-credentials';
import { freePort } from './ports';

/** A DynamoDB engine on loopback. */
export interface LocalDynamo {
  readonly endpoint: string;
  readonly engine: 'dynalite' | 'dynamodb-local';
  /**
   * Resolves with the cause once the engine died without being asked to stop (its worker threw
   * or exited, its JVM exited); never settles after {@link stop}. What a supervisor watches.
   */
  readonly died: Promise<string>;
  stop(): Promise<void>;
  /**
   * Ends the engine at once, as a crash would (no request finished, nothing closed): for fault
   * drills and the tests of what the runtime does when its engine dies.
   */
  kill(): Promise<void>;
}

/** How long a stopping dynalite waits for the requests in flight before it cuts their connections. */
const stopGraceMs = 5_000;

/** What the dynalite worker posts back: its port once listening, then that it stopped (or an error). */
type WorkerMessage = { port?: number; stopped?: boolean; error?: string };

/**
 * dynalite (pure Node) in a worker thread of its own (`dynalite-worker.mjs`): with `dir`, its
 * LevelDB lives there so inbox records and the index survive restarts (the local runtime);
 * without, in memory (tests). In its own thread because the engine's work (request parsing,
 * expression evaluation, LevelDB) on the runtime's event loop was most of what held the
 * consumers back at 50 approvals/s; a worker rather than a child process so that a SIGKILL of
 * the runtime takes the engine, and its lock on the directory, with it.
 *
 * `port` (a restart's) listens where the clients already point; a free one by default.
 *
 * `credentials` (the data directory's key pair, see local-credentials.ts): every request must
 * be signed with them (SigV4, verified in the worker before dynalite reads it); one that is not
 * is refused as DynamoDB refuses it (400, MissingAuthenticationTokenException,
 * UnrecognizedClientException, InvalidSignatureException). Without: any signature is accepted,
 * as dynalite alone does (a test's in-memory engine).
 *
 * Stop: the worker stops accepting connections, answers the requests in flight (up to a grace
 * period) and closes its LevelDB before `stop` resolves. A worker that throws or exits on its
 * own resolves `died` (its listeners stay for the worker's whole life, so a death after the
 * start is seen as well as one during it); its LevelDB lock goes with the thread.
 */
export async function startDynalite(
  dir?: string,
  options: { readonly port?: number; readonly credentials?: LocalAwsCredentials } = {},
): Promise<LocalDynamo> {
  if (dir) mkdirSync(dir, { recursive: true });
  const worker = new Worker(new URL('./dynalite-worker.mjs', import.meta.url), {
    workerData: {
      dir: dir ? resolve(dir) : undefined,
      stopGraceMs,
      port: options.port ?? 0,
      credentials: options.credentials,
      region: localRegion,
    },
  });
  let stopping: Promise<void> | undefined;
  let lastError: string | undefined;
  worker.on('error', (err) => {
    lastError = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  });
  const exited = new Promise<number>((ok) => worker.on('exit', ok));
  const died = new Promise<string>((ok) => {
    void exited.then((code) => {
      if (!stopping) ok(`the dynalite worker exited (${code})${lastError ? `: ${lastError}` : ''}`);
    });
  });
  let port: number;
  try {
    port = await new Promise<number>((ok, fail) => {
      void exited.then((code) =>
        fail(
          new Error(
            `dynalite worker exited (${code}) before it listened${lastError ? `: ${lastError}` : ''}`,
          ),
        ),
      );
      worker.once('message', (m: WorkerMessage) =>
        m.port ? ok(m.port) : fail(new Error(`dynalite did not start: ${m.error ?? 'no port'}`)),
      );
    });
  } catch (err) {
    stopping = Promise.resolve();
    await worker.terminate();
    throw err;
  }
  return {
    endpoint: `http://127.0.0.1:${port}`,
    engine: 'dynalite',
    died,
    kill: async () => {
      await worker.terminate();
    },
    stop: () => {
      stopping ??= (async () => {
        const stopped = new Promise<WorkerMessage>((ok) => {
          worker.on('message', (m: WorkerMessage) => m.stopped && ok(m));
          void exited.then(() => ok({ stopped: true }));
        });
        worker.postMessage('stop');
        const outcome = await stopped;
        // Its port closed and the server with it, the worker ends by itself; terminate is for
        // a handle dynalite left open.
        const leftOpen = setTimeout(() => void worker.terminate(), 1_000);
        await exited;
        clearTimeout(leftOpen);
        if (outcome.error) throw new Error(`dynalite stopped with an error: ${outcome.error}`);
      })();
      return stopping;
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
export async function startDynamoDbLocal(
  dir?: string,
  options: {
    /**
     * How long the JVM may take to answer before the start fails: seconds on an idle machine,
     * minutes on a loaded one (a test suite's, whose processes fight it for the cores). @default 60 s
     */
    readonly startTimeoutMs?: number;
    /** Where to listen (a restart's: where the clients already point); a free port by default. */
    readonly port?: number;
  } = {},
): Promise<LocalDynamo> {
  const unavailable = dynamoDbLocalUnavailable();
  if (unavailable) throw new Error(`DynamoDB Local cannot run here: ${unavailable}`);
  if (dir) mkdirSync(dir, { recursive: true });
  const port = options.port ?? (await freePort());
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
  let stopping = false;
  const died = new Promise<string>((ok) =>
    child.once('exit', (code, signal) => {
      if (!stopping)
        ok(`DynamoDB Local exited (${code ?? signal}): ${output.trim().split('\n').slice(-3).join(' | ')}`);
    }),
  );
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (options.startTimeoutMs ?? 60_000);
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
    died,
    kill: () =>
      new Promise<void>((ok) => {
        if (child.exitCode !== null || child.signalCode !== null) return ok();
        child.once('exit', () => ok());
        child.kill('SIGKILL');
      }),
    stop: () =>
      new Promise<void>((ok) => {
        stopping = true;
        if (child.exitCode !== null || child.signalCode !== null) return ok();
        child.once('exit', () => ok());
        child.kill('SIGTERM');
      }),
  };
}
