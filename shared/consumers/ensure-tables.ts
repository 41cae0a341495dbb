import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { sleep } from '../db/retry';
import { contentIndexTableSchema } from '../effects/content-index';
import { inboxTableSchema } from '../inbox/dynamo-inbox-store';

/** Table names of the consumer side. */
export interface ConsumerTables {
  readonly inboxTable: string;
  readonly indexTable: string;
}

/**
 * Creates the inbox and content-index tables if they are missing and waits until both are
 * ACTIVE, for the local runtime and tests (on AWS the CDK stack owns them, with TTL on the
 * inbox's `expiresAt`; neither dynalite nor this function has a TTL API). Idempotent: an
 * existing table is left as it is.
 */
export async function ensureTables(
  client: DynamoDBClient,
  tables: ConsumerTables,
  options: { readonly timeoutMs?: number } = {},
): Promise<void> {
  await Promise.all([
    ensureTable(
      client,
      {
        TableName: tables.inboxTable,
        BillingMode: 'PAY_PER_REQUEST',
        KeySchema: [
          { AttributeName: inboxTableSchema.partitionKey, KeyType: 'HASH' },
          { AttributeName: inboxTableSchema.sortKey, KeyType: 'RANGE' },
        ],
        AttributeDefinitions: [
          { AttributeName: inboxTableSchema.partitionKey, AttributeType: 'S' },
          { AttributeName: inboxTableSchema.sortKey, AttributeType: 'S' },
        ],
      },
      options.timeoutMs ?? 30_000,
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

async function ensureTable(client: DynamoDBClient, input: CreateTableCommandInput, timeoutMs: number) {
  try {
    await client.send(new CreateTableCommand(input));
  } catch (err) {
    // Already there (from an earlier run, or a concurrent ensureTables): fine, wait for ACTIVE.
    if ((err as { name?: string } | null)?.name !== 'ResourceInUseException') throw err;
  }
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: input.TableName }));
    if (Table?.TableStatus === 'ACTIVE') return;
    if (Date.now() > deadline) {
      throw new Error(`table ${input.TableName} is still ${Table?.TableStatus} after ${timeoutMs} ms`);
    }
    await sleep(25);
  }
}
