/**
 * `npm start`: the whole pipeline on this machine. Environment:
 * PORT (3000), PIPELINE_DATA_DIR (./.pipeline), PIPELINE_DYNAMO (dynalite | dynamodb-local),
 * PIPELINE_FAULTS and PIPELINE_FAULT_SEED (fault injection in the local adapters).
 */
// First: before any module below builds an AWS SDK client.
import './quiet-sdk-warning';
import { topology } from '../../functions/topology';
import { isPipelineError } from '../../shared/errors';
import { defaultPort } from '../../shared/local-port';
import { type FaultRates, parseFaults } from './faults';
import { portMessage, portUnavailable } from './ports';
import { type Runtime, startRuntime } from './runtime';
import { parseStartEnvironment, type StartEnvironment } from './start-environment';
import { onStopRequest } from './stop-requests';

const log = (message: string, extra?: Record<string, unknown>) => {
  const time = new Date().toISOString().slice(11, 23);
  console.log(
    `${time} ${message}${extra && Object.keys(extra).length > 0 ? ` ${JSON.stringify(extra)}` : ''}`,
  );
};

/** One line naming why the start failed, whatever the error's text holds. */
const oneLine = (err: unknown) =>
  (err instanceof Error ? err.message : String(err)).replace(/\s*\n\s*/g, ' | ');

let ready = false;

// A reader that went away (`npm start | tee log`, and Ctrl-C reaches tee first) makes the next
// write fail with EPIPE, emitted as an 'error' on the stream; unhandled, it would end the process
// before the shutdown stopped PostgreSQL. Output that cannot be written is dropped: the shutdown
// goes on, and what it would have said is lost with the terminal that closed.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});

/** The host the local HTTP server listens on (the runtime's default). */
const host = '127.0.0.1';

// A start waiting on something that can no longer happen (nothing left to keep the event loop
// alive) would otherwise end with exit code 0 and no word: say so, and fail.
process.on('beforeExit', () => {
  if (ready) return;
  console.error('pipeline failed to start: it stopped waiting before it was ready (nothing left to wait on)');
  process.exit(1);
});

/** The runtime once started; until then a stop request aborts the start. */
let runtime: Runtime | undefined;
const startAborted = new AbortController();
/** Monotonic ms of the first stop request (0: none), so a jump of the wall clock changes nothing. */
let stoppingSince = 0;

/**
 * A stop request (see stop-requests.ts): a graceful stop, as Ctrl-C always did; during the start
 * it aborts the start at its next step, which stops what it started. A second request a second
 * or more later exits at once.
 */
function stop(cause: string): void {
  const now = performance.now();
  // `npm start` relays the terminal's Ctrl-C, so one key press can arrive twice at once.
  if (stoppingSince > 0 && now - stoppingSince < 1_000) return;
  if (stoppingSince > 0) {
    log(`${cause} again: exiting now (pending events stay pending for the next start)`);
    process.exit(130);
  }
  stoppingSince = now;
  if (runtime === undefined) {
    log(
      `${cause}: stopping the start (what it started is stopped again; press Ctrl-C again to exit at once)`,
    );
    startAborted.abort(new Error(`the start was stopped (${cause})`));
    return;
  }
  log(`${cause}: stopping (finishing in-flight work; press Ctrl-C again to exit at once)`);
  stopRuntime(runtime);
}

/** The graceful stop: stop claiming, settle what is in flight, stop the services; then exit. */
function stopRuntime(started: Runtime): void {
  started.stop().then(
    () => {
      log('stopped');
      process.exit(0);
    },
    (err) => {
      console.error('stop failed', err);
      process.exit(1);
    },
  );
}

async function main(): Promise<void> {
  onStopRequest(stop);
  let config: StartEnvironment;
  let faults: FaultRates;
  try {
    config = parseStartEnvironment(process.env);
    faults = parseFaults(config.PIPELINE_FAULTS);
  } catch (err) {
    if (!isPipelineError(err, 'CONFIG')) throw err;
    console.error(err.message);
    process.exit(2);
  }
  const seed = config.PIPELINE_FAULT_SEED ?? Date.now() % 2 ** 31;
  if (Object.values(faults).some((r) => r > 0)) log('fault injection on', { ...faults, seed });

  // Before PostgreSQL is created and migrated (seconds): a taken port fails the start at once.
  if (config.PORT !== 0) {
    const unavailable = await portUnavailable(config.PORT, host);
    if (unavailable) {
      console.error(`pipeline failed to start: ${portMessage(config.PORT, host, unavailable.code)}`);
      process.exit(1);
    }
  }

  const started = await startRuntime({
    // The project's pipeline: `npm start` is an entry point, as the CDK app and each handler are.
    topology,
    dataDir: config.PIPELINE_DATA_DIR,
    port: config.PORT,
    dynamo: config.PIPELINE_DYNAMO,
    faults,
    faultSeed: seed,
    ...(config.PIPELINE_CALLER ? { caller: config.PIPELINE_CALLER } : {}),
    signal: startAborted.signal,
    log,
  });
  runtime = started;
  ready = true;
  log(`data in ${started.dataDir}, DynamoDB engine ${config.PIPELINE_DYNAMO}`);
  console.log(`pipeline ready: ${started.url}`);
  // Asked to stop after the start's last look at its signal: stop now.
  if (startAborted.signal.aborted) {
    log('stopping, as asked during the start');
    stopRuntime(started);
  }
}

main().catch((err) => {
  // The start's own abort (see RuntimeOptions.signal), not a failure that came first.
  if (startAborted.signal.aborted && err === startAborted.signal.reason) {
    log('stopped before it was ready');
    process.exit(0);
  }
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  // The port taken between the check and the server's listen.
  if (code === 'EADDRINUSE' || code === 'EACCES') {
    const port = Number(process.env.PORT?.trim() || defaultPort);
    console.error(`pipeline failed to start: ${portMessage(port, host, code)}`);
    process.exit(1);
  }
  console.error(`pipeline failed to start: ${oneLine(err)}`);
  process.exit(1);
});
