import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SqlClient } from '../../shared/db/sql-client';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { createRelayInvocation } from '../../shared/outbox/relay-invocation';
import { metricsNamespace, relayMetricNames } from '../../shared/outbox/relay-metrics';
import { RecordingPublisher, seedPending, testSettings } from '../support/outbox-fixtures';
import { openTestDatabase, pgAdapter } from '../support/sql-adapters';

function lambdaContext(remainingMs: () => number) {
  return { awsRequestId: 'req-1', getRemainingTimeInMillis: remainingMs };
}

describe('relay invocation', () => {
  let db: SqlClient;
  let relayDb: SqlClient;
  let cleanup: () => Promise<void>;

  // Fixtures as the schema owner; the relay as its own role.
  beforeAll(async () => {
    const opened = await openTestDatabase();
    db = opened.db;
    const asRelay = await pgAdapter.open(opened.urlAs('relay'));
    relayDb = asRelay.db;
    cleanup = async () => {
      await asRelay.close();
      await opened.close();
    };
  });
  afterAll(() => cleanup());
  beforeEach(async () => {
    await db.query('DELETE FROM outbox');
  });

  function build(publisher = new RecordingPublisher()) {
    const metrics = new Metrics({ namespace: metricsNamespace, serviceName: 'outbox-relay' });
    const logger = new Logger({ serviceName: 'outbox-relay', logLevel: 'SILENT' });
    const run = createRelayInvocation({
      outbox: new OutboxStore(relayDb),
      publisher,
      settings: testSettings({ pollIntervalMs: 5 }),
      logger,
      metrics,
    });
    return { run, metrics, publisher };
  }

  it('a nudge drains what is due and returns without polling out the budget', async () => {
    await seedPending(db, 120);
    const { run, publisher } = build();
    let reads = 0;
    const summary = await run(
      { nudge: true },
      lambdaContext(() => {
        reads++;
        return 50_000;
      }),
    );
    expect(summary).toMatchObject({ published: 120, pending: 0, delivered: 120, owner: 'relay-req-1' });
    expect(publisher.published).toHaveLength(120);
    expect(reads).toBeLessThan(20);
  });

  it('a scheduled run keeps polling until the budget is spent', async () => {
    await seedPending(db, 3);
    const { run } = build();
    const deadline = Date.now() + 300;
    const summary = await run(
      undefined,
      lambdaContext(() => deadline - Date.now()),
    );
    expect(summary.published).toBe(3);
    expect(summary.rounds).toBeGreaterThan(5);
  });

  it('emits pending, oldest age, dead, published, failed and expired-lease metrics as EMF', async () => {
    await seedPending(db, 4);
    await db.query("UPDATE outbox SET created_at = now() - interval '10 minutes'");
    // One row was claimed by a relay that died: its lease has run out.
    await db.query(
      `UPDATE outbox SET lease_until = now() - interval '1 second', claim_owner = 'dead-relay', claim_token = 1
        WHERE event_id = (SELECT event_id FROM outbox ORDER BY created_at LIMIT 1)`,
    );
    let n = 0;
    const { run, metrics } = build(
      new RecordingPublisher((e) => {
        n++;
        if (n === 1)
          return {
            eventId: e.eventId,
            ok: false,
            retryable: false,
            errorCode: 'InvalidArgument',
            errorMessage: 'x',
          };
        if (n === 2)
          return {
            eventId: e.eventId,
            ok: false,
            retryable: true,
            errorCode: 'InternalFailure',
            errorMessage: 'y',
          };
        return undefined;
      }),
    );
    await run(
      { nudge: true },
      lambdaContext(() => 50_000),
    );
    const emf = metrics.serializeMetrics();
    const values = emf as unknown as Record<string, unknown>;
    const definitions = emf._aws.CloudWatchMetrics[0]?.Metrics.map((m) => m.Name) ?? [];
    expect(emf._aws.CloudWatchMetrics[0]?.Namespace).toBe(metricsNamespace);
    for (const name of Object.values(relayMetricNames)) expect(definitions).toContain(name);
    expect(values[relayMetricNames.published]).toBe(2);
    expect(values[relayMetricNames.failed]).toBe(1);
    expect(values[relayMetricNames.newlyDead]).toBe(1);
    expect(values[relayMetricNames.dead]).toBe(1);
    expect(values[relayMetricNames.pending]).toBe(1);
    expect(values[relayMetricNames.expiredLeases]).toBe(1);
    expect(values[relayMetricNames.oldestPendingAge]).toBeGreaterThanOrEqual(600);
  });
});
