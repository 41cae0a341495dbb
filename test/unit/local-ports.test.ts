import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { beforeEach, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import type { FilePublisher } from '../../infra/local/consumer-resources/file-publisher';
import { FileWriteOnceStore } from '../../infra/local/consumer-resources/file-write-once-store';
import {
  checkLocalPlaces,
  localPort,
  localResourceTables,
  localTableName,
} from '../../infra/local/consumer-resources/local-ports';
import { legacyTables } from '../../infra/local/legacy-tables';
import { defineConsumer } from '../../shared/consumers/define-consumer';
import { bucket, database, table, topic } from '../../shared/consumers/resources';
import type { FunctionRole } from '../../shared/db/roles';
import type { SqlClient } from '../../shared/db/sql-client';
import { eventTypes } from '../../shared/events/event-types';

// Where the local runtime keeps each kind of consumer resource: named by the resource's key, so
// a consumer added to the registry gets its stand-ins with no line of the runtime changed.

const folder = new URL('.', import.meta.url);
const fixture = defineConsumer({
  name: 'translate',
  description: 'Translates each approved version',
  subscribes: [eventTypes.approved],
  folder,
  resources: {
    translations: table({
      description: 'd',
      partitionKey: 'taskId',
      perEvent: { reads: 0, writes: 1, itemKb: 1 },
    }),
    glossaryTerms: table({
      description: 'd',
      partitionKey: 'term',
      perEvent: { reads: 1, writes: 0, itemKb: 1 },
    }),
    translated: topic({ description: 'd', displayName: 'Translations', perEvent: { publishes: 1 } }),
    renditions: bucket({ description: 'd', perEvent: { puts: 1 } }),
    tasks: database({ description: 'd', role: 'taskReader', perEvent: { calls: 1 } }),
  },
});

let effectsDir: string;
beforeEach(() => {
  effectsDir = mkdtempSync(join(tmpdir(), 'local-ports-'));
  return () => rmSync(effectsDir, { recursive: true, force: true });
});

describe('the local stand-ins of consumer resources', () => {
  it('names a table after its key, kebab-cased under the runtime prefix', () => {
    expect(localTableName('contentIndex')).toBe('content-pipeline-content-index');
    expect(localTableName('translations')).toBe('content-pipeline-translations');
    expect(localResourceTables([fixture])).toEqual([
      { tableName: 'content-pipeline-translations', partitionKey: 'taskId' },
      { tableName: 'content-pipeline-glossary-terms', partitionKey: 'term' },
    ]);
  });

  it('makes each kind its port: a table on the local DynamoDB, a topic a JSON-lines file, a bucket a directory, the database as its role', () => {
    const client = {} as DynamoDBClient;
    const roles: FunctionRole[] = [];
    const db = {} as SqlClient;
    const hosts = {
      client,
      effectsDir,
      dbAs: (role: FunctionRole) => {
        roles.push(role);
        return db;
      },
    };
    const { resources } = fixture;
    expect(localPort('translations', resources.translations, hosts)).toEqual({
      kind: 'table',
      port: { client, tableName: 'content-pipeline-translations' },
    });
    const topicPort = localPort('translated', resources.translated, hosts);
    expect(topicPort.kind).toBe('topic');
    expect((topicPort.port as FilePublisher).path).toBe(join(effectsDir, 'translated.jsonl'));
    const bucketPort = localPort('renditions', resources.renditions, hosts);
    expect(bucketPort.port).toBeInstanceOf(FileWriteOnceStore);
    expect((bucketPort.port as FileWriteOnceStore).root).toBe(join(effectsDir, 'renditions'));
    expect(localPort('tasks', resources.tasks, hosts)).toEqual({ kind: 'database', port: db });
    expect(roles).toEqual(['taskReader']);
  });

  it("keeps the project's effects where a data directory from before has them", () => {
    const places = topology.registry.flatMap((c) =>
      Object.entries(c.resources).flatMap(([key, spec]) =>
        spec.kind === 'table'
          ? [localTableName(key)]
          : spec.kind === 'database'
            ? []
            : [`${spec.kind} ${key}`],
      ),
    );
    // effects/notifications.jsonl and effects/archive/, as the runtime wrote them before.
    expect(places).toEqual(
      expect.arrayContaining(['content-pipeline-content-index', 'topic notifications', 'bucket archive']),
    );
  });

  it('refuses two consumers whose resources would be one table or file, or a table of the runtime', () => {
    const twin = defineConsumer({
      ...fixture,
      name: 'translate-again',
      resources: { renditions: bucket({ description: 'd', perEvent: { puts: 1 } }) },
    });
    expect(() => checkLocalPlaces([fixture], ['content-pipeline-inbox'])).not.toThrow();
    expect(() => checkLocalPlaces([fixture, twin], [])).toThrow(
      /translate-again's bucket renditions would be the bucket renditions of translate/,
    );
    expect(() => checkLocalPlaces([fixture], ['content-pipeline-translations'])).toThrow(
      /translate's table translations would be the table content-pipeline-translations of the local runtime/,
    );
  });

  it("finds a consumer's table from before table resources under its name, for its first table only", () => {
    expect(legacyTables([fixture], [])).toEqual([
      {
        consumer: 'translate',
        from: 'content-pipeline-translate',
        to: 'content-pipeline-translations',
        partitionKey: 'taskId',
      },
    ]);
    // A name the runtime uses now is no table from before.
    expect(legacyTables([fixture], ['content-pipeline-translate'])).toEqual([]);
    const noTable = defineConsumer({ ...fixture, resources: {} });
    expect(legacyTables([noTable], [])).toEqual([]);
  });
});
