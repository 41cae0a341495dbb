import { createServer, type Socket, connect as tcpConnect } from 'node:net';
import type { APIGatewayProxyEvent } from 'aws-lambda';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startHttpServer } from '../../infra/local/http-server';
import { peerUid } from '../../infra/local/peer-user';
import { localCallerHeader } from '../../shared/http/caller';
import { jsonResponse } from '../../shared/http/responses';
import { rawHttp } from '../support/raw-http';

// Loopback is every local OS user's: the local server takes a state-changing request only from
// a connection the pipeline's own OS user holds (the kernel's TCP table says whose). Before, any
// local user approved and redrove, recorded under the runtime's own user.

const me = process.getuid?.() ?? -1;

describe('the local HTTP server changes nothing for another OS user', () => {
  let server: Awaited<ReturnType<typeof startHttpServer>>;
  let base: string;
  const calls: APIGatewayProxyEvent[] = [];
  /** The uid the server is told holds the next connections (as another user's socket would be). */
  let peer: number | undefined = me;

  beforeAll(async () => {
    const record = async (event: APIGatewayProxyEvent) => {
      calls.push(event);
      return jsonResponse(200, { ok: true });
    };
    server = await startHttpServer({
      host: '127.0.0.1',
      port: 0,
      tasksApi: record,
      opsApi: record,
      dashboardHtml: () => '<!doctype html><title>dashboard</title>',
      caller: 'local:owner',
      ownerUid: me,
      peerUid: async () => peer,
    });
    base = server.url;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.server.close(resolve));
  });
  beforeEach(() => {
    calls.length = 0;
    peer = me;
  });

  const write = (target: string) =>
    rawHttp(base, {
      method: 'POST',
      target,
      headers: [['content-type', 'application/json']],
      body: '{}',
    });

  it.each(['/tasks', '/tasks/6f1f7c5e-8a8e-4a43-9a55-7d3b8f7e2a01/approve', '/ops/outbox/dead/redrive'])(
    'refuses POST %s from another uid with a 403 naming both users, running nothing',
    async (target) => {
      peer = 65534;
      const r = await write(target);
      expect(r.status).toBe(403);
      expect(JSON.parse(r.body).error).toBe(
        `only the OS user running the pipeline (uid ${me}) may change it; this request came from uid 65534`,
      );
      expect(calls).toHaveLength(0);
    },
  );

  it('refuses a write whose user cannot be told', async () => {
    peer = undefined;
    const r = await write('/tasks');
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body).error).toContain('cannot tell which user sent this request');
    expect(calls).toHaveLength(0);
  });

  it("serves the owner's write, as the owner", async () => {
    const r = await write('/tasks');
    expect(r.status).toBe(200);
    expect(calls[0]?.headers[localCallerHeader]).toBe('local:owner');
  });

  it("serves another user's reads", async () => {
    peer = 65534;
    const r = await rawHttp(base, { method: 'GET', target: '/ops/status' });
    expect(r.status).toBe(200);
  });
});

describe("the kernel's TCP table names the user of a loopback connection", () => {
  it('finds this process as the client of a connection it made to itself (IPv4 and IPv6)', async () => {
    if (process.platform !== 'linux') {
      console.warn(`[peer-user] skipped: ${process.platform} has no /proc/net/tcp`);
      return;
    }
    for (const host of ['127.0.0.1', '::1']) {
      const server = createServer();
      const accepted = new Promise<Socket>((ok) => server.once('connection', ok));
      await new Promise<void>((ok) => server.listen(0, host, ok));
      const client = tcpConnect((server.address() as { port: number }).port, host);
      client.on('error', () => {});
      try {
        expect(await peerUid(await accepted)).toBe(me);
      } finally {
        client.destroy();
        server.close();
      }
    }
  });

  it('reads the tables as the kernel prints them, and skips TIME_WAIT lines (uid 0 there)', async () => {
    const header =
      '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n';
    const tcp =
      header +
      // 127.0.0.1:40000 -> 127.0.0.1:3000, TIME_WAIT, then ESTABLISHED as uid 1000
      '   0: 0100007F:9C40 0100007F:0BB8 06 00000000:00000000 03:00000000 00000000     0        0 0 3\n' +
      '   1: 0100007F:9C40 0100007F:0BB8 01 00000000:00000000 00:00000000 00000000  1000        0 11 1\n' +
      // the server's own socket of that connection, as the runtime's user
      '   2: 0100007F:0BB8 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 12 1\n';
    const read = async (name: 'tcp' | 'tcp6') => (name === 'tcp' ? tcp : header);
    const ends = {
      localAddress: '127.0.0.1',
      localPort: 3000,
      remoteAddress: '127.0.0.1',
      remotePort: 40000,
    };
    expect(await peerUid(ends, read)).toBe(1000);
    expect(await peerUid({ ...ends, remotePort: 40001 }, read)).toBeUndefined();
  });
});
