// @ts-check
// dynalite's HTTP server in a worker thread of its own (infra/local/dynamo.ts starts it), so
// the engine's request parsing, expression evaluation and LevelDB work run on their own event
// loop, off the thread that runs the consumers, the relay and the HTTP API, as DynamoDB Local
// runs in its own JVM and DynamoDB on AWS in another machine. Plain JavaScript: a worker thread
// loads this file with Node's own loader, under tsx, vitest and plain node alike.
import { Readable } from 'node:stream';
import { parentPort, workerData } from 'node:worker_threads';
import dynalite from 'dynalite';
import { closeIteratorsOnReturn } from './dynalite-iterators.mjs';
import { createSigV4Verifier } from './sigv4-verifier.mjs';

/** @type {{ dir?: string, stopGraceMs: number, port: number, credentials?: import('./sigv4-verifier.mjs').LocalAwsCredentials, region: string }} */
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

/**
 * How DynamoDB refuses a request it cannot authenticate: HTTP 400 and these exceptions, as its
 * Developer Guide lists them (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html:
 * MissingAuthenticationTokenException, IncompleteSignatureException, UnrecognizedClientException,
 * InvalidSignatureException), with the `com.amazon.coral.service#` prefix DynamoDB (and
 * dynalite) put on them.
 * @type {Record<import('./sigv4-verifier.mjs').SigV4Refusal, string>}
 */
const refusals = {
  missing: 'MissingAuthenticationTokenException',
  incomplete: 'IncompleteSignatureException',
  unrecognized: 'UnrecognizedClientException',
  invalid: 'InvalidSignatureException',
  expired: 'InvalidSignatureException',
};

/** dynalite's own limit on a request body (dynalite/index.js MAX_REQUEST_BYTES). */
const maxRequestBytes = 16 * 1024 * 1024;

// Every request is verified (SigV4, the data directory's key pair) before dynalite sees it, so
// the engine's port serves no one else: dynalite itself checks only that a signature is there.
// dynalite reads the body from the request stream itself, so the verified body is handed to it
// in a stream of its own, with the request's method, target and headers.
if (options.credentials) {
  const verify = createSigV4Verifier({
    credentials: options.credentials,
    region: options.region,
    service: 'dynamodb',
  });
  const [engine] =
    /** @type {((req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void)[]} */ (
      server.listeners('request')
    );
  if (!engine) throw new Error('dynalite made a server without a request handler');
  server.removeAllListeners('request');
  server.on('request', (req, res) => {
    /** @type {Buffer[]} */
    const chunks = [];
    let size = 0;
    req.on('data', (/** @type {Buffer} */ chunk) => {
      size += chunk.length;
      if (size <= maxRequestBytes) chunks.push(chunk);
    });
    req.on('error', () => res.destroy());
    req.on('end', () => {
      if (size > maxRequestBytes) {
        res.writeHead(413, { 'content-length': '0' }).end();
        return;
      }
      const body = Buffer.concat(chunks);
      verify({ method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers, body }).then(
        (verdict) => {
          if (verdict.ok) {
            const replay = Object.assign(Readable.from(body.length > 0 ? [body] : []), {
              headers: req.headers,
              method: req.method,
              url: req.url,
            });
            engine(/** @type {never} */ (replay), res);
            return;
          }
          const text = JSON.stringify({
            __type: `com.amazon.coral.service#${refusals[verdict.reason]}`,
            message: verdict.message,
          });
          res
            .writeHead(400, {
              'content-type': 'application/x-amz-json-1.0',
              'content-length': String(Buffer.byteLength(text)),
              'x-amzn-errortype': refusals[verdict.reason],
            })
            .end(text);
        },
        (err) => {
          res.writeHead(500, { 'content-type': 'application/x-amz-json-1.0' });
          res.end(
            JSON.stringify({ __type: 'com.amazon.coral.service#InternalFailure', message: String(err) }),
          );
        },
      );
    });
  });
}

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
