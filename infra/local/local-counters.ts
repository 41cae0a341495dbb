import { BatchGetItemCommand, type DynamoDBClient, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { ensureTable } from '../../shared/consumers/ensure-tables';

/**
 * The local runtime's counters, for its status page: one item per counter in a table of the
 * runtime's own (not a table of the AWS stack), one `ADD` per change, read with one
 * BatchGetItem whatever the history. What they count cannot be read cheaply where it lives:
 * the inbox is keyed by event and its index holds only open records, the consumers' tables,
 * buckets and topics would have to be scanned, listed and read. Each count is added after the thing it counts
 * happened, so a SIGKILL in between loses that one count: the figures are for watching; the
 * effects themselves and the inbox's open counts are what prove a delivery.
 */
export class LocalCounters {
  private constructor(
    private readonly client: DynamoDBClient,
    private readonly table: string,
    /** The table was made just now: a data directory from before the counters. */
    readonly created: boolean,
  ) {}

  /** The counters in `table` on the local engine, made if missing. */
  static async open(client: DynamoDBClient, table: string): Promise<LocalCounters> {
    const created = await ensureTable(
      client,
      {
        TableName: table,
        BillingMode: 'PAY_PER_REQUEST',
        KeySchema: [{ AttributeName: 'counter', KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: 'counter', AttributeType: 'S' }],
      },
      30_000,
    );
    return new LocalCounters(client, table, created);
  }

  /** Adds `delta` (may be negative) to `name` (atomic: concurrent adds each count). */
  async add(name: string, delta = 1): Promise<void> {
    if (delta === 0) return;
    await this.client.send(
      new UpdateItemCommand({
        TableName: this.table,
        Key: { counter: { S: name } },
        UpdateExpression: 'ADD #n :delta',
        ExpressionAttributeNames: { '#n': 'n' },
        ExpressionAttributeValues: { ':delta': { N: String(delta) } },
      }),
    );
  }

  /** The values of `names` (0 for a counter never added to), in one request. */
  async read<N extends string>(names: readonly N[]): Promise<Record<N, number>> {
    const out = Object.fromEntries(names.map((n) => [n, 0])) as Record<N, number>;
    if (names.length === 0) return out;
    const { Responses } = await this.client.send(
      new BatchGetItemCommand({
        RequestItems: {
          [this.table]: { Keys: names.map((n) => ({ counter: { S: n } })), ConsistentRead: true },
        },
      }),
    );
    for (const item of Responses?.[this.table] ?? []) {
      const name = item.counter?.S as N | undefined;
      if (name !== undefined && name in out) out[name] = Number(item.n?.N ?? 0);
    }
    return out;
  }
}
