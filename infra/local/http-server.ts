import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { localLambdaContext, parseRequestTarget, toProxyEvent } from '../../shared/http/proxy-event';

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
  readonly log?: (message: string, extra?: Record<string, unknown>) => void;
}

/**
 * The local HTTP front door: `/tasks…` and `/ops/…` become API Gateway REST proxy events for
 * the same tasks and ops handlers Lambda runs; `/` is the dashboard page.
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
  // The same reading of the target as the proxy event's: `//x/tasks` is a path, not host x.
  const url = parseRequestTarget(req.url ?? '/');
  const method = (req.method ?? 'GET').toUpperCase();
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);

  const api =
    url.pathname === '/tasks' || url.pathname.startsWith('/tasks/')
      ? { handler: options.tasksApi, name: 'tasks-api' }
      : url.pathname.startsWith('/ops/')
        ? { handler: options.opsApi, name: 'ops-api' }
        : undefined;
  if (api) {
    const event = toProxyEvent({
      method,
      url: req.url ?? '/',
      headers: req.headers,
      body: raw.length > 0 ? raw : null,
    });
    const result = (await api.handler(
      event,
      localLambdaContext(api.name) as Context,
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
  send(res, 404, { error: `no route for ${method} ${url.pathname}` });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res
    .writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' })
    .end(JSON.stringify(body));
}
