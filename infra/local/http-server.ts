import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { APIGatewayProxyResult, Context } from 'aws-lambda';
import { localLambdaContext, toProxyEvent } from '../../shared/http/proxy-event';
import type { TasksApi } from '../../shared/tasks/tasks-api';

/** A route of the ops API: returns a JSON-able value, or throws an OpsError for a 4xx. */
export type OpsRoute = (match: RegExpExecArray, body: unknown, url: URL) => Promise<unknown>;

export class OpsError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface HttpServerOptions {
  readonly host: string;
  readonly port: number;
  readonly tasksApi: TasksApi;
  readonly ops: readonly { method: string; path: RegExp; route: OpsRoute }[];
  readonly dashboardHtml: () => string;
  readonly log?: (message: string, extra?: Record<string, unknown>) => void;
}

const maxOpsBody = 64 * 1024;

/**
 * The local HTTP front door: `/tasks…` become API Gateway REST proxy events for the same tasks
 * handler Lambda runs; `/ops/…` is the ops API the dashboard and the CLI read; `/` is the
 * dashboard page.
 */
export async function startHttpServer(options: HttpServerOptions): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    handle(req, res, options).catch((err) => {
      options.log?.('ops request failed', { error: String(err) });
      if (!res.headersSent) send(res, 500, { error: 'internal error' });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return { url: `http://${options.host}:${port}`, server };
}

async function handle(req: IncomingMessage, res: ServerResponse, options: HttpServerOptions): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const method = (req.method ?? 'GET').toUpperCase();
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);

  if (url.pathname === '/tasks' || url.pathname.startsWith('/tasks/')) {
    const event = toProxyEvent({
      method,
      url: req.url ?? '/',
      headers: req.headers,
      body: raw.length > 0 ? raw : null,
    });
    const result = (await options.tasksApi(
      event,
      localLambdaContext('tasks-api') as Context,
    )) as APIGatewayProxyResult;
    const body = result.isBase64Encoded ? Buffer.from(result.body, 'base64') : result.body;
    res.writeHead(result.statusCode, { ...(result.headers as Record<string, string>) }).end(body);
    return;
  }
  if (method === 'GET' && (url.pathname === '/' || url.pathname === '/index.html')) {
    res
      .writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' })
      .end(options.dashboardHtml());
    return;
  }
  for (const op of options.ops) {
    const match = op.path.exec(url.pathname);
    if (!match) continue;
    if (op.method !== method)
      return send(res, 405, { error: `method ${method} not allowed on ${url.pathname}` });
    if (raw.length > maxOpsBody) return send(res, 413, { error: 'body over 64 KB' });
    let body: unknown;
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        return send(res, 400, { error: 'body is not valid JSON' });
      }
    }
    try {
      return send(res, 200, await op.route(match, body, url));
    } catch (err) {
      if (err instanceof OpsError) return send(res, err.status, { error: err.message });
      throw err;
    }
  }
  send(res, 404, { error: `no route for ${method} ${url.pathname}` });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res
    .writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' })
    .end(JSON.stringify(body));
}
