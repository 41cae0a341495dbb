import { Agent, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { type CallRecorder, callerOf, type DescribedCall } from './calls';
import { closeServer, type LocalEndpoint, listenOnLoopback, readRawBody, requestUrl } from './http';

/** A request as the proxy received it, body read in full (describers need it). */
export interface ProxiedRequest {
  readonly method: string;
  /** Absolute URL on the proxy: path and query exactly as the client sent them. */
  readonly url: URL;
  readonly headers: IncomingHttpHeaders;
  /** The body bytes as received (still gzipped if the client gzipped them). */
  readonly body: Buffer;
  /** The SigV4 access key id, or `anonymous`. */
  readonly caller: string;
}

/** An answer given by an intercept, or a backend answer read in full. */
export interface ProxyReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[]>>;
  readonly body: Buffer;
}

/** Says which IAM actions on which resources one request needs; `[]` records nothing. */
export type RequestDescriber = (request: ProxiedRequest, recorder: CallRecorder) => readonly DescribedCall[];

/** What an intercept may use besides the request. */
export interface InterceptContext {
  /** The backend's base URL, for side requests (the S3 proxy HEADs the object first). */
  readonly backend: URL;
  /** Sends this very request to the backend and returns its answer, read in full. */
  forward(): Promise<ProxyReply>;
}

/**
 * Answers a request itself (an AWS behaviour the backend lacks) by returning a reply, possibly
 * one it got through `context.forward()`; returning undefined lets the proxy forward as usual.
 */
export type ProxyIntercept = (
  request: ProxiedRequest,
  context: InterceptContext,
) => Promise<ProxyReply | undefined>;

/** How one recording proxy is set up. */
export interface RecordingProxyOptions {
  /** The name calls are recorded under (`dynamodb`, `s3`, `events`, `rds-data`). */
  readonly service: string;
  /** The engine the proxy forwards to, e.g. dynalite's `http://127.0.0.1:<port>`. */
  readonly backend: string;
  readonly recorder: CallRecorder;
  readonly describe: RequestDescriber;
  readonly intercept?: ProxyIntercept;
  /**
   * Drops the `Authorization` header on the way to the backend, for backends that refuse access
   * key ids they do not know (s3rver answers `InvalidAccessKeyId` for anything but `S3RVER`)
   * while never checking a SigV4 signature anyway. Everything else is forwarded as received.
   * @default false
   */
  readonly stripAuthorization?: boolean;
}

/** A running proxy: point the SDK at `endpoint`; `backend` is where requests go on. */
export interface RecordingProxy extends LocalEndpoint {
  readonly backend: string;
}

/** Raw header pairs (original case and order), without `authorization` when asked to. */
function forwardedHeaders(req: IncomingMessage, stripAuthorization: boolean): string[] {
  const raw = req.rawHeaders;
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    if (stripAuthorization && name.toLowerCase() === 'authorization') continue;
    out.push(name, raw[i + 1] as string);
  }
  return out;
}

/**
 * Starts a reverse proxy on 127.0.0.1 in front of `backend`: each request is described and
 * recorded under its SigV4 caller, then forwarded with the same method, path, query, headers
 * and body bytes, and the backend's status, headers and body are passed back unchanged. A
 * request is recorded before it is forwarded or intercepted, so a refused call still shows.
 */
export async function startRecordingProxy(options: RecordingProxyOptions): Promise<RecordingProxy> {
  const backend = new URL(options.backend);
  const agent = new Agent({ keepAlive: true });
  const stripAuthorization = options.stripAuthorization ?? false;

  const open = (req: IncomingMessage, body: Buffer): Promise<IncomingMessage> =>
    new Promise((resolve, reject) => {
      const out = httpRequest(
        {
          agent,
          protocol: backend.protocol,
          hostname: backend.hostname,
          port: backend.port,
          method: req.method,
          path: req.url,
          headers: forwardedHeaders(req, stripAuthorization),
        },
        resolve,
      );
      out.once('error', reject);
      out.end(body);
    });

  const { server, endpoint } = await listenOnLoopback(async (req, res) => {
    const body = await readRawBody(req);
    const url = requestUrl(req);
    const request: ProxiedRequest = {
      method: req.method ?? 'GET',
      url,
      headers: req.headers,
      body,
      caller: callerOf(req.headers, url),
    };
    options.recorder.record(request.caller, options.service, options.describe(request, options.recorder));

    const forward = async (): Promise<ProxyReply> => {
      const answer = await open(req, body);
      const chunks = await readRawBody(answer);
      return {
        status: answer.statusCode ?? 502,
        headers: answer.headers as ProxyReply['headers'],
        body: chunks,
      };
    };
    const intercepted = options.intercept
      ? await options.intercept(request, { backend, forward })
      : undefined;
    if (intercepted) {
      res.writeHead(intercepted.status, { ...intercepted.headers });
      res.end(intercepted.body);
      return;
    }
    let answer: IncomingMessage;
    try {
      answer = await open(req, body);
    } catch (err) {
      // The backend is down or refused the connection: a 502 the SDK surfaces (and may retry).
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`recording proxy: backend ${backend.origin} failed: ${String(err)}`);
      return;
    }
    res.writeHead(answer.statusCode ?? 502, answer.statusMessage, answer.rawHeaders);
    answer.pipe(res);
  });

  return {
    endpoint,
    backend: backend.origin,
    async close() {
      await closeServer(server);
      agent.destroy();
    },
  };
}
