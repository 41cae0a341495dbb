import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { localCallerHeader } from '../../shared/http/caller';
import { maxJsonBodyBytes } from '../../shared/http/json-body';
import { localLambdaContext, parseRequestTarget, toProxyEvent } from '../../shared/http/proxy-event';
import {
  type ApiResource,
  createResourceMatcher,
  type ResourceMatcher,
} from '../../shared/http/resource-match';
import { retryAfterSeconds, unavailableCause } from '../../shared/http/unavailable';
import { opsApiResources } from '../../shared/ops/ops-api';
import { tasksApiRoutes } from '../../shared/tasks/tasks-api';
import { dashboardContentSecurityPolicy } from '../ops-tools/dashboard/page';
import { answerClientErrorsAsJson, BodyTooLargeError, readBody, sendAndClose } from './http-guard';
import { type ConnectionEnds, peerUid } from './peer-user';

/** An API Gateway proxy handler as the tasks and ops APIs are (middy-wrapped). */
type ProxyHandler = (
  event: APIGatewayProxyEvent,
  context: Context,
) => Promise<APIGatewayProxyResult | undefined>;

export interface HttpServerOptions {
  readonly host: string;
  readonly port: number;
  readonly tasksApi: ProxyHandler;
  readonly opsApi: ProxyHandler;
  readonly dashboardHtml: () => string;
  /**
   * `GET /ops/history`: the readings the dashboard's chart draws, kept by the runtime (local
   * only: on AWS the history is CloudWatch's). Absent: the path is a 404.
   */
  readonly history?: () => unknown;
  /**
   * Who every request comes from (`PIPELINE_CALLER`): put in `x-pipeline-caller` over whatever
   * a client sent there, as API Gateway puts the IAM principal in the request context. Locally
   * the server's user is the one caller, as the IAM principal is on AWS.
   */
  readonly caller: string;
  readonly log?: (message: string, extra?: Record<string, unknown>) => void;
  /**
   * How long a client may take to send its request headers before it is answered 408 and
   * disconnected (node:http's `headersTimeout`). @default 10 s: loopback clients send them at once.
   */
  readonly headersTimeoutMs?: number;
  /**
   * The OS user whose requests may change anything (approve, reject, withdraw, create, redrive):
   * the runtime's own. A state-changing request from a connection another user's socket holds
   * (or one whose user cannot be told) is a 403, before its body is read.
   * @default this process's uid
   */
  readonly ownerUid?: number;
  /**
   * Who holds the client end of a connection (peer-user.ts: the kernel's TCP table); a test
   * passes its own.
   */
  readonly peerUid?: (connection: ConnectionEnds) => Promise<number | undefined>;
}

/** How long a client may take to send its whole request (headers and body) before a 408. */
const requestTimeoutMs = 30_000;

/** Headers on every answer: no answer is ever sniffed into another type or leaks a referrer. */
const commonHeaders = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

/**
 * The dashboard's headers. The page carries its CSP in a meta tag too, but only a header can
 * forbid framing (`frame-ancestors` is ignored in a meta tag); `X-Frame-Options` for browsers
 * that predate it.
 */
const dashboardHeaders = {
  ...commonHeaders,
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': `${dashboardContentSecurityPolicy}; frame-ancestors 'none'`,
  'x-frame-options': 'DENY',
};

/**
 * A JSON answer's text: ended by a newline, as a terminal user of `curl` expects (the shell's
 * prompt otherwise lands on the answer's last line). JSON parsers skip the trailing whitespace.
 */
const jsonText = (body: unknown) => `${JSON.stringify(body)}\n`;

/** A handler's JSON answer ended by a newline; any other body as it is. */
function withNewline(body: string, headers: APIGatewayProxyResult['headers']): string {
  const type = Object.entries(headers ?? {}).find(([name]) => name.toLowerCase() === 'content-type')?.[1];
  const json = jsonMediaType.test(
    String(type ?? '')
      .split(';')[0]
      ?.trim()
      .toLowerCase() ?? '',
  );
  return json && body !== '' && !body.endsWith('\n') ? `${body}\n` : body;
}

const stateChanging = (method: string) => method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS';
const jsonMediaType = /^application\/(?:[\w.+-]+\+)?json$/;

/**
 * The local HTTP front door, a thin stand-in for API Gateway: a request whose path names a
 * resource of the tasks or ops API becomes the REST proxy event API Gateway would send (its
 * `resource` and `pathParameters` filled) for the same handler Lambda runs, which routes and
 * answers errors itself; `/` is the dashboard page; any other path is a JSON 404.
 *
 * It listens on loopback, which alone does not keep other web pages out: a page on any origin
 * can send a `text/plain` POST (no CORS preflight), and a DNS-rebinding page reaches it under
 * its own host name. So, before any handler runs:
 * - a `Host` other than this server's loopback names (`127.0.0.1`, `localhost`, `[::1]` with
 *   its port) is a 421: a rebound name never reaches the APIs;
 * - a state-changing request (anything but GET, HEAD and OPTIONS) from another `Origin` (a
 *   browser always sends one on a cross-origin POST; `null` included) is a 403, and one whose
 *   content type is not JSON a 415 (which no simple cross-site form or `text/plain` POST can
 *   send without a preflight);
 * - a body over the API's limit is a 413 while it is still arriving, never read whole.
 *
 * Loopback is every local OS user's too: a state-changing request whose connection is not the
 * owner's (the OS user the kernel says holds the client's socket, see peer-user.ts) is a 403,
 * so another user of the machine can read the pipeline but not change it, and what is recorded
 * as the caller is the owner, who sent it.
 */
export async function startHttpServer(options: HttpServerOptions): Promise<{ url: string; server: Server }> {
  let port = options.port;
  const integrations = integrationsOf(options);
  const headersTimeout = options.headersTimeoutMs ?? 10_000;
  const server = createServer(
    {
      headersTimeout,
      requestTimeout: Math.max(requestTimeoutMs, headersTimeout),
      // node:http checks the two timeouts only this often (30 s by default): a slow client was
      // held up to the timeout plus that before its answer.
      connectionsCheckingInterval: Math.min(1_000, headersTimeout),
    },
    (req, res) => {
      handle(req, res, options, integrations, port).catch((err) => {
        options.log?.('request failed', { error: String(err) });
        if (res.headersSent) return;
        const unavailable = unavailableCause(err);
        if (unavailable) {
          res
            .writeHead(503, {
              ...commonHeaders,
              'content-type': 'application/json',
              'retry-after': String(retryAfterSeconds),
            })
            .end(jsonText({ error: `${unavailable}; try again later` }));
        } else send(res, 500, { error: 'internal error' });
      });
    },
  );
  answerClientErrorsAsJson(server, (_status, message) => ({ error: message }));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  port = (server.address() as AddressInfo).port;
  return { url: `http://${options.host}:${port}`, server };
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  options: HttpServerOptions,
  integrations: readonly Integration[],
  port: number,
): Promise<void> {
  const target = req.url ?? '/';
  const method = (req.method ?? 'GET').toUpperCase();
  const own = new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
  const host = String(req.headers.host ?? '').toLowerCase();
  if (!own.has(host)) {
    return refuse(res, 421, `this server answers only for ${[...own].join(', ')}, not for host "${host}"`);
  }
  try {
    // What a URL parser refuses (`//[`) is no request for any route.
    new URL(target, 'http://localhost');
  } catch {
    return refuse(res, 400, 'the request target is not a valid URL');
  }
  // The same reading of the target as the proxy event's: `//x/tasks` is a path, not host x.
  const url = parseRequestTarget(target);
  const api = integrations.find((i) => i.match(url.pathname) !== undefined);

  if (stateChanging(method)) {
    const refusal = await notTheOwner(req, options);
    if (refusal) return refuse(res, 403, refusal);
    const origin = req.headers.origin;
    if (origin !== undefined && !own.has(originAuthority(origin))) {
      return refuse(res, 403, `cross-origin request from ${origin} refused`);
    }
    const mediaType = String(req.headers['content-type'] ?? '')
      .split(';')[0]
      ?.trim()
      .toLowerCase();
    if (api && !jsonMediaType.test(mediaType ?? '')) {
      return refuse(
        res,
        415,
        `content-type must be application/json, got ${req.headers['content-type'] ?? 'none'}`,
      );
    }
  }

  let raw: Buffer;
  try {
    raw = await readBody(req, maxJsonBodyBytes);
  } catch (err) {
    if (!(err instanceof BodyTooLargeError)) throw err;
    sendAndClose(
      res,
      413,
      { ...commonHeaders, 'content-type': 'application/json' },
      jsonText({ error: err.message, maxBytes: err.maxBytes }),
    );
    return;
  }

  if (api) {
    // HEAD is GET without the body (node:http leaves the body out of a HEAD answer itself).
    const event = toProxyEvent(
      {
        method: method === 'HEAD' ? 'GET' : method,
        url: target,
        // Any header of that name the client sent is replaced, never passed on. Each value of a
        // repeated header apart (`headersDistinct`; `headers` joins most with ", "), as API
        // Gateway's multiValueHeaders has them: a route refuses a header it reads sent twice.
        headers: {
          ...Object.fromEntries(
            Object.entries(req.headersDistinct).filter(([name]) => name.toLowerCase() !== localCallerHeader),
          ),
          [localCallerHeader]: options.caller,
        },
        body: raw.length > 0 ? raw : null,
      },
      api.routes,
    );
    const result = (await api.handler(
      event,
      localLambdaContext(api.name) as Context,
    )) as APIGatewayProxyResult;
    // The Lambda handlers answer as they do on AWS; the local front door adds the newline.
    const body = result.isBase64Encoded
      ? Buffer.from(result.body, 'base64')
      : withNewline(result.body, result.headers);
    res
      .writeHead(result.statusCode, { ...commonHeaders, ...(result.headers as Record<string, string>) })
      .end(body);
    return;
  }
  if (url.pathname === '/' || url.pathname === '/index.html') {
    if (method !== 'GET' && method !== 'HEAD') {
      res.writeHead(405, { ...commonHeaders, 'content-type': 'application/json', allow: 'GET, HEAD' });
      res.end(jsonText({ error: `method ${method} not allowed on ${url.pathname}`, allow: ['GET', 'HEAD'] }));
      return;
    }
    res.writeHead(200, dashboardHeaders).end(options.dashboardHtml());
    return;
  }
  if (url.pathname === historyPath && options.history) {
    if (method !== 'GET' && method !== 'HEAD') {
      res.writeHead(405, { ...commonHeaders, 'content-type': 'application/json', allow: 'GET, HEAD' });
      res.end(
        JSON.stringify({ error: `method ${method} not allowed on ${url.pathname}`, allow: ['GET', 'HEAD'] }),
      );
      return;
    }
    send(res, 200, options.history());
    return;
  }
  send(res, 404, { error: `no route for ${method} ${url.pathname}` });
}

/** The socket's owner, once per connection: a keep-alive connection is held by one socket all along. */
const connectionOwners = new WeakMap<object, Promise<number | undefined>>();

/** Why `req` may not change anything (its connection is not the owner's), or undefined when it may. */
async function notTheOwner(req: IncomingMessage, options: HttpServerOptions): Promise<string | undefined> {
  const owner = options.ownerUid ?? process.getuid?.();
  const socket = req.socket;
  let uid = connectionOwners.get(socket);
  if (uid === undefined) {
    uid = (options.peerUid ?? peerUid)(socket);
    connectionOwners.set(socket, uid);
  }
  const peer = await uid;
  if (owner !== undefined && peer === owner) return undefined;
  if (peer === undefined) {
    return `only the OS user running the pipeline (uid ${owner}) may change it, and this server cannot tell which user sent this request (it reads /proc/net/tcp, Linux only)`;
  }
  return `only the OS user running the pipeline (uid ${owner}) may change it; this request came from uid ${peer}`;
}

/** Where the local server answers the dashboard chart's history. */
export const historyPath = '/ops/history';

/** A proxy integration of the local REST API: its function and the resources routed to it. */
interface Integration {
  readonly name: string;
  readonly handler: ProxyHandler;
  readonly routes: readonly ApiResource[];
  readonly match: ResourceMatcher;
}

/**
 * The local REST API's integrations, with the same resource tables the CDK builds the API
 * Gateway resources from. A request goes to the one whose resources include the one its path
 * names, whatever the method (the API answers a wrong method with 405), as API Gateway picks a
 * resource before its method.
 */
function integrationsOf(options: HttpServerOptions): readonly Integration[] {
  return [
    { name: 'tasks-api', handler: options.tasksApi, routes: tasksApiRoutes },
    { name: 'ops-api', handler: options.opsApi, routes: opsApiResources },
  ].map((i) => ({ ...i, match: createResourceMatcher(i.routes) }));
}

/** `host:port` of an Origin header (`http://localhost:3000` → `localhost:3000`); '' when it has none. */
function originAuthority(origin: string): string {
  try {
    const url = new URL(origin);
    if (url.protocol !== 'http:') return '';
    return `${url.hostname}:${url.port || '80'}`.toLowerCase();
  } catch {
    // `null` (a sandboxed frame, a file: page) and anything else that is no URL.
    return '';
  }
}

function refuse(res: ServerResponse, status: number, error: string): void {
  // The body was not read: answer and close, so the connection carries nothing more.
  sendAndClose(res, status, { ...commonHeaders, 'content-type': 'application/json' }, jsonText({ error }));
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { ...commonHeaders, 'content-type': 'application/json' }).end(jsonText(body));
}
