import { request } from 'node:http';
import { connect } from 'node:net';
import type { OpsStatus } from '../../shared/ops/ops-api';

/**
 * How long a socket may stay silent before a request counts as unanswered: a bound on a server
 * that never answers, not a speed. The servers here answer in milliseconds; a machine busy with
 * other work can hold a test process back for seconds.
 */
const noAnswerMs = 60_000;

/** An HTTP answer as it came off the wire. */
export interface RawAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
}

/**
 * Sends one request with exactly the method, target, headers and body given (node:http checks
 * only that they are legal HTTP), without the defaults an SDK or `fetch` adds, so a property test
 * can reach a server's parsing with what a careless client really sends.
 */
export function rawHttp(
  baseUrl: string,
  req: {
    readonly method: string;
    readonly target: string;
    readonly headers?: readonly (readonly [string, string])[];
    readonly body?: Uint8Array | string | null;
  },
): Promise<RawAnswer> {
  const url = new URL(baseUrl);
  const given = req.headers ?? [];
  const has = (wanted: string) => given.some(([name]) => name.toLowerCase() === wanted);
  const body = req.body ?? undefined;
  // A header list gets no defaults added: HTTP/1.1 requires Host (node:http answers 400 without
  // it), and without a length a GET's body would be read as a second, broken request.
  const headers = [
    ...(has('host') ? [] : [['host', url.host] as const]),
    ...(body === undefined || has('content-length')
      ? []
      : [['content-length', String(Buffer.byteLength(body))] as const]),
    ...given,
  ];
  return new Promise((resolve, reject) => {
    const outgoing = request(
      {
        host: url.hostname,
        port: url.port,
        method: req.method,
        path: req.target,
        agent: false,
        // A flat [name, value, name, value, …] list keeps repeated names and the given casing.
        headers: headers.flat() as unknown as Record<string, string>,
        timeout: noAnswerMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', reject);
      },
    );
    outgoing.on('timeout', () => outgoing.destroy(new Error(`no answer to ${req.method} ${req.target}`)));
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

/**
 * Writes raw bytes to a server's socket and returns the status of whatever HTTP answer comes
 * back (0 when the server just closes), for input that is not HTTP at all.
 */
export function rawBytes(baseUrl: string, bytes: Uint8Array): Promise<number> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    socket.setTimeout(noAnswerMs, () => socket.destroy(new Error('no answer to raw bytes')));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err: NodeJS.ErrnoException) =>
      // A server may reset a connection it refused; that is an answer too.
      err.code === 'ECONNRESET' ? resolve(statusOf(chunks)) : reject(err),
    );
    socket.on('close', () => resolve(statusOf(chunks)));
    socket.end(bytes);
  });
}

function statusOf(chunks: readonly Buffer[]): number {
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(Buffer.concat(chunks).toString('latin1'));
  return match ? Number(match[1]) : 0;
}

/**
 * Writes a request's head and `body` (not necessarily all the body it declares) and returns
 * whatever the server answers before it closes the connection. `end` finishes the request.
 */
export function sendPartially(port: number, head: string[], body: Buffer, end = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.setTimeout(noAnswerMs, () => socket.destroy(new Error('no answer')));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err: NodeJS.ErrnoException) =>
      err.code === 'ECONNRESET' || err.code === 'EPIPE'
        ? resolve(Buffer.concat(chunks).toString('utf8'))
        : reject(err),
    );
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.write(`${head.join('\r\n')}\r\n\r\n`);
    socket.write(body);
    if (end) socket.end();
  });
}

/** `GET /ops/status` as it is answered, whatever its status code or sections (a component may be down). */
export async function rawStatus(baseUrl: string): Promise<{ status: number; body: OpsStatus }> {
  const res = await rawHttp(baseUrl, { method: 'GET', target: '/ops/status' });
  return { status: res.status, body: JSON.parse(res.body) as OpsStatus };
}
