import {
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  paginateQuery,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { inboxTableSchema, openKeys, openStatuses } from '../../shared/inbox/dynamo-inbox-table';

const { partitionKey: pk, openIndex } = inboxTableSchema;

/**
 * Drops the operator's index entries that no inbox record stands behind, after a local run that
 * did not stop cleanly. dynalite writes an item's index entries and then the item, in separate
 * LevelDB writes (node_modules/dynalite/db/index.js `updateIndexes`, actions/putItem.js): a
 * SIGKILL between them can leave an entry for a record that never became what the entry says
 * (a begin whose record was never written, then written by the retry with a later `openSince`).
 * Such an entry counts as an attempt in flight forever and keeps `inbox-oldest-lease` in ALARM.
 * DynamoDB keeps a table's global secondary indexes in step with its items, so only the local
 * engine needs this; it runs before any consumer does. Neither engine lets a caller delete an
 * index entry, so the record is written once with the entry's keys (the engine overwrites the
 * entry and drops the record's own) and then put back as it was (the engine drops the entry).
 * Reads are bounded by the index's open entries of `consumers` (its Queries), never a scan of
 * the table.
 */
export async function repairOpenIndex(
  client: DynamoDBClient,
  table: string,
  shards: number,
  consumers: readonly string[],
): Promise<number> {
  let repaired = 0;
  for (const consumer of consumers) {
    for (const status of openStatuses) {
      for (const key of openKeys(consumer, status, shards)) {
        const pages = paginateQuery(
          { client },
          {
            TableName: table,
            IndexName: openIndex.name,
            KeyConditionExpression: '#k = :k',
            ExpressionAttributeNames: { '#k': openIndex.partitionKey },
            ExpressionAttributeValues: { ':k': { S: key } },
          },
        );
        for await (const page of pages) {
          for (const entry of page.Items ?? []) {
            const id = entry[pk];
            const since = entry[openIndex.sortKey];
            if (id === undefined || since === undefined) continue;
            const { Item: item } = await client.send(
              new GetItemCommand({ TableName: table, Key: { [pk]: id }, ConsistentRead: true }),
            );
            if (item?.[openIndex.partitionKey]?.S === key && item[openIndex.sortKey]?.S === since.S) continue;
            await client.send(
              new UpdateItemCommand({
                TableName: table,
                Key: { [pk]: id },
                UpdateExpression: 'SET #k = :k, #s = :s',
                ExpressionAttributeNames: { '#k': openIndex.partitionKey, '#s': openIndex.sortKey },
                ExpressionAttributeValues: { ':k': { S: key }, ':s': since },
              }),
            );
            if (item === undefined) {
              await client.send(new DeleteItemCommand({ TableName: table, Key: { [pk]: id } }));
            } else {
              const ownKey = item[openIndex.partitionKey];
              const ownSince = item[openIndex.sortKey];
              await client.send(
                new UpdateItemCommand({
                  TableName: table,
                  Key: { [pk]: id },
                  ...(ownKey && ownSince
                    ? {
                        UpdateExpression: 'SET #k = :k, #s = :s',
                        ExpressionAttributeValues: { ':k': ownKey, ':s': ownSince },
                      }
                    : { UpdateExpression: 'REMOVE #k, #s' }),
                  ExpressionAttributeNames: { '#k': openIndex.partitionKey, '#s': openIndex.sortKey },
                }),
              );
            }
            repaired++;
          }
        }
      }
    }
  }
  return repaired;
}
