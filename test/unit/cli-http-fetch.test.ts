import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/local/ports';
import { CliError, nodeHttpFetch, OpsClient } from '../../infra/ops-tools/cli/cli-client';

// The CLI's fetch on node:http (global fetch costs a second of undici loading on Node 20): what
// the OpsClient needs of it against a real socket, answers, failures and a silent server.

let server: Server;
let base: string;
const received: { method: string; url: string; type: string; length: string; body: string }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      received.push({
        method: req.method ?? '',
        url: req.url ?? '',
        type: String(req.headers['content-type']),
        length: String(req.headers['content-length']),
        body,
      });
      if (req.url === '/silent') return; // never answers
      if (req.url === '/busy') {
        res
          .writeHead(429, { 'retry-after': '7', 'content-type': 'application/json' })
          .end('{"error":"slow down"}');
        return;
      }
      res.writeHead(201, { 'content-type': 'application/json' }).end('{"taskId":"t-1"}\n');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('nodeHttpFetch', () => {
  it('sends the method, headers and body, and gives back status, headers and text', async () => {
    const client = new OpsClient(base, nodeHttpFetch);

    const created = await client.post<{ taskId: string }>('/tasks', { title: 'née' });

    expect(created).toEqual({ taskId: 't-1' });
    expect(received.at(-1)).toEqual({
      method: 'POST',
      url: '/tasks',
      type: 'application/json',
      length: String(Buffer.byteLength('{"title":"née"}')),
      body: '{"title":"née"}',
    });
  });

  it("reads a header and an error answer's body", async () => {
    const answer = await nodeHttpFetch(`${base}/busy`);

    expect(answer.status).toBe(429);
    expect(answer.ok).toBe(false);
    expect(answer.headers.get('Retry-After')).toBe('7');
    expect(await answer.text()).toBe('{"error":"slow down"}');
  });

  it('a server that never answers ends in the timeout message', async () => {
    const client = new OpsClient(base, nodeHttpFetch, { timeoutMs: 300, attempts: 1 });

    const failed = await client.get('/silent').catch((e: unknown) => e);

    expect(failed).toBeInstanceOf(CliError);
    expect((failed as CliError).message).toBe(`GET ${base}/silent: no answer within 0.3 s`);
  });

  it('nothing listening is ECONNREFUSED, with the hint to start the pipeline', async () => {
    const port = await freePort();
    const client = new OpsClient(`http://127.0.0.1:${port}`, nodeHttpFetch, { attempts: 1 });

    const failed = await client.get('/ops/status').catch((e: unknown) => e);

    expect((failed as CliError).message).toBe(
      `cannot reach the pipeline at http://127.0.0.1:${port} (ECONNREFUSED): is \`npm start\` running? (or pass --url)`,
    );
  });
});
