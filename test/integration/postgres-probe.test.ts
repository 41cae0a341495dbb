import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/local/ports';
import { probePostgres } from '../../infra/local/postgres-probe';
import { createTestDatabase, type TestDatabase } from '../support/database';

// One probe against what a server really does: answer, take the connection and say nothing (as
// a stopped postmaster's listen backlog does), or refuse it.
describe('a probe of PostgreSQL', () => {
  let database: TestDatabase;
  let silent: Server;
  let silentPort: number;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: false });
    silent = createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    silentPort = (silent.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
    await database.drop();
  });

  it('finds nothing wrong with a server that answers', async () => {
    // A bound on a hang only: a loopback SELECT 1 takes milliseconds.
    expect(await probePostgres(database.url, 60_000)).toBeUndefined();
  });

  it('says a server that takes the connection and never answers did not answer within its deadline', async () => {
    const found = await probePostgres(`postgres://nobody:secret@127.0.0.1:${silentPort}/none`, 500);

    expect(found).toBe(
      'did not answer SELECT 1 on a new connection within 0.5 s (no session started: the postmaster did not take the connection)',
    );
    expect(sockets.length).toBeGreaterThan(0);
  });

  it('says why a server refused the connection', async () => {
    const port = await freePort();

    const found = await probePostgres(`postgres://nobody:secret@127.0.0.1:${port}/none`, 60_000);

    expect(found).toMatch(/^refused a new connection: connect ECONNREFUSED 127\.0\.0\.1:\d+$/);
  });
});
