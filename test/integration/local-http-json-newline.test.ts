import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpServer } from '../../infra/local/http-server';
import { maxJsonBodyBytes } from '../../shared/http/json-body';
import { jsonResponse } from '../../shared/http/responses';
import { rawHttp } from '../support/raw-http';

// Every JSON answer of the local server ends with a newline, so `curl` in a terminal leaves the
// prompt on a line of its own: the APIs' answers (the handlers' own bodies, unchanged on AWS)
// and every answer the server writes itself.

describe('JSON answers of the local HTTP server', () => {
  let server: Awaited<ReturnType<typeof startHttpServer>>;
  let base: string;

  beforeAll(async () => {
    const api = async () => jsonResponse(200, { ok: true });
    server = await startHttpServer({
      host: '127.0.0.1',
      port: 0,
      tasksApi: api,
      opsApi: api,
      dashboardHtml: () => '<!doctype html><title>dashboard</title>',
      caller: 'local:tester',
    });
    base = server.url;
  });
  afterAll(async () => {
    server.server.closeAllConnections();
    await new Promise((resolve) => server.server.close(resolve));
  });

  const host = () => new URL(base).host;
  const json = [['content-type', 'application/json']] as [string, string][];

  it.each([
    ['an API answer', 'GET', '/ops/status', [] as [string, string][], undefined, 200],
    ['no such route', 'GET', '/nowhere', [], undefined, 404],
    [
      'a foreign host',
      'GET',
      '/ops/status',
      [['host', 'evil.example']] as [string, string][],
      undefined,
      421,
    ],
    ['a cross-origin write', 'POST', '/tasks', [...json, ['origin', 'http://evil.example']], '{}', 403],
    ['a write that is not JSON', 'POST', '/tasks', [['content-type', 'text/plain']], '{}', 415],
    ['a body over the limit', 'POST', '/tasks', json, 'x'.repeat(maxJsonBodyBytes + 1), 413],
    ['a write to the dashboard', 'POST', '/', json, '{}', 405],
  ])('%s: %s %s answers %i, JSON ended by a newline', async (_, method, target, headers, body, status) => {
    const given = headers as [string, string][];
    const r = await rawHttp(base, {
      method,
      target,
      headers: given.some(([n]) => n === 'host') ? given : [['host', host()], ...given],
      body,
    });

    expect(r.status).toBe(status);
    expect(String(r.headers['content-type'])).toMatch(/^application\/json/);
    expect(r.body.endsWith('}\n')).toBe(true);
    expect(() => JSON.parse(r.body)).not.toThrow();
  });

  it("node:http's own 400 for a malformed request carries a JSON body ended by a newline", async () => {
    const answers: string[] = [];
    const { connect } = await import('node:net');
    const socket = connect(Number(new URL(base).port), '127.0.0.1');
    socket.on('data', (c) => answers.push(String(c)));
    await new Promise<void>((resolve) => {
      socket.on('close', () => resolve());
      socket.write('NOT HTTP AT ALL\r\n\r\n');
    });

    const text = answers.join('');
    expect(text).toMatch(/^HTTP\/1\.1 400/);
    expect(text.endsWith('}\n')).toBe(true);
  });
});
