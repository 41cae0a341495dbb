import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { FaultInjector, noFaults } from '../../infra/local/faults';
import type { BusEvent } from '../../infra/local/local-bus';
import { type LocalConsumers, startLocalConsumers } from '../../infra/local/local-consumers';
import type { SqlClient } from '../../shared/db/sql-client';
import { openShard } from '../../shared/inbox/dynamo-inbox-table';
import { openCounts } from '../../shared/inbox/inbox-ops';
import { approvedRow, busEvent } from '../support/dynamo-consumer-fixtures';
import { tempDataDir } from '../support/pipeline-client';

// The notify consumer and poison deliveries never reach the database.
const noDatabase = {} as SqlClient;

describe('the local runtime’s consumers and its ops reads share one inbox shape', () => {
  let dir: string;
  let consumers: LocalConsumers;

  beforeAll(async () => {
    dir = tempDataDir('local-consumers-');
    consumers = await startLocalConsumers({
      dataDir: dir,
      dbAs: () => noDatabase,
      engine: 'dynalite',
      faults: new FaultInjector(noFaults),
      log: () => undefined,
    });
  });

  afterAll(async () => {
    await consumers?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('what the consumers write, the ops reads find on every shard, and the processed events are counted', async () => {
    const events = Array.from({ length: 12 }, () => busEvent(approvedRow()));
    // Spread over shards a store with another shard count would not read.
    const ids = events.map((e) => String(e.detail.id));
    expect(new Set(ids.map((id) => openShard(id, topology.inbox.openIndexShards))).size).toBeGreaterThan(
      topology.inbox.localOpenIndexShards,
    );
    for (const event of events) await consumers.invoke('notify', event as unknown as BusEvent);
    expect(await consumers.processedCount('notify')).toBe(12);
    // A second delivery of each is a duplicate: nothing more is counted.
    for (const event of events) await consumers.invoke('notify', event as unknown as BusEvent);
    expect(await consumers.processedCount('notify')).toBe(12);

    const poison = events.map((e) => ({ ...e, detail: { ...e.detail, subject: 'not-the-task' } }));
    for (const event of poison) await consumers.invoke('notify', event as unknown as BusEvent);
    expect(openCounts(await consumers.inbox.openFigures('notify'))).toEqual({
      PROCESSING: 0,
      FAILED: 0,
      DEAD: 12,
    });
    const listed = await consumers.inbox.listDead('notify', { limit: 100 });
    expect(listed.records).toHaveLength(12);
    expect(await consumers.processedCount('notify')).toBe(12);
  });
});
