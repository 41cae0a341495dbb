import type { APIGatewayProxyEvent } from 'aws-lambda';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startHttpServer } from '../../infra/local/http-server';
import { localHeaderCaller } from '../../shared/http/caller';
import { jsonResponse } from '../../shared/http/responses';
import { rawHttp, sendPartially } from '../support/raw-http';

// What the local server refuses before any handler runs: foreign hosts (DNS rebinding),
// cross-origin and non-JSON writes (cross-site requests), bodies over the limit (while they
// arrive), and what node:http itself rejects, each with a JSON body.

describe('the local HTTP server refuses what a browser attack or a bad client sends', () => {
  let server: Awaited<ReturnType<typeof startHttpServer>>;
  let base: string;
  let port: number;
  const calls: APIGatewayProxyEvent[] = [];

  beforeAll(async () => {
    const record = async (event: APIGatewayProxyEvent) => {
      calls.push(event);
      return jsonResponse(200, { ok: true, method: event.httpMethod });
    };
    server = await startHttpServer({
      host: '127.0.0.1',
      port: 0,
      tasksApi: record,
      opsApi: record,
      dashboardHtml: () => '<!doctype html><title>dashboard</title>',
      caller: 'local:configured',
    });
    base = server.url;
    port = Number(new URL(base).port);
  });
  afterAll(async () => {
    await new Promise((resolve) => server.server.close(resolve));
  });
  beforeEach(() => {
    calls.length = 0;
  });

  const json = (body: unknown) => ({
    headers: [['content-type', 'application/json']] as [string, string][],
    body: JSON.stringify(body),
  });

  it.each(['evil.example', `evil.example:${0}`, '127.0.0.1', 'localhost:1', '127.0.0.2:PORT'])(
    'answers 421 with a JSON error for Host %s, and never runs a handler',
    async (host) => {
      const r = await rawHttp(base, {
        method: 'GET',
        target: '/ops/status',
        headers: [['host', host.replace('PORT', String(port))]],
      });
      expect(r.status).toBe(421);
      expect(JSON.parse(r.body).error).toMatch(
        /answers only for 127\.0\.0\.1:\d+, localhost:\d+, \[::1\]:\d+/,
      );
      expect(calls).toHaveLength(0);
    },
  );

  it.each(['127.0.0.1', 'localhost', 'LOCALHOST', '[::1]'])('serves Host %s with its port', async (name) => {
    const r = await rawHttp(base, {
      method: 'GET',
      target: '/ops/status',
      headers: [['host', `${name}:${port}`]],
    });
    expect(r.status).toBe(200);
  });

  it.each([
    ['http://evil.example', 403],
    ['null', 403],
    [`http://127.0.0.1:${1}`, 403],
    ['file://', 403],
  ])('refuses a state-changing request from Origin %s (%i), running nothing', async (origin, status) => {
    const { headers, body } = json({ all: true });
    const r = await rawHttp(base, {
      method: 'POST',
      target: '/ops/outbox/dead/redrive',
      headers: [...headers, ['origin', origin]],
      body,
    });
    expect(r.status).toBe(status);
    expect(JSON.parse(r.body).error).toContain('cross-origin request');
    expect(calls).toHaveLength(0);
  });

  it('serves a write from its own origin, or from no browser at all (no Origin)', async () => {
    const { headers, body } = json({});
    for (const origin of [`http://localhost:${port}`, `http://127.0.0.1:${port}`, undefined]) {
      const r = await rawHttp(base, {
        method: 'POST',
        target: '/tasks/x/approve',
        headers: [...headers, ...(origin ? [['origin', origin] as [string, string]] : [])],
        body,
      });
      expect(r.status).toBe(200);
    }
    expect(calls).toHaveLength(3);
  });

  it('tells the API the configured caller, whatever a client writes in that header', async () => {
    // Before, the reviewer was whatever the body said; now only the server names the caller.
    const { headers, body } = json({});
    const r = await rawHttp(base, {
      method: 'POST',
      target: '/tasks/x/approve',
      headers: [...headers, ['x-pipeline-caller', 'mallory'], ['X-Pipeline-Caller', 'mallory']],
      body,
    });
    expect(r.status).toBe(200);
    expect(calls).toHaveLength(1);
    expect(localHeaderCaller(calls[0] as APIGatewayProxyEvent)).toBe('local:configured');
    expect(JSON.stringify(calls[0]?.headers)).not.toContain('mallory');
    expect(JSON.stringify(calls[0]?.multiValueHeaders)).not.toContain('mallory');
  });

  it.each([
    ['text/plain', 415],
    ['application/x-www-form-urlencoded', 415],
    ['multipart/form-data; boundary=x', 415],
    [undefined, 415],
  ])(
    'refuses a write sent as %s (what a cross-site form or simple request can send)',
    async (type, status) => {
      const r = await rawHttp(base, {
        method: 'POST',
        target: '/ops/dead-letters/redrive',
        headers: type ? [['content-type', type]] : [],
        body: '{"all":true}',
      });
      expect(r.status).toBe(status);
      expect(JSON.parse(r.body).error).toMatch(/content-type must be application\/json/);
      expect(calls).toHaveLength(0);
    },
  );

  it('hands each API the proxy event API Gateway would: its resource and decoded path parameters', async () => {
    const { headers, body } = json({ all: true });
    await rawHttp(base, { method: 'POST', target: '/ops/inbox/index/dead/redrive/', headers, body });
    await rawHttp(base, { method: 'GET', target: '/tasks/a%20b?x=1' });
    await rawHttp(base, { method: 'GET', target: '/ops/status' });
    expect(
      calls.map((c) => ({ path: c.path, resource: c.resource, pathParameters: c.pathParameters })),
    ).toEqual([
      {
        path: '/ops/inbox/index/dead/redrive/',
        resource: '/ops/inbox/{consumer}/dead/redrive',
        pathParameters: { consumer: 'index' },
      },
      { path: '/tasks/a%20b', resource: '/tasks/{taskId}', pathParameters: { taskId: 'a b' } },
      { path: '/ops/status', resource: '/ops/status', pathParameters: null },
    ]);
  });

  it('answers a path no API resource names itself, with a JSON 404, running nothing', async () => {
    const r = await rawHttp(base, { method: 'GET', target: '/tasks/x/publish' });
    expect(r.status).toBe(404);
    expect(JSON.parse(r.body).error).toContain('/tasks/x/publish');
    expect(calls).toHaveLength(0);
  });

  it('sends the dashboard with headers that forbid framing and sniffing', async () => {
    const r = await rawHttp(base, { method: 'GET', target: '/' });
    expect(r.status).toBe(200);
    expect(r.headers['content-security-policy']).toMatch(/frame-ancestors 'none'/);
    expect(r.headers['content-security-policy']).toMatch(/default-src 'none'/);
    expect(r.headers['x-frame-options']).toBe('DENY');
    expect(r.headers['x-content-type-options']).toBe('nosniff');
    expect(r.headers['referrer-policy']).toBe('no-referrer');
  });

  it('HEAD works where GET does; other methods on the page get 405 with Allow', async () => {
    const page = await rawHttp(base, { method: 'HEAD', target: '/' });
    expect(page.status).toBe(200);
    expect(page.body).toBe('');
    const api = await rawHttp(base, { method: 'HEAD', target: '/ops/status' });
    expect(api.status).toBe(200);
    expect(api.body).toBe('');
    expect(calls.map((c) => c.httpMethod)).toEqual(['GET']);
    const post = await rawHttp(base, { method: 'DELETE', target: '/' });
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe('GET, HEAD');
    expect(JSON.parse(post.body).error).toMatch(/not allowed/);
  });

  it('answers 400 for a target no URL parser reads, and never serves the page for //a:b@c', async () => {
    const bad = await rawHttp(base, { method: 'GET', target: '//[' });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body).error).toMatch(/not a valid URL/);
    const userinfo = await rawHttp(base, { method: 'GET', target: '//a:b@c' });
    expect([400, 404]).toContain(userinfo.status);
    expect(userinfo.body).not.toContain('<title>dashboard');
  });

  it('refuses a body over the limit as it arrives: a declared 128 MB body is answered after 1 KB of it', async () => {
    const answer = await sendPartially(
      port,
      [
        'POST /tasks HTTP/1.1',
        `Host: 127.0.0.1:${port}`,
        'Content-Type: application/json',
        `Content-Length: ${128 * 1024 * 1024}`,
      ],
      Buffer.alloc(1024, 0x20),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ maxBytes: 64 * 1024 });
    expect(calls).toHaveLength(0);
  });

  it('refuses a chunked body once it passes the limit, before the client has sent the rest', async () => {
    const chunk = Buffer.alloc(16 * 1024, 0x20);
    const chunked = Buffer.concat(
      Array.from({ length: 5 }, () =>
        Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]),
      ),
    );
    const answer = await sendPartially(
      port,
      [
        'POST /ops/outbox/dead/redrive HTTP/1.1',
        `Host: 127.0.0.1:${port}`,
        'Content-Type: application/json',
        'Transfer-Encoding: chunked',
      ],
      chunked,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(calls).toHaveLength(0);
  });

  it('gives node:http’s own 400 and 431 answers JSON bodies', async () => {
    const malformed = await sendPartially(
      port,
      ['GET / HTTP/1.1', 'Host: x', 'Bad Header Line'],
      Buffer.alloc(0),
      true,
    );
    expect(malformed).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(malformed.slice(malformed.indexOf('\r\n\r\n') + 4)).error).toMatch(
      /malformed HTTP request/,
    );
    const huge = await sendPartially(
      port,
      ['GET / HTTP/1.1', `Host: 127.0.0.1:${port}`, `X-Big: ${'a'.repeat(20 * 1024)}`],
      Buffer.alloc(0),
      true,
    );
    expect(huge).toMatch(/^HTTP\/1\.1 431 /);
    expect(JSON.parse(huge.slice(huge.indexOf('\r\n\r\n') + 4)).error).toMatch(/too large/);
  });
});
