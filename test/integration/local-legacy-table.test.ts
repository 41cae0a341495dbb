import { rmSync } from 'node:fs';
import { type DynamoDBClient, GetItemCommand, PutItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, describe, expect, it } from 'vitest';
import { FaultInjector, noFaults } from '../../infra/local/faults';
import { type LocalConsumers, startLocalConsumers } from '../../infra/local/local-consumers';
import { ensureTable } from '../../shared/consumers/ensure-tables';
import type { SqlClient } from '../../shared/db/sql-client';
import { dynamoClient } from '../support/dynamo';
import { tempDataDir } from '../support/pipeline-client';

// Nothing here reaches the database.
const noDatabase = {} as SqlClient;

/** The index consumer's table as versions before table resources named it, and its table now. */
const before = 'content-pipeline-index';
const now = 'content-pipeline-content-index';

const entry = (taskId: string, title: string) => ({
  taskId: { S: taskId },
  version: { N: '2' },
  status: { S: 'approved' },
  title: { S: title },
});

/**
 * A local data directory from before table resources keeps its consumers' tables under their
 * consumers' names: the runtime copies them into the tables their resources have now, once,
 * before any consumer runs, never over an item already there (a copy cut short leaves some).
 */
describe("a data directory with a consumer's table from before table resources", () => {
  const dir = tempDataDir('local-legacy-table-');
  let consumers: LocalConsumers | undefined;
  afterAll(async () => {
    await consumers?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (log: (message: string, extra?: Record<string, unknown>) => void = () => undefined) => {
    consumers = await startLocalConsumers({
      dataDir: dir,
      dbAs: () => noDatabase,
      engine: 'dynalite',
      faults: new FaultInjector(noFaults),
      log,
    });
    return { consumers, client: dynamoClient(consumers.dynamo.endpoint) };
  };
  const stop = async (client: DynamoDBClient) => {
    client.destroy();
    await consumers?.stop();
    consumers = undefined;
  };
  const get = async (client: DynamoDBClient, table: string, taskId: string) =>
    (
      await client.send(
        new GetItemCommand({ TableName: table, Key: { taskId: { S: taskId } }, ConsistentRead: true }),
      )
    ).Item;

  it('copies its items into the table of its resource once, keeping what that table has', async () => {
    // As an older version left it: the table under the consumer's name, with its entries; and
    // one entry already in the new table, as a copy cut short by a crash would have left one.
    const first = await start();
    await ensureTable(
      first.client,
      {
        TableName: before,
        BillingMode: 'PAY_PER_REQUEST',
        KeySchema: [{ AttributeName: 'taskId', KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: 'taskId', AttributeType: 'S' }],
      },
      30_000,
    );
    for (const id of ['a', 'b', 'c'])
      await first.client.send(new PutItemCommand({ TableName: before, Item: entry(id, `old ${id}`) }));
    await first.client.send(new PutItemCommand({ TableName: now, Item: entry('b', 'already here') }));
    await stop(first.client);

    const logged: { message: string; extra?: Record<string, unknown> }[] = [];
    const second = await start((message, extra) => logged.push({ message, extra }));
    expect(await get(second.client, now, 'a')).toEqual(entry('a', 'old a'));
    expect(await get(second.client, now, 'b')).toEqual(entry('b', 'already here'));
    expect(await get(second.client, now, 'c')).toEqual(entry('c', 'old c'));
    expect(logged.filter((l) => l.message.includes('table from an older version'))).toEqual([
      {
        message: 'index: its table from an older version copied to its table resource',
        extra: { from: before, to: now, items: 2 },
      },
    ]);
    // The old table is left as it was.
    expect((await second.client.send(new ScanCommand({ TableName: before }))).Items).toHaveLength(3);
    // A recount finds the copied entries where they are now.
    expect((await second.consumers.countEffects()).indexDocuments).toBe(3);
    await stop(second.client);

    // Once: the next start copies nothing, even where the new table lacks an old item.
    const third = await start((message, extra) => logged.push({ message, extra }));
    await third.client.send(new PutItemCommand({ TableName: before, Item: entry('d', 'old d') }));
    await stop(third.client);
    const fourth = await start((message, extra) => logged.push({ message, extra }));
    expect(await get(fourth.client, now, 'd')).toBeUndefined();
    expect(logged.filter((l) => l.message.includes('table from an older version'))).toHaveLength(1);
    await stop(fourth.client);
  });
});
