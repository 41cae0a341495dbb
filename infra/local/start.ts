/**
 * `npm start`: the whole pipeline on this machine. Environment:
 * PORT (3000), PIPELINE_DATA_DIR (./.pipeline), PIPELINE_DYNAMO (dynalite | dynamodb-local),
 * PIPELINE_FAULTS and PIPELINE_FAULT_SEED (fault injection in the local adapters).
 */
// First: before any module below builds an AWS SDK client.
import './quiet-sdk-warning';
import { isPipelineError } from '../../shared/errors';
import { defaultPort } from '../../shared/local-port';
import { type FaultRates, parseFaults } from './faults';
import { portMessage, portUnavailable } from './ports';
import { startRuntime } from './runtime';
import { parseStartEnvironment, type StartEnvironment } from './start-environment';

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

async function main(): Promise<void> {
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

  const runtime = await startRuntime({
    dataDir: config.PIPELINE_DATA_DIR,
    port: config.PORT,
    dynamo: config.PIPELINE_DYNAMO,
    faults,
    faultSeed: seed,
    ...(config.PIPELINE_CALLER ? { caller: config.PIPELINE_CALLER } : {}),
    log,
  });
  ready = true;
  log(`data in ${runtime.dataDir}, DynamoDB engine ${config.PIPELINE_DYNAMO}`);
  console.log(`pipeline ready: ${runtime.url}`);

  let stoppingSince = 0;
  const shutdown = (signal: string) => {
    // `npm start` relays the terminal's Ctrl-C, so one key press can arrive twice at once.
    if (stoppingSince > 0 && Date.now() - stoppingSince < 1_000) return;
    if (stoppingSince > 0) {
      log(`${signal} again: exiting now (pending events stay pending for the next start)`);
      process.exit(130);
    }
    stoppingSince = Date.now();
    log(`${signal}: stopping (finishing in-flight work; press Ctrl-C again to exit at once)`);
    runtime.stop().then(
      () => {
        log('stopped');
        process.exit(0);
      },
      (err) => {
        console.error('stop failed', err);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGHUP', () => shutdown('SIGHUP'));
}

main().catch((err) => {
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
