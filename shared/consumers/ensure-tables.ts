import {
  type AttributeValue,
  CreateTableCommand,
  type CreateTableCommandInput,
  DeleteTableCommand,
  DescribeTableCommand,
  type DynamoDBClient,
  GetItemCommand,
  type GlobalSecondaryIndex,
  PutItemCommand,
  ScanCommand,
} from '@aws-sdk/client-dynamodb';
import { sleep } from '../db/retry';
import { contentIndexTableSchema } from '../effects/content-index';
import { inboxTableSchema, type OpenStatus, openKey } from '../inbox/dynamo-inbox-store';

/** Table names of the consumer side. */
export interface ConsumerTables {
  readonly inboxTable: string;
  readonly indexTable: string;
}

const openIndex: GlobalSecondaryIndex = {
  IndexName: inboxTableSchema.openIndex.name,
  KeySchema: [
    { AttributeName: inboxTableSchema.openIndex.partitionKey, KeyType: 'HASH' },
    { AttributeName: inboxTableSchema.openIndex.sortKey, KeyType: 'RANGE' },
  ],
  Projection: { ProjectionType: 'ALL' },
};

/**
 * Creates the inbox and content-index tables if they are missing and waits until both are
 * ACTIVE, for the local runtime and tests (on AWS the CDK stack owns them, with TTL on the
 * inbox's `expiresAt`; neither dynalite nor this function has a TTL API). Idempotent: an
 * existing table is left as it is, except that an inbox made before the sparse ops index
 * existed (a local data directory from an older version) gets the index and its keys.
 */
export async function ensureTables(
  client: DynamoDBClient,
  tables: ConsumerTables,
  options: { readonly timeoutMs?: number } = {},
): Promise<void> {
  await Promise.all([
    ensureTable(client, inboxTableInput(tables.inboxTable), options.timeoutMs ?? 30_000).then(() =>
      ensureOpenIndex(client, tables.inboxTable, options.timeoutMs ?? 30_000),
    ),
    ensureTable(
      client,
      {
        TableName: tables.indexTable,
        BillingMode: 'PAY_PER_REQUEST',
        KeySchema: [{ AttributeName: contentIndexTableSchema.partitionKey, KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: contentIndexTableSchema.partitionKey, AttributeType: 'S' }],
      },
      options.timeoutMs ?? 30_000,
    ),
  ]);
}

/** The inbox table as `ensureTables` creates it: the key, and the sparse ops index. */
function inboxTableInput(name: string): CreateTableCommandInput {
  return {
    TableName: name,
    BillingMode: 'PAY_PER_REQUEST',
    KeySchema: [
      { AttributeName: inboxTableSchema.partitionKey, KeyType: 'HASH' },
      { AttributeName: inboxTableSchema.sortKey, KeyType: 'RANGE' },
    ],
    AttributeDefinitions: [
      { AttributeName: inboxTableSchema.partitionKey, AttributeType: 'S' },
      { AttributeName: inboxTableSchema.sortKey, AttributeType: 'S' },
      { AttributeName: inboxTableSchema.openIndex.partitionKey, AttributeType: 'S' },
    ],
    GlobalSecondaryIndexes: [openIndex],
  };
}

async function ensureTable(client: DynamoDBClient, input: CreateTableCommandInput, timeoutMs: number) {
  try {
    await client.send(new CreateTableCommand(input));
  } catch (err) {
    // Already there (from an earlier run, or a concurrent ensureTables): fine, wait for ACTIVE.
    if ((err as { name?: string } | null)?.name !== 'ResourceInUseException') throw err;
  }
  await waitActive(client, input.TableName as string, timeoutMs);
}

/** Waits until the table and all its indexes are ACTIVE. */
async function waitActive(client: DynamoDBClient, table: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: table }));
    const indexesActive = (Table?.GlobalSecondaryIndexes ?? []).every((i) => i.IndexStatus === 'ACTIVE');
    if (Table?.TableStatus === 'ACTIVE' && indexesActive) return;
    if (Date.now() > deadline) {
      throw new Error(`table ${table} is still ${Table?.TableStatus} after ${timeoutMs} ms`);
    }
    await sleep(25);
  }
}

/**
 * Rebuilds an inbox table that predates the sparse ops index: its items are copied to a
 * backup table, the table is made again with the index, and the items come back, open ones
 * with their index key. (UpdateTable cannot do it: dynalite accepts a new index and never
 * builds it.) The backup counts only once it holds a completion marker, written after the
 * last item: a start that died while filling it copies again (PutItem is idempotent), and the
 * old table is deleted only after the marker is there, so no record is lost at any point.
 * Local data directories only: on AWS the CDK table has the index from the start.
 */
async function ensureOpenIndex(client: DynamoDBClient, table: string, timeoutMs: number): Promise<void> {
  const backup = `${table}-upgrade-backup`;
  const describe = async (name: string) => {
    try {
      return (await client.send(new DescribeTableCommand({ TableName: name }))).Table;
    } catch (err) {
      if ((err as Error).name === 'ResourceNotFoundException') return undefined;
      throw err;
    }
  };
  const hasIndex = (t: Awaited<ReturnType<typeof describe>>) =>
    t?.GlobalSecondaryIndexes?.some((i) => i.IndexName === openIndex.IndexName) ?? false;

  const current = await describe(table);
  const backupExists = (await describe(backup)) !== undefined;
  if (!backupExists && hasIndex(current)) return;
  if (!(backupExists && (await hasMarker(client, backup)))) {
    // No complete backup yet, so the old table is still whole: (re)fill the backup from it.
    await ensureTable(client, inboxTableInput(backup), timeoutMs);
    await copyItems(client, table, backup);
    await client.send(new PutItemCommand({ TableName: backup, Item: backupMarker }));
  }
  if (current && !hasIndex(current)) {
    await client.send(new DeleteTableCommand({ TableName: table }));
    await waitGone(client, table, timeoutMs);
  }
  await ensureTable(client, inboxTableInput(table), timeoutMs);
  await copyItems(client, backup, table);
  await client.send(new DeleteTableCommand({ TableName: backup }));
}

/** The item that says a backup holds every item of the old table (no consumer is named `#`). */
const backupMarker: Record<string, AttributeValue> = {
  [inboxTableSchema.partitionKey]: { S: '#upgrade' },
  [inboxTableSchema.sortKey]: { S: '#complete' },
};

async function hasMarker(client: DynamoDBClient, backup: string): Promise<boolean> {
  const { Item } = await client.send(
    new GetItemCommand({ TableName: backup, Key: backupMarker, ConsistentRead: true }),
  );
  return Item !== undefined;
}

/** Copies every item of `from` into `to` (never the marker), keying records that are not PROCESSED. */
async function copyItems(client: DynamoDBClient, from: string, to: string): Promise<void> {
  const markerKey = backupMarker[inboxTableSchema.partitionKey]?.S;
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await client.send(
      new ScanCommand({ TableName: from, ExclusiveStartKey: start, ConsistentRead: true }),
    );
    for (const item of page.Items ?? []) {
      if (item[inboxTableSchema.partitionKey]?.S === markerKey) continue;
      const status = item.state?.M?.status?.S;
      const keyed =
        status && status !== 'PROCESSED' && !item[inboxTableSchema.openIndex.partitionKey]
          ? {
              ...item,
              [inboxTableSchema.openIndex.partitionKey]: {
                S: openKey(`${item[inboxTableSchema.partitionKey]?.S}`, status as OpenStatus),
              },
            }
          : item;
      await client.send(new PutItemCommand({ TableName: to, Item: keyed }));
    }
    start = page.LastEvaluatedKey;
  } while (start);
}

async function waitGone(client: DynamoDBClient, table: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await client.send(new DescribeTableCommand({ TableName: table }));
    } catch (err) {
      if ((err as Error).name === 'ResourceNotFoundException') return;
      throw err;
    }
    if (Date.now() > deadline) throw new Error(`table ${table} is still there after ${timeoutMs} ms`);
    await sleep(25);
  }
}
