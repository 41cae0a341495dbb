import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalPort } from '../../infra/local/consumer-resources/local-ports';
import { FaultInjector, noFaults } from '../../infra/local/faults';
import type { BusEvent } from '../../infra/local/local-bus';
import { type LocalConsumers, startLocalConsumers } from '../../infra/local/local-consumers';
import type { FunctionRole } from '../../shared/db/roles';
import type { QueryResult, Row, SqlClient, SqlParams } from '../../shared/db/sql-client';
import { translate } from '../fixtures/consumers/translate/consumer';
import { untranslatableTitle } from '../fixtures/consumers/translate/effect';
import { dynamoClient } from '../support/dynamo';
import { approvedRow, busEvent } from '../support/dynamo-consumer-fixtures';
import { tempDataDir } from '../support/pipeline-client';
import { topologyAdding } from '../support/topology-variants';

/**
 * The local runtime's consumers come from the topology's registry alone: a consumer added there
 * (a fixture with a table, a topic, a bucket and a database) runs with its folder's effect over
 * stand-ins made from its declaration, is counted by its declared counters, and is held to its
 * own policy; nothing in the runtime names it.
 */
describe('local consumers of a registry with a consumer the project does not have', () => {
  let dir: string;
  let consumers: LocalConsumers;
  const wrapped: string[] = [];
  const roles: FunctionRole[] = [];
  // The task the fixture reads, as its database role would find it.
  const idOf = (param: unknown) =>
    String(typeof param === 'object' && param !== null && 'value' in param ? param.value : param);
  const tasks: SqlClient = {
    query: async <R extends Row>(_sql: string, params?: SqlParams) =>
      ({
        // The id as the effect passes it: a typed UUID parameter.
        rows: [{ title: idOf(params?.taskId).startsWith('0') ? untranslatableTitle : 'Spring launch' }],
      }) as unknown as QueryResult<R>,
    transaction: async () => {
      throw new Error('the fixture runs no transaction');
    },
    close: async () => undefined,
  };

  beforeAll(async () => {
    dir = tempDataDir('local-consumers-registry-');
    consumers = await startLocalConsumers({
      dataDir: dir,
      topology: topologyAdding(translate),
      dbAs: (role) => {
        roles.push(role);
        return tasks;
      },
      engine: 'dynalite',
      faults: new FaultInjector(noFaults),
      log: () => undefined,
      wrapPort: (consumer: string, key: string, built: LocalPort) => {
        wrapped.push(`${consumer}.${key}: ${built.kind}`);
        return built;
      },
    });
  });

  afterAll(async () => {
    await consumers?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('makes every declared resource a port, the database as its role', () => {
    expect(wrapped).toEqual([
      'index.contentIndex: table',
      'notify.notifications: topic',
      'archive.archive: bucket',
      'archive.tasks: database',
      'translate.translations: table',
      'translate.translated: topic',
      'translate.renditions: bucket',
      'translate.tasks: database',
    ]);
    expect(roles).toEqual(['taskReader', 'taskReader']);
  });

  it('runs the added consumer over its stand-ins and counts it by its own counters', async () => {
    const row = approvedRow({ taskId: 'f1e0ad8c-4b7d-4c7a-9a3e-0c3c2b6f0d11' });
    const result = await consumers.invoke('translate', busEvent(row) as unknown as BusEvent);
    expect(result).toMatchObject({
      consumer: 'translate',
      status: 'processed',
      effect: { stored: 'written', announced: 'sent' },
    });

    const client = dynamoClient(consumers.dynamo.endpoint);
    try {
      const { Item } = await client.send(
        new GetItemCommand({
          TableName: 'content-pipeline-translations',
          Key: { taskId: { S: row.aggregateId } },
          ConsistentRead: true,
        }),
      );
      expect(Item).toMatchObject({ state: { S: 'done' }, title: { S: '[fr] Spring launch' } });
    } finally {
      client.destroy();
    }
    const announced = readFileSync(join(dir, 'effects', 'translated.jsonl'), 'utf8')
      .trim()
      .split('\n');
    expect(announced.map((l) => JSON.parse(l))).toEqual([
      expect.objectContaining({ id: row.eventId, subject: 'Translated: Spring launch' }),
    ]);
    expect(readFileSync(join(dir, 'effects', 'renditions', row.aggregateId, 'v2.txt'), 'utf8')).toBe(
      '[fr] Spring launch',
    );

    const expected = {
      indexDocuments: 0,
      notificationsSent: 0,
      archivedObjects: 0,
      translationsDone: 1,
      translationsAnnounced: 1,
      renditionsStored: 1,
    };
    expect(await consumers.effectCounts()).toEqual(expected);
    expect(await consumers.countEffects()).toEqual(expected);
    expect(await consumers.processedCount('translate')).toBe(1);

    // A second delivery is a duplicate: nothing more done, nothing more counted.
    await expect(consumers.invoke('translate', busEvent(row) as unknown as BusEvent)).resolves.toMatchObject({
      status: 'duplicate',
    });
    expect(await consumers.effectCounts()).toEqual(expected);
  });

  it('holds the added consumer to its own policy: its one permanent failure is DEAD', async () => {
    const row = approvedRow({ taskId: '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d' });
    const result = await consumers.invoke('translate', busEvent(row) as unknown as BusEvent);
    expect(result).toMatchObject({ status: 'dead', attempt: 1 });
    expect(result).toHaveProperty('reason', expect.stringContaining('no translation'));
  });

  it('refuses a consumer the registry does not have', async () => {
    await expect(
      consumers.invoke('summarize', busEvent(approvedRow()) as unknown as BusEvent),
    ).rejects.toThrow(/no consumer summarize here/);
  });
});
