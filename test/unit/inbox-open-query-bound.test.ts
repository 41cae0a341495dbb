import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';

const dynamo = mockClient(DynamoDBDocumentClient);

/**
 * Every Query is held until the test has seen how many are in flight: the bound is read at the
 * point where the most requests could be waiting, not at a moment in time.
 */
function holdQueries() {
  let inFlight = 0;
  let most = 0;
  let sent = 0;
  const held: Array<() => void> = [];
  dynamo.on(QueryCommand).callsFake(
    () =>
      new Promise((resolve) => {
        inFlight++;
        sent++;
        most = Math.max(most, inFlight);
        held.push(() => {
          inFlight--;
          resolve({ Items: [], Count: 0 });
        });
      }),
  );
  /** Releases what is held until the reads settle. */
  const drain = async (reads: Promise<unknown>) => {
    let settled = false;
    void reads.finally(() => {
      settled = true;
    });
    while (!settled) {
      for (const release of held.splice(0)) release();
      await new Promise((r) => setImmediate(r));
    }
    return reads;
  };
  return { drain, most: () => most, sent: () => sent };
}

describe("the operator's index reads: a bounded number of Queries in flight", () => {
  afterEach(() => {
    dynamo.reset();
  });

  it('three consumers read at once (the gauges) never have more than 16 Queries in flight', async () => {
    const queries = holdQueries();
    const store = new DynamoInboxOps(new DynamoDBClient({ region: 'us-east-1', maxAttempts: 1 }), {
      tableName: 'inbox',
      openIndexShards: topology.inbox.openIndexShards,
    });
    const figures = await queries.drain(
      Promise.all(['index', 'notify', 'archive'].map((c) => store.openFigures(c))),
    );
    // Every shard of every status of every consumer was read, none dropped by the bound...
    expect(queries.sent()).toBe(3 * 3 * topology.inbox.openIndexShards);
    expect(figures).toHaveLength(3);
    // ...but never more at once than the bound (unbounded, all 288 went out together).
    expect(queries.most()).toBe(16);
  });

  it('the bound is an option', async () => {
    const queries = holdQueries();
    const store = new DynamoInboxOps(new DynamoDBClient({ region: 'us-east-1', maxAttempts: 1 }), {
      tableName: 'inbox',
      openQueryConcurrency: 3,
      openIndexShards: topology.inbox.openIndexShards,
    });
    await queries.drain(store.openFigures('index'));
    expect(queries.most()).toBe(3);
    expect(
      () =>
        new DynamoInboxOps(new DynamoDBClient({}), {
          tableName: 'inbox',
          openQueryConcurrency: 0,
          openIndexShards: topology.inbox.openIndexShards,
        }),
    ).toThrow(/concurrency/);
  });
});
