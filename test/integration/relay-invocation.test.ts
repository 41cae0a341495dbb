import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SqlClient } from '../../shared/db/sql-client';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import type { RelaySettings } from '../../shared/outbox/relay';
import type { SweepControl } from '../../shared/outbox/relay-invocation';
import { createRelayInvocation } from '../../shared/outbox/relay-invocation';
import { metricsNamespace, relayMetricNames } from '../../shared/outbox/relay-metrics';
import { makeAllDue, RecordingPublisher, seedPending, testSettings } from '../support/outbox-fixtures';
import { openRelayTestDatabase } from '../support/sql-adapters';

function lambdaContext(remainingMs: () => number) {
  return { awsRequestId: 'req-1', getRemainingTimeInMillis: remainingMs };
}

describe('relay invocation', () => {
  let db: SqlClient;
  let relayDb: SqlClient;
  let cleanup: () => Promise<void>;

  // Fixtures as the schema owner; the relay as its own role.
  beforeAll(async () => {
    ({ db, relayDb, close: cleanup } = await openRelayTestDatabase());
  });
  afterAll(() => cleanup());
  beforeEach(async () => {
    await db.query('DELETE FROM outbox');
  });

  function build(
    publisher = new RecordingPublisher(),
    options: { settings?: Partial<RelaySettings>; sweep?: SweepControl } = {},
  ) {
    const metrics = new Metrics({ namespace: metricsNamespace, serviceName: 'outbox-relay' });
    const logger = new Logger({ serviceName: 'outbox-relay', logLevel: 'SILENT' });
    const run = createRelayInvocation({
      outbox: new OutboxStore(relayDb),
      publisher,
      settings: testSettings({ pollIntervalMs: 5, ...options.settings }),
      // Full jitter at its top: a backoff is as long as the settings say, never a lucky short one.
      random: () => 0.999,
      logger,
      metrics,
      sweep: options.sweep,
    });
    return { run, metrics, publisher };
  }

  /** A busy-sweep switch that records what the relay asked of it. */
  function recordingSweep(initiallyBusy = true) {
    let busy = initiallyBusy;
    const calls: boolean[] = [];
    const sweep: SweepControl = {
      async setBusy(next) {
        calls.push(next);
        const changed = next !== busy;
        busy = next;
        return changed;
      },
    };
    return { sweep, calls, busy: () => busy };
  }

  // A failed publish backs off for about an hour (jitter pinned above): longer than any run waits.
  const longBackoff = { backoff: { baseMs: 3_600_000, maxMs: 3_600_000 } };
  /** Throttles the first entry it sees, accepts the rest. */
  const failFirst = () => {
    let failed = false;
    return new RecordingPublisher((e) => {
      if (failed) return undefined;
      failed = true;
      return {
        eventId: e.eventId,
        ok: false,
        retryable: true,
        errorCode: 'ThrottlingException',
        errorMessage: 'slow down',
      };
    });
  };

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

  it('turns the busy sweep on when a run leaves rows pending, and off again once the outbox is empty', async () => {
    await seedPending(db, 3);
    const switched = recordingSweep(false);
    const first = await build(failFirst(), { settings: longBackoff, sweep: switched.sweep }).run(
      undefined,
      lambdaContext(() => 50_000),
    );
    expect(first).toMatchObject({ published: 2, pending: 1 });
    expect(switched.calls).toEqual([true]);
    // The backed-off row is delivered later (made due here); the run ends empty and turns the sweep off.
    await makeAllDue(db);
    const second = await build(new RecordingPublisher(), { sweep: switched.sweep }).run(
      undefined,
      lambdaContext(() => 50_000),
    );
    expect(second).toMatchObject({ published: 1, pending: 0 });
    expect(switched.calls).toEqual([true, false]);
    expect(switched.busy()).toBe(false);
  });

  it('checks the outbox again after turning the busy sweep off: a row committed meanwhile turns it back on', async () => {
    const switched = recordingSweep(true);
    const racing: SweepControl = {
      async setBusy(next) {
        // Another commit lands between the run's last look and the switch.
        if (!next) await seedPending(db, 1);
        return switched.sweep.setBusy(next);
      },
    };
    const summary = await build(new RecordingPublisher(), { sweep: racing }).run(
      undefined,
      lambdaContext(() => 50_000),
    );
    expect(switched.calls).toEqual([false, true]);
    expect(summary.pending).toBe(1);
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
      { settings: longBackoff },
    );
    await run(
      { nudge: true },
      lambdaContext(() => 50_000),
    );
    const emf = metrics.serializeMetrics();
    const values = emf as unknown as Record<string, unknown>;
    const definitions = emf._aws.CloudWatchMetrics[0]?.Metrics.map((m) => m.Name) ?? [];
    expect(emf._aws.CloudWatchMetrics[0]?.Namespace).toBe(metricsNamespace);
    // Gauges always; counters only when not zero (a missing count is none, and is not billed).
    const zero = [relayMetricNames.fencedOut, relayMetricNames.purged];
    for (const name of Object.values(relayMetricNames)) {
      if (zero.includes(name as never)) expect(definitions).not.toContain(name);
      else expect(definitions).toContain(name);
    }
    expect(values[relayMetricNames.published]).toBe(2);
    expect(values[relayMetricNames.failed]).toBe(1);
    expect(values[relayMetricNames.newlyDead]).toBe(1);
    expect(values[relayMetricNames.dead]).toBe(1);
    expect(values[relayMetricNames.pending]).toBe(1);
    expect(values[relayMetricNames.expiredLeases]).toBe(1);
    expect(values[relayMetricNames.oldestPendingAge]).toBeGreaterThanOrEqual(600);
  });
});
