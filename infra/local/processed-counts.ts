import { type DynamoDBClient, GetItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { ensureTable } from '../../shared/consumers/ensure-tables';
import type { ConsumerName } from '../../shared/topology';

/**
 * How many events each consumer has processed, for the local status page: a maintained
 * counter, one item per consumer, one `ADD` after each invocation that completed its record.
 * The inbox cannot count it: its records are keyed by event, and its index holds only what is
 * open (counting a consumer's history would cost as much as the history). A SIGKILL between a
 * record's completion and its count loses that one count, and an inbox from before the counter
 * existed starts it at zero: the figure is for watching; the effects and the inbox's open
 * counts are what prove a delivery. (On AWS the consumers' `processed` metric is this figure.)
 */
export class ProcessedCounts {
  private constructor(
    private readonly client: DynamoDBClient,
    private readonly table: string,
  ) {}

  /** The counters in `table` on the local engine, made if missing. */
  static async open(client: DynamoDBClient, table: string): Promise<ProcessedCounts> {
    await ensureTable(
      client,
      {
        TableName: table,
        BillingMode: 'PAY_PER_REQUEST',
        KeySchema: [{ AttributeName: 'counter', KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: 'counter', AttributeType: 'S' }],
      },
      30_000,
    );
    return new ProcessedCounts(client, table);
  }

  /** Counts one more processed event of `consumer` (atomic: concurrent invocations each count). */
  async add(consumer: ConsumerName): Promise<void> {
    await this.client.send(
      new UpdateItemCommand({
        TableName: this.table,
        Key: { counter: { S: `processed#${consumer}` } },
        UpdateExpression: 'ADD #n :one',
        ExpressionAttributeNames: { '#n': 'n' },
        ExpressionAttributeValues: { ':one': { N: '1' } },
      }),
    );
  }

  /** The events `consumer` has processed so far. */
  async read(consumer: ConsumerName): Promise<number> {
    const { Item } = await this.client.send(
      new GetItemCommand({
        TableName: this.table,
        Key: { counter: { S: `processed#${consumer}` } },
        ConsistentRead: true,
      }),
    );
    return Number(Item?.n?.N ?? 0);
  }
}
