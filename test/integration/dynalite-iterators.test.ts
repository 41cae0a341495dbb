import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { closeIteratorsOnReturn } from '../../infra/local/dynalite-iterators.mjs';
import { ensureTables } from '../../shared/consumers/ensure-tables';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';

// dynalite in this thread (the runtime runs it in a worker, which applies the same fix), so
// the test can count the iterators its LevelDB holds open.
const fromDynalite = createRequire(createRequire(import.meta.url).resolve('dynalite'));
type Resource = { close(): unknown };
type Database = { attachResource(r: Resource): void; detachResource(r: Resource): void };
const { Level } = fromDynalite('level') as { Level: { prototype: Database } };
const { AbstractIterator } = createRequire(
  createRequire(fromDynalite.resolve('level')).resolve('classic-level'),
)('abstract-level') as { AbstractIterator: abstract new (...args: never[]) => Resource };

/** The iterators open now: a database attaches each it makes and detaches it once closed. */
const openIterators = new Set<Resource>();
const { attachResource, detachResource } = Level.prototype;
Level.prototype.attachResource = function (this: Database, resource: Resource) {
  if (resource instanceof AbstractIterator) openIterators.add(resource);
  return attachResource.call(this, resource);
};
Level.prototype.detachResource = function (this: Database, resource: Resource) {
  openIterators.delete(resource);
  return detachResource.call(this, resource);
};

describe('local DynamoDB (dynalite): a Query leaves no LevelDB iterator open', () => {
  let dir: string;
  let server: Server;
  let client: DynamoDBClient;

  beforeAll(async () => {
    // What dynalite-worker.mjs does before it starts dynalite.
    closeIteratorsOnReturn();
    dir = mkdtempSync(join(tmpdir(), 'dynalite-iterators-'));
    const dynalite = fromDynalite('dynalite') as (options: object) => Server;
    server = dynalite({ path: dir, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', () => listening()));
    const address = server.address();
    client = new DynamoDBClient({
      endpoint: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    await ensureTables(client, { inboxTable: 'inbox' }, { openIndexShards: topology.inbox.openIndexShards });
  });

  afterAll(async () => {
    client?.destroy();
    await new Promise((closed) => server?.close(closed));
    rmSync(dir, { recursive: true, force: true });
  });

  it("the inbox's figures (a Query per shard and status) leave no iterator open behind them", async () => {
    const store = new DynamoInboxStore(client, { tableName: 'inbox', openIndexShards: 4 });
    const ops = new DynamoInboxOps(client, { tableName: 'inbox', openIndexShards: 4 });
    // One open record, so some of the Queries stop at their Limit before the range's end.
    await store.begin({
      consumer: 'index',
      eventId: 'e-1',
      owner: 'o',
      leaseUntil: 2_000,
      payloadHash: 'h',
      eventType: 'content.approved',
      subject: null,
      event: {},
      now: 1_000,
    });
    for (let i = 0; i < 10; i++) {
      const figures = await ops.openFigures('index');
      expect(figures.PROCESSING.count).toBe(1);
    }
    // 120 Queries answered. An iterator closes just after its stream ends, after the answer
    // went out: a close is a call to LevelDB in the thread pool, so it is waited for (in
    // milliseconds; the bound only ends a hang). Unfixed, all 120 stay open for good.
    await expect.poll(() => openIterators.size, { timeout: 30_000, interval: 20 }).toBe(0);
  });
});
