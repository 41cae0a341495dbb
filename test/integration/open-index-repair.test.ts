import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumerNames } from '../../functions/topology';
import { repairOpenIndex } from '../../infra/local/open-index-repair';
import { ensureTables } from '../../shared/consumers/ensure-tables';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { inboxTableSchema, openKey } from '../../shared/inbox/dynamo-inbox-table';
import { openCounts } from '../../shared/inbox/inbox-ops';

const require = createRequire(import.meta.url);

/** dynalite's store, as its `db.create` returns it: what the test needs to write an index entry alone. */
interface DynaliteStore {
  getTable(
    name: string,
    cb: (
      err: Error | null,
      table: { GlobalSecondaryIndexes: { IndexName: string; KeySchema: unknown }[] },
    ) => void,
  ): void;
  getIndexDb(
    type: string,
    table: string,
    index: string,
  ): { put(key: string, value: unknown, cb: (err?: Error) => void): void };
}

const tables = { inboxTable: 'repair-inbox' };
const shards = 4;

/**
 * A SIGKILL between dynalite's index write and its item write leaves an index entry with no
 * record behind it (node_modules/dynalite/db/index.js writes the index first). The test writes
 * such entries straight into dynalite's index store (nothing in the API can), as a killed run
 * left them, and checks the repair drops exactly those.
 */
describe('repairOpenIndex', () => {
  let server: {
    listen(port: number, cb: () => void): void;
    close(cb: () => void): void;
    address(): AddressInfo;
  };
  let store: DynaliteStore;
  let client: DynamoDBClient;
  let inbox: DynamoInboxOps;

  beforeAll(async () => {
    // Captures the store dynalite makes: its module calls `db.create` through the exports object.
    const dbModule = require('dynalite/db') as {
      create: (o: unknown) => DynaliteStore;
      createIndexKey: unknown;
    };
    const create = dbModule.create;
    dbModule.create = (options) => {
      store = create(options);
      return store;
    };
    const dynalite = require('dynalite') as (o: unknown) => typeof server;
    server = dynalite({ createTableMs: 0 });
    dbModule.create = create;
    await new Promise<void>((resolve) => server.listen(0, resolve));
    client = new DynamoDBClient({
      endpoint: `http://127.0.0.1:${server.address().port}`,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    await ensureTables(client, tables, { openIndexShards: shards });
    inbox = new DynamoInboxOps(client, { tableName: tables.inboxTable, openIndexShards: shards });
  });

  afterAll(async () => {
    client?.destroy();
    await new Promise<void>((resolve) => server?.close(() => resolve()));
  });

  /** Writes an index entry and nothing else, as a run killed between dynalite's two writes. */
  async function strayEntry(pk: string, key: string, since: string): Promise<void> {
    const dbModule = require('dynalite/db') as {
      createIndexKey: (item: unknown, table: unknown, keySchema: unknown) => string;
    };
    const table = await new Promise<Parameters<Parameters<DynaliteStore['getTable']>[1]>[1]>(
      (resolve, reject) => store.getTable(tables.inboxTable, (err, t) => (err ? reject(err) : resolve(t))),
    );
    const index = table.GlobalSecondaryIndexes.find((i) => i.IndexName === inboxTableSchema.openIndex.name);
    const item = { pk: { S: pk }, openKey: { S: key }, openSince: { S: since } };
    const indexKey = dbModule.createIndexKey(item, table, index?.KeySchema);
    await new Promise<void>((resolve, reject) =>
      store
        .getIndexDb('global', tables.inboxTable, inboxTableSchema.openIndex.name)
        .put(indexKey, item, (err) => (err ? reject(err) : resolve())),
    );
  }

  it('drops the entries no record stands behind, and only those', async () => {
    const processing = openKey('archive', 'PROCESSING', 1);
    // A record the retry began again (a later openSince) and completed: PROCESSED, no openKey.
    await client.send(
      new PutItemCommand({
        TableName: tables.inboxTable,
        Item: { pk: { S: 'archive#done' }, status: { S: 'PROCESSED' } },
      }),
    );
    await strayEntry('archive#done', processing, '2026-12-02T07:00:00.000Z');
    // A begin whose record was never written.
    await strayEntry('archive#never', processing, '2026-12-02T07:00:01.000Z');
    // A record in flight, written whole: its entry stays.
    await client.send(
      new PutItemCommand({
        TableName: tables.inboxTable,
        Item: {
          pk: { S: 'archive#live' },
          status: { S: 'PROCESSING' },
          openKey: { S: processing },
          openSince: { S: '2026-12-02T07:00:02.000Z' },
        },
      }),
    );
    // ... and one written whole whose entry a killed earlier begin had left with another time.
    await strayEntry('archive#live', processing, '2026-12-02T06:59:00.000Z');
    expect(openCounts(await inbox.openFigures('archive')).PROCESSING).toBe(4);

    expect(await repairOpenIndex(client, tables.inboxTable, shards, consumerNames)).toBe(3);

    const figures = await inbox.openFigures('archive');
    expect(openCounts(figures).PROCESSING).toBe(1);
    expect(figures.PROCESSING.oldestSince).toBe(Date.parse('2026-12-02T07:00:02.000Z'));
    const get = async (pk: string) =>
      (await client.send(new GetItemCommand({ TableName: tables.inboxTable, Key: { pk: { S: pk } } }))).Item;
    expect(await get('archive#done')).toEqual({ pk: { S: 'archive#done' }, status: { S: 'PROCESSED' } });
    expect(await get('archive#never')).toBeUndefined();
    expect(await get('archive#live')).toMatchObject({ openSince: { S: '2026-12-02T07:00:02.000Z' } });
    // A second pass finds nothing left.
    expect(await repairOpenIndex(client, tables.inboxTable, shards, consumerNames)).toBe(0);
  });
});
