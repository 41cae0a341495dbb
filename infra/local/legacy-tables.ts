import {
  DescribeTableCommand,
  type DynamoDBClient,
  PutItemCommand,
  paginateScan,
} from '@aws-sdk/client-dynamodb';
import type { ConsumerDefinition } from '../../shared/consumers/define-consumer';
import { localTableName, localTablePrefix } from './consumer-resources/local-ports';
import type { LocalCounters } from './local-counters';

/** A consumer's table as a local data directory from before table resources may hold it, and where it goes now. */
export interface LegacyTable {
  readonly consumer: string;
  /** `content-pipeline-<consumer name>`: what the runtime called a consumer's table before. */
  readonly from: string;
  /** The table resource's local table now (`localTableName`). */
  readonly to: string;
  readonly partitionKey: string;
}

/**
 * The table each consumer of `registry` may have from before table resources: the runtime then
 * named a consumer's one table after the consumer, so it is its first table resource's. A name
 * that is a table in use now (`inUse`: the inbox's, another resource's) is no such table.
 */
export function legacyTables(
  registry: readonly ConsumerDefinition[],
  inUse: readonly string[],
): LegacyTable[] {
  return registry.flatMap((consumer) => {
    const table = Object.entries(consumer.resources).find(([, spec]) => spec.kind === 'table');
    const from = `${localTablePrefix}${consumer.name}`;
    if (table === undefined || table[1].kind !== 'table' || inUse.includes(from)) return [];
    const [key, spec] = table;
    return [{ consumer: consumer.name, from, to: localTableName(key), partitionKey: spec.partitionKey }];
  });
}

/**
 * Copies the items of a consumer's table from before table resources into its table now,
 * once: a local data directory from an older version keeps what its consumers wrote. Runs
 * before any consumer does. A put never replaces an item the new table has, so a copy cut short
 * (a crash) is simply run again at the next start: only a completed copy is marked done (a
 * counter of the runtime's own table), and the old table is left as it was. A table of that
 * name keyed otherwise is not the consumer's and is left alone. Returns the items copied, or
 * undefined when there was nothing to copy.
 */
export async function copyLegacyTable(
  client: DynamoDBClient,
  table: LegacyTable,
  counters: LocalCounters,
): Promise<number | undefined> {
  const done = `copied#${table.from}`;
  if (((await counters.read([done]))[done] ?? 0) > 0) return undefined;
  const keys = await keySchemaOf(client, table.from);
  if (keys !== table.partitionKey) return undefined;
  let copied = 0;
  const pages = paginateScan({ client }, { TableName: table.from, ConsistentRead: true });
  for await (const page of pages) {
    for (const item of page.Items ?? []) {
      try {
        await client.send(
          new PutItemCommand({
            TableName: table.to,
            Item: item,
            ConditionExpression: 'attribute_not_exists(#k)',
            ExpressionAttributeNames: { '#k': table.partitionKey },
          }),
        );
        copied++;
      } catch (err) {
        if ((err as { name?: string } | null)?.name !== 'ConditionalCheckFailedException') throw err;
      }
    }
  }
  await counters.add(done, 1);
  return copied;
}

/** The table's key attributes (`taskId`), or undefined when there is no such table. */
async function keySchemaOf(client: DynamoDBClient, table: string): Promise<string | undefined> {
  try {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: table }));
    return (Table?.KeySchema ?? []).map((k) => k.AttributeName).join(',');
  } catch (err) {
    if ((err as { name?: string } | null)?.name === 'ResourceNotFoundException') return undefined;
    throw err;
  }
}
