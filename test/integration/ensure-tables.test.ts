import { randomUUID } from 'node:crypto';
import {
  CreateTableCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  type DynamoDBClient,
  type GlobalSecondaryIndex,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { ensureTables } from '../../shared/consumers/ensure-tables';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { inboxTableSchema } from '../../shared/inbox/dynamo-inbox-table';
import { openCounts } from '../../shared/inbox/inbox-ops';
import { describeEachEngine } from '../support/dynamo';
import { waitFor } from '../support/wait-for';

/** The index the versions keyed by consumer had: `<consumer>#<status>`, sorted by event id, whole items. */
const consumerKeyedIndex: GlobalSecondaryIndex = {
  IndexName: 'open-records',
  KeySchema: [
    { AttributeName: 'openKey', KeyType: 'HASH' },
    { AttributeName: 'eventId', KeyType: 'RANGE' },
  ],
  Projection: { ProjectionType: 'ALL' },
};

/**
 * An inbox table keyed `(consumer, eventId)` as earlier versions made it: with their sparse
 * index (`withIndex`), or from before it, with none.
 */
async function createOldTable(client: DynamoDBClient, table: string, withIndex = false): Promise<void> {
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
        ...(withIndex ? [{ AttributeName: 'openKey', AttributeType: 'S' as const }] : []),
      ],
      ...(withIndex ? { GlobalSecondaryIndexes: [consumerKeyedIndex] } : {}),
    }),
  );
  // The engine turns a table ACTIVE on its own time and says so only through DescribeTable (as
  // AWS's own waiter reads it): read until it does, within a bound on a table that never does.
  await waitFor(
    () => client.send(new DescribeTableCommand({ TableName: table })),
    ({ Table }) =>
      Table?.TableStatus === 'ACTIVE' &&
      (Table.GlobalSecondaryIndexes ?? []).every((i) => i.IndexStatus === 'ACTIVE'),
    { timeoutMs: 60_000, intervalMs: 25, what: `table ${table} ACTIVE` },
  );
}

/** An item as an earlier version wrote it: the state map, and the old index key when it had one. */
function putOld(client: DynamoDBClient, table: string, eventId: string, status: string, indexed = false) {
  return client.send(
    new PutItemCommand({
      TableName: table,
      Item: {
        consumer: { S: 'index' },
        eventId: { S: eventId },
        state: {
          M: {
            status: { S: status },
            attempts: { N: '1' },
            event: { S: `{"id":"${eventId}"}` },
            receivedAt: { N: '1000' },
            updatedAt: { N: '2000' },
          },
        },
        ...(indexed && status !== 'PROCESSED' ? { openKey: { S: `index#${status}` } } : {}),
      },
    }),
  );
}

/** The inbox `table` and a table resource beside it, keyed by `taskId`. */
const tablesOf = (table: string) => ({
  inboxTable: table,
  resourceTables: [{ tableName: `${table}-index`, partitionKey: 'taskId' }],
});

const dropAll = (client: DynamoDBClient, names: readonly string[]) =>
  Promise.all(
    names.map((name) => client.send(new DeleteTableCommand({ TableName: name })).catch(() => undefined)),
  );

describeEachEngine('ensureTables on an inbox of an earlier shape', (fixture) => {
  for (const shape of ['keyed by consumer, with its sparse index', 'keyed by consumer, before any index']) {
    const withIndex = shape.includes('with its');
    it(`rebuilds one ${shape} keyed by event, every record kept and the open ones indexed`, async () => {
      const { client } = fixture();
      const table = `old-inbox-${randomUUID().slice(0, 8)}`;
      await createOldTable(client, table, withIndex);
      const old = (eventId: string, status: string) => putOld(client, table, eventId, status, withIndex);
      await old('a', 'PROCESSED');
      await old('b', 'DEAD');
      await old('c', 'FAILED');
      await old('d', 'PROCESSING');
      await old('e', 'DEAD');
      try {
        await ensureTables(client, tablesOf(table), { openIndexShards: topology.inbox.openIndexShards });
        const { Table } = await client.send(new DescribeTableCommand({ TableName: table }));
        expect(Table?.KeySchema).toEqual([{ AttributeName: inboxTableSchema.partitionKey, KeyType: 'HASH' }]);
        // The table resource beside it, keyed as declared.
        const resource = await client.send(new DescribeTableCommand({ TableName: `${table}-index` }));
        expect(resource.Table?.KeySchema).toEqual([{ AttributeName: 'taskId', KeyType: 'HASH' }]);
        const inbox = new DynamoInboxOps(client, {
          tableName: table,
          openIndexShards: topology.inbox.openIndexShards,
        });
        expect(openCounts(await inbox.openFigures('index'))).toEqual({ PROCESSING: 1, FAILED: 1, DEAD: 2 });
        // Nothing is lost on the way, the processed record included, each under its new key.
        for (const [eventId, status] of [
          ['a', 'PROCESSED'],
          ['b', 'DEAD'],
          ['c', 'FAILED'],
          ['d', 'PROCESSING'],
          ['e', 'DEAD'],
        ]) {
          expect(await inbox.get({ consumer: 'index', eventId: eventId as string })).toMatchObject({
            status,
            event: { id: eventId },
          });
        }
        expect((await inbox.listDead('index')).records.map((r) => r.eventId)).toEqual(['b', 'e']);
        // A second start finds the current shape and changes nothing.
        await ensureTables(client, tablesOf(table), { openIndexShards: topology.inbox.openIndexShards });
        expect(openCounts(await inbox.openFigures('index'))).toEqual({ PROCESSING: 1, FAILED: 1, DEAD: 2 });
      } finally {
        await dropAll(client, [table, `${table}-index`]);
      }
    });
  }

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
    // An earlier version's start made its backup and copied one item before it died: no marker.
    await createOldTable(client, backup);
    await putOld(client, backup, 'a', 'PROCESSED');
    try {
      await ensureTables(client, tablesOf(table), { openIndexShards: topology.inbox.openIndexShards });
      const inbox = new DynamoInboxOps(client, {
        tableName: table,
        openIndexShards: topology.inbox.openIndexShards,
      });
      for (const id of ['a', 'b', 'c'])
        expect(await inbox.get({ consumer: 'index', eventId: id })).toBeDefined();
      expect(openCounts(await inbox.openFigures('index'))).toEqual({ PROCESSING: 0, FAILED: 1, DEAD: 1 });
      await expect(client.send(new DescribeTableCommand({ TableName: backup }))).rejects.toThrow();
    } finally {
      await dropAll(client, [table, backup, `${table}-index`]);
    }
  });

  it('a start that died after an earlier version completed its backup restores from that backup', async () => {
    const { client } = fixture();
    const table = `old-inbox-${randomUUID().slice(0, 8)}`;
    const backup = `${table}-upgrade-backup`;
    // The old table is gone already; the backup holds everything and that version's marker.
    await createOldTable(client, backup);
    await putOld(client, backup, 'a', 'PROCESSED');
    await putOld(client, backup, 'b', 'DEAD');
    await client.send(
      new PutItemCommand({
        TableName: backup,
        Item: { consumer: { S: '#upgrade' }, eventId: { S: '#complete' } },
      }),
    );
    try {
      await ensureTables(client, tablesOf(table), { openIndexShards: topology.inbox.openIndexShards });
      const inbox = new DynamoInboxOps(client, {
        tableName: table,
        openIndexShards: topology.inbox.openIndexShards,
      });
      expect(await inbox.get({ consumer: 'index', eventId: 'a' })).toMatchObject({ status: 'PROCESSED' });
      expect(openCounts(await inbox.openFigures('index'))).toEqual({ PROCESSING: 0, FAILED: 0, DEAD: 1 });
      await expect(client.send(new DescribeTableCommand({ TableName: backup }))).rejects.toThrow();
    } finally {
      await dropAll(client, [table, backup, `${table}-index`]);
    }
  });
});
