import { randomUUID } from 'node:crypto';
import {
  CreateTableCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { expect, it } from 'vitest';
import { ensureTables } from '../../shared/consumers/ensure-tables';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { describeEachEngine } from '../support/dynamo';

describeEachEngine('ensureTables on an inbox made before the sparse ops index', (fixture) => {
  it('adds the index and keys the open records already there, leaving processed ones out', async () => {
    const { client } = fixture();
    const table = `old-inbox-${randomUUID().slice(0, 8)}`;
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
    for (let i = 0; ; i++) {
      const { Table } = await client.send(new DescribeTableCommand({ TableName: table }));
      if (Table?.TableStatus === 'ACTIVE') break;
      if (i > 400) throw new Error(`table ${table} never became ACTIVE`);
      await new Promise((r) => setTimeout(r, 25));
    }
    // Items as the previous version wrote them: the state map, no index key.
    const old = (eventId: string, status: string) =>
      client.send(
        new PutItemCommand({
          TableName: table,
          Item: {
            consumer: { S: 'index' },
            eventId: { S: eventId },
            state: { M: { status: { S: status }, attempts: { N: '1' }, event: { S: '{}' } } },
          },
        }),
      );
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
});
