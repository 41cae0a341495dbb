import { randomUUID } from 'node:crypto';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, inject } from 'vitest';
import { topology } from '../../functions/topology';
import { localTableName } from '../../infra/local/consumer-resources/local-ports';
import { ensureTables } from '../../shared/consumers/ensure-tables';
import type { DynamoEngineInfo } from './dynamo-global-setup';

/**
 * A DynamoDB client for a local engine: fixed region, and dummy credentials (the tests' engines
 * accept any) or, for a runtime's engine, the key pair of its data directory (`runtime.credentials.aws`).
 */
export function dynamoClient(
  endpoint: string,
  credentials: { readonly accessKeyId: string; readonly secretAccessKey: string } = {
    accessKeyId: 'local',
    secretAccessKey: 'local',
  },
): DynamoDBClient {
  return new DynamoDBClient({ endpoint, region: 'us-east-1', credentials: { ...credentials } });
}

/**
 * What a contract suite gets: a client on one engine, and on it a fresh inbox and a fresh table
 * for each table resource of the registry's consumers.
 */
export interface DynamoFixture {
  readonly engine: DynamoEngineInfo['name'];
  readonly endpoint: string;
  readonly client: DynamoDBClient;
  readonly inboxTable: string;
  /** The inbox adapters' options for that table: its name and the project's shard count. */
  readonly inbox: { readonly tableName: string; readonly openIndexShards: number };
  /** The table made for the table resource `key` (`contentIndex`) of a consumer of the registry. */
  table(key: string): string;
}

/** Every engine of the run (global setup), the skipped ones with their reason. */
export function dynamoEngines(): readonly DynamoEngineInfo[] {
  return inject('dynamoEngines');
}

/**
 * Registers `body` once per DynamoDB engine, as `title [engine]`, with its own tables made by
 * ensureTables. An engine that cannot run here (no Java for DynamoDB Local) still shows up:
 * its suite is registered skipped under a name that carries the reason, and the reason is
 * printed, so a skip is never silent.
 */
export function describeEachEngine(title: string, body: (fixture: () => DynamoFixture) => void): void {
  for (const engine of dynamoEngines()) {
    const endpoint = engine.endpoint;
    if (endpoint === undefined) {
      const reason = engine.skipReason ?? 'unavailable';
      console.warn(`[dynamo] skipping "${title}" on ${engine.name}: ${reason}`);
      describe.skip(`${title} [${engine.name}: SKIPPED, ${reason}]`, () =>
        body(() => {
          throw new Error(`${engine.name} is unavailable: ${reason}`);
        }));
      continue;
    }
    describe(`${title} [${engine.name}]`, () => {
      let fixture: DynamoFixture | undefined;
      let tables: string[] = [];
      beforeAll(async () => {
        const suffix = randomUUID().slice(0, 8);
        const client = dynamoClient(endpoint);
        const inboxTable = `inbox-${suffix}`;
        const resourceTables = topology.registry.flatMap((c) =>
          Object.entries(c.resources).flatMap(([key, spec]) =>
            spec.kind === 'table'
              ? [{ key, tableName: `${localTableName(key)}-${suffix}`, partitionKey: spec.partitionKey }]
              : [],
          ),
        );
        await ensureTables(
          client,
          { inboxTable, resourceTables },
          { openIndexShards: topology.inbox.openIndexShards },
        );
        tables = [inboxTable, ...resourceTables.map((t) => t.tableName)];
        const byKey = new Map(resourceTables.map((t) => [t.key, t.tableName]));
        fixture = {
          engine: engine.name,
          endpoint,
          client,
          inboxTable,
          inbox: { tableName: inboxTable, openIndexShards: topology.inbox.openIndexShards },
          table: (key) => {
            const name = byKey.get(key);
            if (name === undefined) throw new Error(`no consumer of the registry declares a table ${key}`);
            return name;
          },
        };
      });
      afterAll(async () => {
        if (!fixture) return;
        for (const table of tables) {
          await fixture.client.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined);
        }
        fixture.client.destroy();
      });
      body(() => {
        if (!fixture) throw new Error('the DynamoDB fixture is only ready inside tests and hooks');
        return fixture;
      });
    });
  }
}
