// @ts-check
// dynalite's HTTP server in a worker thread of its own (infra/local/dynamo.ts starts it), so
// the engine's request parsing, expression evaluation and LevelDB work run on their own event
// loop, off the thread that runs the consumers, the relay and the HTTP API, as DynamoDB Local
// runs in its own JVM and DynamoDB on AWS in another machine. Plain JavaScript: a worker thread
// loads this file with Node's own loader, under tsx, vitest and plain node alike.
import { parentPort, workerData } from 'node:worker_threads';
import dynalite from 'dynalite';
import { closeIteratorsOnReturn } from './dynalite-iterators.mjs';

/** @type {{ dir?: string, stopGraceMs: number, port: number }} */
const options = workerData;
const port = parentPort;
if (!port) throw new Error('dynalite-worker.mjs runs as a worker thread (see infra/local/dynamo.ts)');

// Before dynalite opens any: each Query and Scan otherwise leaves its LevelDB iterator open.
closeIteratorsOnReturn();

const server = dynalite({
  ...(options.dir ? { path: options.dir } : {}),
  createTableMs: 0,
  deleteTableMs: 0,
  updateTableMs: 0,
});

// Requests still being handled when the server stops must finish before dynalite closes its
// LevelDB: a handler that reaches the closed database throws outside any caller ("Database is
// closed", an uncaught error). So `close` (no new connections, idle ones closed) comes first,
// and connections are cut only once nothing is in flight, or after a grace period.
let inFlight = 0;
/** @type {(() => void) | undefined} */
let drained;
server.on('request', (_req, res) => {
  inFlight++;
  res.once('close', () => {
    inFlight--;
    if (inFlight === 0) drained?.();
  });
});

async function stop() {
  const closed = new Promise((ok) => server.close(() => ok(undefined)));
  server.closeIdleConnections?.();
  if (inFlight > 0) {
    await new Promise((ok) => {
      drained = () => ok(undefined);
      setTimeout(drained, options.stopGraceMs).unref();
    });
  }
  server.closeAllConnections?.();
  // dynalite's close also closes its LevelDB, so the directory's lock is free when this resolves.
  await closed;
}

port.on('message', (message) => {
  if (message !== 'stop') return;
  stop().then(
    () => {
      port.postMessage({ stopped: true });
      port.close();
    },
    (err) => {
      port.postMessage({ stopped: true, error: String(err) });
      port.close();
    },
  );
});

server.once('error', (err) => port.postMessage({ error: String(err) }));
// A restart listens on the port the clients already point at (0: a free one).
server.listen(options.port, '127.0.0.1', () => {
  const address = server.address();
  port.postMessage({ port: typeof address === 'object' && address ? address.port : undefined });
});
