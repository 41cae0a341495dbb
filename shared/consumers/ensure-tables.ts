import {
  type AttributeValue,
  CreateTableCommand,
  type CreateTableCommandInput,
  DeleteTableCommand,
  DescribeTableCommand,
  type DescribeTableCommandOutput,
  type DynamoDBClient,
  GetItemCommand,
  type GlobalSecondaryIndex,
  type KeySchemaElement,
  PutItemCommand,
  ScanCommand,
} from '@aws-sdk/client-dynamodb';
import { sleep } from '../db/retry';
import {
  inboxTableSchema,
  type OpenStatus,
  openKey,
  openShard,
  openSince,
  openStatuses,
  recordKey,
} from '../inbox/dynamo-inbox-table';

/** Table names of the consumer side: the inbox, and each table resource's name by its partition key. */
export interface ConsumerTables {
  readonly inboxTable: string;
  readonly resourceTables?: readonly { readonly tableName: string; readonly partitionKey: string }[];
}

const openIndex: GlobalSecondaryIndex = {
  IndexName: inboxTableSchema.openIndex.name,
  KeySchema: [
    { AttributeName: inboxTableSchema.openIndex.partitionKey, KeyType: 'HASH' },
    { AttributeName: inboxTableSchema.openIndex.sortKey, KeyType: 'RANGE' },
  ],
  Projection: { ProjectionType: 'KEYS_ONLY' },
};

/**
 * Creates the inbox and the consumers' table resources if they are missing and waits until
 * all are ACTIVE, for the local runtime and tests (on AWS the CDK stack owns them, with TTL on the
 * inbox's `expiresAt`; neither dynalite nor this function has a TTL API). Idempotent: an
 * existing table is left as it is, except that an inbox of an older shape (a local data
 * directory from an older version: keyed by consumer, or without the operator's index) is
 * rebuilt in the current shape with every record kept.
 */
export async function ensureTables(
  client: DynamoDBClient,
  tables: ConsumerTables,
  options: {
    readonly timeoutMs?: number;
    /** The shard count the inbox's adapters use (`DynamoInboxTableOptions`): a rebuild indexes records by it. */
    readonly openIndexShards: number;
  },
): Promise<void> {
  await Promise.all([
    ensureTable(client, inboxTableInput(tables.inboxTable), options.timeoutMs ?? 30_000).then(() =>
      ensureCurrentShape(client, tables.inboxTable, options.timeoutMs ?? 30_000, options.openIndexShards),
    ),
    ...(tables.resourceTables ?? []).map((t) =>
      ensureTable(
        client,
        {
          TableName: t.tableName,
          BillingMode: 'PAY_PER_REQUEST',
          KeySchema: [{ AttributeName: t.partitionKey, KeyType: 'HASH' }],
          AttributeDefinitions: [{ AttributeName: t.partitionKey, AttributeType: 'S' }],
        },
        options.timeoutMs ?? 30_000,
      ),
    ),
  ]);
}

/** The inbox table as `ensureTables` creates it: the key, and the operator's index. */
function inboxTableInput(name: string): CreateTableCommandInput {
  return {
    TableName: name,
    BillingMode: 'PAY_PER_REQUEST',
    KeySchema: [{ AttributeName: inboxTableSchema.partitionKey, KeyType: 'HASH' }],
    AttributeDefinitions: [
      { AttributeName: inboxTableSchema.partitionKey, AttributeType: 'S' },
      { AttributeName: inboxTableSchema.openIndex.partitionKey, AttributeType: 'S' },
      { AttributeName: inboxTableSchema.openIndex.sortKey, AttributeType: 'S' },
    ],
    GlobalSecondaryIndexes: [openIndex],
  };
}

/**
 * Creates the table `input` describes unless it exists, and waits until it and its indexes are
 * ACTIVE; true when this call created it.
 */
export async function ensureTable(
  client: DynamoDBClient,
  input: CreateTableCommandInput,
  timeoutMs: number,
): Promise<boolean> {
  let created = true;
  try {
    await client.send(new CreateTableCommand(input));
  } catch (err) {
    // Already there (from an earlier run, or a concurrent ensureTables): fine, wait for ACTIVE.
    if ((err as { name?: string } | null)?.name !== 'ResourceInUseException') throw err;
    created = false;
  }
  await waitActive(client, input.TableName as string, timeoutMs);
  return created;
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

type TableDescription = NonNullable<DescribeTableCommandOutput['Table']>;

/** True when `table` has the current key and the current operator's index (keys, projection). */
function isCurrentShape(table: TableDescription | undefined): boolean {
  const keys = (schema: readonly KeySchemaElement[] | undefined) =>
    (schema ?? []).map((k) => `${k.AttributeName}:${k.KeyType}`).join(',');
  const wanted = inboxTableInput('');
  const index = table?.GlobalSecondaryIndexes?.find((i) => i.IndexName === openIndex.IndexName);
  return (
    table !== undefined &&
    keys(table.KeySchema) === keys(wanted.KeySchema) &&
    index !== undefined &&
    keys(index.KeySchema) === keys(openIndex.KeySchema) &&
    index.Projection?.ProjectionType === openIndex.Projection?.ProjectionType
  );
}

/**
 * Rebuilds an inbox table of an older shape (keyed by consumer; without the operator's index;
 * with an index of other keys) in the current one: its items are copied, each made current, to
 * a backup table, the table is made again, and the items come back. (UpdateTable cannot do it:
 * no key schema changes in place, and dynalite accepts a new index and never builds it.) The
 * backup counts only once it holds a completion marker, written after the last item: a start
 * that died while filling it copies again (PutItem is idempotent), and the old table is deleted
 * only after the marker is there, so no record is lost at any point. A backup left by an older
 * version (its own shape, its own marker) is read the same way. Local data directories only:
 * on AWS a new shape is a new table (docs/aws.md, "Deploy to a sandbox account").
 */
async function ensureCurrentShape(
  client: DynamoDBClient,
  table: string,
  timeoutMs: number,
  shards: number,
): Promise<void> {
  const backup = `${table}-upgrade-backup`;
  const describe = async (name: string) => {
    try {
      return (await client.send(new DescribeTableCommand({ TableName: name }))).Table;
    } catch (err) {
      if ((err as Error).name === 'ResourceNotFoundException') return undefined;
      throw err;
    }
  };

  const current = await describe(table);
  const backupTable = await describe(backup);
  if (!backupTable && isCurrentShape(current)) return;
  if (!(backupTable && (await hasMarker(client, backup, backupTable)))) {
    // No complete backup yet, so the old table is still whole: (re)fill the backup from it.
    if (backupTable && !isCurrentShape(backupTable)) await dropTable(client, backup, timeoutMs);
    await ensureTable(client, inboxTableInput(backup), timeoutMs);
    await copyItems(client, table, backup, shards);
    await client.send(new PutItemCommand({ TableName: backup, Item: backupMarker }));
  }
  if (current && !isCurrentShape(current)) await dropTable(client, table, timeoutMs);
  await ensureTable(client, inboxTableInput(table), timeoutMs);
  await copyItems(client, backup, table, shards);
  await client.send(new DeleteTableCommand({ TableName: backup }));
}

/** The item that says a backup holds every item of the old table (no record's key starts with `#`). */
const backupMarker: Record<string, AttributeValue> = {
  [inboxTableSchema.partitionKey]: { S: '#upgrade#complete' },
};

/** The marker as versions keyed by `(consumer, eventId)` wrote it into their backups. */
const consumerKeyedMarker: Record<string, AttributeValue> = {
  consumer: { S: '#upgrade' },
  eventId: { S: '#complete' },
};

const isMarker = (item: Record<string, AttributeValue>) =>
  item[inboxTableSchema.partitionKey]?.S === backupMarker[inboxTableSchema.partitionKey]?.S ||
  (item.consumer?.S === consumerKeyedMarker.consumer?.S &&
    item.eventId?.S === consumerKeyedMarker.eventId?.S);

async function hasMarker(client: DynamoDBClient, backup: string, shape: TableDescription): Promise<boolean> {
  const keyed = shape.KeySchema?.some((k) => k.AttributeName === inboxTableSchema.partitionKey);
  const { Item } = await client.send(
    new GetItemCommand({
      TableName: backup,
      Key: keyed ? backupMarker : consumerKeyedMarker,
      ConsistentRead: true,
    }),
  );
  return Item !== undefined;
}

async function dropTable(client: DynamoDBClient, table: string, timeoutMs: number): Promise<void> {
  await client.send(new DeleteTableCommand({ TableName: table }));
  await waitGone(client, table, timeoutMs);
}

/** Copies every record of `from` into `to` (never a marker), each in the current shape. */
async function copyItems(client: DynamoDBClient, from: string, to: string, shards: number): Promise<void> {
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await client.send(
      new ScanCommand({ TableName: from, ExclusiveStartKey: start, ConsistentRead: true }),
    );
    for (const item of page.Items ?? []) {
      if (isMarker(item)) continue;
      await client.send(new PutItemCommand({ TableName: to, Item: currentItem(item, shards) }));
    }
    start = page.LastEvaluatedKey;
  } while (start);
}

/**
 * An item of any earlier shape in the current one: keyed `<consumer>#<eventId>`, with the index
 * keys its status calls for (from the times its state holds: the lease's start is not kept, so a
 * `PROCESSING` record is ordered by its last write). An item already current is kept as it is.
 */
function currentItem(item: Record<string, AttributeValue>, shards: number): Record<string, AttributeValue> {
  if (item[inboxTableSchema.partitionKey]?.S !== undefined) return item;
  const consumer = item.consumer?.S ?? '';
  const eventId = item.eventId?.S ?? '';
  const state = item.state?.M ?? {};
  const time = (name: string) => (state[name]?.N === undefined ? undefined : Number(state[name]?.N));
  const {
    [inboxTableSchema.openIndex.partitionKey]: _formerKey,
    [inboxTableSchema.openIndex.sortKey]: _formerSince,
    ...rest
  } = item;
  const status = state.status?.S as OpenStatus | 'PROCESSED' | undefined;
  const open = openStatuses.find((s) => s === status);
  const updatedAt = time('updatedAt') ?? time('receivedAt') ?? 0;
  const since = open === 'FAILED' ? (time('firstAttemptAt') ?? time('receivedAt') ?? updatedAt) : updatedAt;
  return {
    ...rest,
    [inboxTableSchema.partitionKey]: { S: recordKey({ consumer, eventId }) },
    ...(open
      ? {
          [inboxTableSchema.openIndex.partitionKey]: {
            S: openKey(consumer, open, openShard(eventId, shards)),
          },
          [inboxTableSchema.openIndex.sortKey]: { S: openSince(since, eventId) },
        }
      : {}),
  };
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
