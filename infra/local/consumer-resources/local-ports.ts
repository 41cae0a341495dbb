import { join } from 'node:path';
import { type AttributeValue, type DynamoDBClient, paginateScan } from '@aws-sdk/client-dynamodb';
import type { ConsumerDefinition } from '../../../shared/consumers/define-consumer';
import type { Publisher, ResourceSpec, TablePort, WriteOnceStore } from '../../../shared/consumers/resources';
import type { FunctionRole } from '../../../shared/db/roles';
import type { SqlClient } from '../../../shared/db/sql-client';
import { FilePublisher } from './file-publisher';
import { FileWriteOnceStore } from './file-write-once-store';

/**
 * Where the local runtime keeps each consumer resource, by its key (the key names it, as the
 * key names the construct on AWS): a table `searchEntries` is `content-pipeline-search-entries`
 * on the local DynamoDB, a topic `alerts` is `<data>/effects/alerts.jsonl`, a bucket `exports`
 * is `<data>/effects/exports/`, and a database is the runtime's PostgreSQL as the resource's
 * role.
 */

/** The prefix of every table the local runtime makes (the inbox's, its counters', each table resource's). */
export const localTablePrefix = 'content-pipeline-';

/** The local table of a table resource: `searchEntries` -> `content-pipeline-search-entries`. */
export function localTableName(key: string): string {
  return `${localTablePrefix}${key.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase()}`;
}

/** What the local stand-ins are made on. */
export interface LocalResourceHosts {
  /** The local DynamoDB, as the consumers reach it. */
  readonly client: DynamoDBClient;
  /** `<data>/effects`: the topics' files and the buckets' directories. */
  readonly effectsDir: string;
  /** The runtime's database client of each function role. */
  readonly dbAs: (role: FunctionRole) => SqlClient;
}

/** A resource's port as the local runtime made it, with its kind (what a wrapper tells ports apart by). */
export type LocalPort =
  | { readonly kind: 'table'; readonly port: TablePort }
  | { readonly kind: 'topic'; readonly port: Publisher }
  | { readonly kind: 'bucket'; readonly port: WriteOnceStore }
  | { readonly kind: 'database'; readonly port: SqlClient };

const topicFile = (hosts: Pick<LocalResourceHosts, 'effectsDir'>, key: string) =>
  new FilePublisher(join(hosts.effectsDir, `${key}.jsonl`));
const bucketDirectory = (hosts: Pick<LocalResourceHosts, 'effectsDir'>, key: string) =>
  new FileWriteOnceStore(join(hosts.effectsDir, key));

/** The local stand-in of resource `key`, as its effect reaches it. */
export function localPort(key: string, spec: ResourceSpec, hosts: LocalResourceHosts): LocalPort {
  switch (spec.kind) {
    case 'table':
      return { kind: 'table', port: { client: hosts.client, tableName: localTableName(key) } };
    case 'topic':
      return { kind: 'topic', port: topicFile(hosts, key) };
    case 'bucket':
      return { kind: 'bucket', port: bucketDirectory(hosts, key) };
    case 'database':
      return { kind: 'database', port: hosts.dbAs(spec.role) };
  }
}

/**
 * What resource `key` holds, counted where it lives: a table's items (those whose attributes
 * equal `where`, by a scan), a bucket's objects (a listing), a topic's messages (a read of its
 * file). Its cost grows with history: for tests and the recount after an unclean stop only.
 */
export async function countLocalResource(
  key: string,
  spec: ResourceSpec,
  where: Readonly<Record<string, string>>,
  hosts: Pick<LocalResourceHosts, 'client' | 'effectsDir'>,
): Promise<number> {
  switch (spec.kind) {
    case 'table':
      return countItems(hosts.client, localTableName(key), where);
    case 'topic':
      return (await topicFile(hosts, key).read()).length;
    case 'bucket':
      return bucketDirectory(hosts, key).count();
    case 'database':
      throw new Error(`resource ${key} is a database: defineConsumer lets no counter count one`);
  }
}

async function countItems(
  client: DynamoDBClient,
  tableName: string,
  where: Readonly<Record<string, string>>,
): Promise<number> {
  const conditions = Object.entries(where);
  const names: Record<string, string> = {};
  const values: Record<string, AttributeValue> = {};
  for (const [i, [attribute, value]] of conditions.entries()) {
    names[`#a${i}`] = attribute;
    values[`:v${i}`] = { S: value };
  }
  const filter =
    conditions.length === 0
      ? {}
      : {
          FilterExpression: conditions.map((_, i) => `#a${i} = :v${i}`).join(' AND '),
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
        };
  let count = 0;
  for await (const page of paginateScan({ client }, { TableName: tableName, Select: 'COUNT', ...filter }))
    count += page.Count ?? 0;
  return count;
}

/** Every table resource of `registry`, as ensureTables makes them. */
export function localResourceTables(
  registry: readonly ConsumerDefinition[],
): { readonly tableName: string; readonly partitionKey: string }[] {
  return registry.flatMap((consumer) =>
    Object.entries(consumer.resources).flatMap(([key, spec]) =>
      spec.kind === 'table' ? [{ tableName: localTableName(key), partitionKey: spec.partitionKey }] : [],
    ),
  );
}

/**
 * Throws when two resources of `registry` would be one stand-in here: a key names the local
 * table, file or directory, so two consumers' tables (or topics, or buckets) of one key would
 * share it, as would a table named like one of the runtime's own (`reservedTables`).
 */
export function checkLocalPlaces(
  registry: readonly ConsumerDefinition[],
  reservedTables: readonly string[],
): void {
  const owners = new Map<string, string>();
  for (const table of reservedTables) owners.set(`table ${table}`, 'the local runtime');
  const problems: string[] = [];
  for (const consumer of registry)
    for (const [key, spec] of Object.entries(consumer.resources)) {
      if (spec.kind === 'database') continue;
      const place = spec.kind === 'table' ? `table ${localTableName(key)}` : `${spec.kind} ${key}`;
      const owner = owners.get(place);
      if (owner !== undefined)
        problems.push(`${consumer.name}'s ${spec.kind} ${key} would be the ${place} of ${owner}`);
      else owners.set(place, consumer.name);
    }
  if (problems.length > 0)
    throw new Error(
      `resource keys name the local runtime's tables and files, so they must differ: ${problems.join('; ')}`,
    );
}
