import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { PgSqlClient } from '../../shared/db/pg-client';
import type { SqlClient } from '../../shared/db/sql-client';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { seedPending } from '../support/outbox-fixtures';
import { dataApiAdapter } from '../support/sql-adapters';

// Through the Data API-compatible endpoint, which refuses a response over 1 MiB as the Data API
// does: the claim's estimate of each row's bytes besides its payload must not undercount them,
// and must not overcount them so far that a default batch of small events is cut by bytes.
describe('the size of a claim through the RDS Data API', () => {
  let database: TestDatabase;
  let owner: SqlClient;
  let relayDb: { db: SqlClient; close: () => Promise<void> };

  beforeAll(async () => {
    database = await createTestDatabase();
    owner = new PgSqlClient({ connectionString: database.url });
    relayDb = await dataApiAdapter.open(database.urlAs('relay'), 'relay');
  });
  afterAll(async () => {
    await relayDb.close();
    await owner.close();
    await database.drop();
  });

  it('a claim cut only by bytes, of the smallest rows, fits the 1 MiB response and holds a default batch', async () => {
    await seedPending(owner, 3_000);
    const store = new OutboxStore(relayDb.db);

    const { claimed, more } = await store.claim('r', {
      rows: 3_000,
      leaseSeconds: 30,
      bytes: topology.relay.claimBytes,
      maxUnsettledClaims: topology.relay.maxUnsettledClaims,
    });

    expect(more).toBe(true);
    expect(claimed.length).toBeGreaterThanOrEqual(topology.relay.claimBatchSize);
    expect(claimed.length).toBeLessThan(3_000);
  });
});
