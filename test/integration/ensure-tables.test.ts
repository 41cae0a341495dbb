import { randomUUID } from 'node:crypto';
import {
  CreateTableCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  type DynamoDBClient,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { expect, it } from 'vitest';
import { ensureTables } from '../../shared/consumers/ensure-tables';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { describeEachEngine } from '../support/dynamo';
import { waitFor } from '../support/wait-for';

/** An inbox table as the previous version made it: the key, no index. */
async function createOldTable(client: DynamoDBClient, table: string): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: table,
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [
        { AttributeName: 'consumer', KeyType: 'HASH' },
        { AttributeName: 'eventId', KeyType: 'RANGE' },
      ],
      AttributeDefinitions: [
        { AttributeName: 'consumer', AttributeType: 'S' },
        { AttributeName: 'eventId', AttributeType: 'S' },
      ],
    }),
  );
  // The engine turns a table ACTIVE on its own time and says so only through DescribeTable (as
  // AWS's own waiter reads it): read until it does, within a bound on a table that never does.
  await waitFor(
    () => client.send(new DescribeTableCommand({ TableName: table })),
    ({ Table }) => Table?.TableStatus === 'ACTIVE',
    { timeoutMs: 60_000, intervalMs: 25, what: `table ${table} ACTIVE` },
  );
}

/** An item as the previous version wrote it: the state map, no index key. */
function putOld(client: DynamoDBClient, table: string, eventId: string, status: string) {
  return client.send(
    new PutItemCommand({
      TableName: table,
      Item: {
        consumer: { S: 'index' },
        eventId: { S: eventId },
        state: { M: { status: { S: status }, attempts: { N: '1' }, event: { S: '{}' } } },
      },
    }),
  );
}

describeEachEngine('ensureTables on an inbox made before the sparse ops index', (fixture) => {
  it('adds the index and keys the open records already there, leaving processed ones out', async () => {
    const { client } = fixture();
    const table = `old-inbox-${randomUUID().slice(0, 8)}`;
    await createOldTable(client, table);
    const old = (eventId: string, status: string) => putOld(client, table, eventId, status);
    await old('a', 'PROCESSED');
    await old('b', 'DEAD');
    await old('c', 'FAILED');
    await old('d', 'PROCESSING');
    await old('e', 'DEAD');
    try {
      await ensureTables(client, { inboxTable: table, indexTable: `${table}-index` });
      const store = new DynamoInboxStore(client, { tableName: table });
      expect(await store.openCounts('index')).toEqual({ PROCESSING: 1, FAILED: 1, DEAD: 2 });
      // Nothing is lost on the way, the processed record included.
      expect((await store.counts('index')).total).toBe(5);
      // A second start finds the index and changes nothing.
      await ensureTables(client, { inboxTable: table, indexTable: `${table}-index` });
      expect(await store.openCounts('index')).toEqual({ PROCESSING: 1, FAILED: 1, DEAD: 2 });
    } finally {
      for (const name of [table, `${table}-index`]) {
        await client.send(new DeleteTableCommand({ TableName: name })).catch(() => undefined);
      }
    }
  });

  it('a start that died while filling the backup copies again, and loses nothing', async () => {
    const { client } = fixture();
    const table = `old-inbox-${randomUUID().slice(0, 8)}`;
    const backup = `${table}-upgrade-backup`;
    await createOldTable(client, table);
    for (const [id, status] of [
      ['a', 'PROCESSED'],
      ['b', 'DEAD'],
      ['c', 'FAILED'],
    ] as const) {
      await putOld(client, table, id, status);
    }
    // The earlier start made the backup and copied one item before it died: no marker.
    await createOldTable(client, backup);
    await putOld(client, backup, 'a', 'PROCESSED');
    try {
      await ensureTables(client, { inboxTable: table, indexTable: `${table}-index` });
      const store = new DynamoInboxStore(client, { tableName: table });
      expect((await store.counts('index')).total).toBe(3);
      expect(await store.openCounts('index')).toEqual({ PROCESSING: 0, FAILED: 1, DEAD: 1 });
      await expect(client.send(new DescribeTableCommand({ TableName: backup }))).rejects.toThrow();
    } finally {
      for (const name of [table, backup, `${table}-index`]) {
        await client.send(new DeleteTableCommand({ TableName: name })).catch(() => undefined);
      }
    }
  });
});
