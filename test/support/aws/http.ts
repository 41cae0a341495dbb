import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';

/** A stand-in listening on loopback: point an SDK client (or `AWS_ENDPOINT_URL_*`) at `endpoint`. */
export interface LocalEndpoint {
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  readonly endpoint: string;
  /** Stops listening and drops open connections (SDK clients keep theirs alive). */
  close(): Promise<void>;
}

/** Handles one request; a rejection becomes a bare 500 so a bug in a stand-in is never a hang. */
export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** Starts `handler` on 127.0.0.1, on a port the kernel picks. */
export async function listenOnLoopback(
  handler: RequestHandler,
): Promise<{ server: Server; endpoint: string }> {
  const server = createServer((req, res) => {
    handler(req, res).catch((err: unknown) => {
      // The stand-in failed, not the caller: a 500 the SDK surfaces, with the error as its text.
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(err instanceof Error ? (err.stack ?? err.message) : err));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return { server, endpoint: `http://127.0.0.1:${port}` };
}

/** Closes `server`, ending keep-alive connections that would otherwise hold `close` open. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((err) => (err ? reject(err) : resolve()));
    server.closeAllConnections();
  });
}

/** The request body exactly as it arrived. */
export async function readRawBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const gunzipAsync = promisify(gunzip);

/**
 * The body with its `Content-Encoding` undone: the SDK gzips large CloudWatch PutMetricData
 * requests (the operation's `requestCompression` trait, above 10 KiB by default).
 */
export async function decodeBody(req: IncomingMessage, raw: Buffer): Promise<Buffer> {
  const encoding = String(req.headers['content-encoding'] ?? '').toLowerCase();
  return encoding === 'gzip' ? gunzipAsync(raw) : raw;
}

/** The request's URL, absolute, for path and query parsing. */
export function requestUrl(req: IncomingMessage): URL {
  return new URL(req.url ?? '/', `http://${req.headers.host ?? '127.0.0.1'}`);
}
