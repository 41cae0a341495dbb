import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SqlClient } from '../../shared/db/sql-client';
import type { OutboundEvent } from '../../shared/events/cloud-event';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import type { EventPublisher, PublishOutcome } from '../../shared/outbox/publisher';
import { RelayCircuitStore } from '../../shared/outbox/relay-circuit';
import {
  createRelayInvocation,
  type RelaySummary,
  type RelayWakeups,
  type WakeReason,
} from '../../shared/outbox/relay-invocation';
import { RelayLeaseStore } from '../../shared/outbox/relay-lease';
import { metricsNamespace, relayMetricNames } from '../../shared/outbox/relay-metrics';
import type { RelaySettings } from '../../shared/topology';
import { RecordingPublisher, seedPending, statusCounts, testSettings } from '../support/outbox-fixtures';
import { openRelayTestDatabase } from '../support/sql-adapters';

let requests = 0;
function lambdaContext(remainingMs: () => number = () => 50_000) {
  return { awsRequestId: `req-${++requests}`, getRemainingTimeInMillis: remainingMs };
}

/** Wake-ups the relay asked for, in order. */
function recordingWakeups(): RelayWakeups & { calls: [number, WakeReason][] } {
  const calls: [number, WakeReason][] = [];
  return {
    calls,
    async wakeAfter(ms, reason) {
      calls.push([ms, reason]);
    },
  };
}

/** A publisher that holds every call until `open()`, and says when the first one arrived. */
function gatedPublisher() {
  const inner = new RecordingPublisher();
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  let arrived!: () => void;
  const first = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const publisher: EventPublisher & { published: OutboundEvent[] } = {
    published: inner.published,
    async publish(events): Promise<PublishOutcome[]> {
      arrived();
      await gate;
      return inner.publish(events);
    },
  };
  return { publisher, open, first };
}

const ran = (s: RelaySummary) => !('skipped' in s);

describe('relay invocation', () => {
  let db: SqlClient;
  let relayDb: SqlClient;
  let tasksUrl: string;
  let cleanup: () => Promise<void>;

  // Fixtures as the schema owner; the relay as its own role.
  beforeAll(async () => {
    ({ db, relayDb, tasksUrl, close: cleanup } = await openRelayTestDatabase());
  });
  afterAll(() => cleanup());
  beforeEach(async () => {
    await db.query('DELETE FROM outbox');
    await db.query('UPDATE relay_lease SET owner = NULL, lease_until = NULL');
    await db.query(
      'UPDATE relay_circuit SET opened_at = NULL, probe_at = NULL, failed_probes = 0, cause = NULL',
    );
  });

  function build(
    publisher: EventPublisher = new RecordingPublisher(),
    options: {
      settings?: Partial<RelaySettings>;
      wakeups?: ReturnType<typeof recordingWakeups>;
      lease?: Partial<RelayLeaseStore>;
    } = {},
  ) {
    const metrics = new Metrics({ namespace: metricsNamespace, serviceName: 'outbox-relay' });
    const logger = new Logger({ serviceName: 'outbox-relay', logLevel: 'SILENT' });
    const leaseStore = new RelayLeaseStore(relayDb);
    const lease = {
      acquire: leaseStore.acquire.bind(leaseStore),
      renew: leaseStore.renew.bind(leaseStore),
      release: leaseStore.release.bind(leaseStore),
      writersInFlight: leaseStore.writersInFlight.bind(leaseStore),
      ...options.lease,
    };
    const wakeups = options.wakeups ?? recordingWakeups();
    const run = createRelayInvocation({
      outbox: new OutboxStore(relayDb),
      lease,
      circuit: new RelayCircuitStore(relayDb),
      publisher,
      settings: testSettings({ pollIntervalMs: 5, ...options.settings }),
      // Full jitter at its top: a backoff is as long as the settings say, never a lucky short one.
      random: () => 0.999,
      logger,
      metrics,
      wakeups,
      sleep: async () => {},
    });
    return { run, metrics, wakeups };
  }

  // A failed publish backs off for about an hour (jitter pinned above).
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

  it('a nudge drains what is due, gives its slot back and returns without polling out the budget', async () => {
    await seedPending(db, 120);
    const publisher = new RecordingPublisher();
    const { run } = build(publisher);
    let reads = 0;

    const summary = await run(
      { nudge: true },
      lambdaContext(() => {
        reads++;
        return 50_000;
      }),
    );

    expect(summary).toMatchObject({ published: 120, pending: 0, role: 'primary', slot: 0 });
    expect(publisher.published).toHaveLength(120);
    expect(reads).toBeLessThan(30);
    const { rows } = await db.query('SELECT owner FROM relay_lease WHERE owner IS NOT NULL');
    expect(rows).toEqual([]);
  });

  it('a thousand nudges within a second while a run drains start no other run: each returns after one statement', async () => {
    await seedPending(db, 50);
    const gated = gatedPublisher();
    const { run } = build(gated.publisher);
    const first = run({ nudge: true }, lambdaContext());
    await gated.first;

    const nudges = await Promise.all(
      Array.from({ length: 1_000 }, () => run({ nudge: true }, lambdaContext())),
    );
    gated.open();
    const drained = await first;

    expect(nudges.filter(ran)).toHaveLength(0);
    expect(nudges.every((n) => 'skipped' in n && n.skipped === 'a run holds the lease')).toBe(true);
    expect(drained).toMatchObject({ published: 50, pending: 0 });
    expect(await statusCounts(db)).toEqual({ delivered: 50 });
  });

  it('a run whose lease lapsed (it died) frees its slot for the next nudge', async () => {
    await db.query(
      "UPDATE relay_lease SET owner = 'relay-dead', lease_until = now() - interval '1 second' WHERE slot = 0",
    );
    await seedPending(db, 3);

    const summary = await build().run({ nudge: true }, lambdaContext());

    expect(summary).toMatchObject({ published: 3, slot: 0 });
  });

  it('rows left backing off get a wake-up for when they are due; nothing else is woken', async () => {
    await seedPending(db, 3);
    const { run, wakeups } = build(failFirst(), { settings: longBackoff });

    const summary = await run(undefined, lambdaContext());

    expect(summary).toMatchObject({ published: 2, pending: 1 });
    expect(wakeups.calls).toHaveLength(1);
    const [[inMs, reason]] = wakeups.calls as [[number, WakeReason]];
    expect(reason).toBe('due');
    expect(inMs).toBeGreaterThan(3_500_000);
    expect(inMs).toBeLessThanOrEqual(3_600_000);
  });

  it('a transport refusing everything opens the circuit: the run wakes a run for the probe, not a successor, and its metrics say so; the accepted probe closes it', async () => {
    await seedPending(db, 5);
    const refusing = build(
      new RecordingPublisher((e) => ({
        eventId: e.eventId,
        ok: false,
        retryable: true,
        errorCode: 'InternalFailure',
        errorMessage: 'the bus journal cannot write: ENOSPC',
      })),
    );
    const opened = await refusing.run({ nudge: true }, lambdaContext());
    const openedMetrics = refusing.metrics.serializeMetrics() as unknown as Record<string, unknown>;
    // The probe's wait, over (as the database judges time).
    await db.query('UPDATE relay_circuit SET probe_at = now()');
    const accepting = build(new RecordingPublisher());
    const closed = await accepting.run({ wake: 'due' }, lambdaContext());
    const closedMetrics = accepting.metrics.serializeMetrics() as unknown as Record<string, unknown>;

    expect(opened).toMatchObject({
      held: 5,
      failed: 0,
      pending: 5,
      circuit: {
        open: true,
        opened: 'InternalFailure: the bus journal cannot write: ENOSPC',
        nextProbeInMs: 1_000,
        failedProbes: 0,
      },
    });
    // The rows are due, but only the probe may take one: no successor at once.
    expect(refusing.wakeups.calls).toEqual([[1_000, 'due']]);
    expect(openedMetrics[relayMetricNames.circuitOpened]).toBe(1);
    expect(openedMetrics[relayMetricNames.held]).toBe(5);
    expect(openedMetrics[relayMetricNames.failed]).toBeUndefined();
    expect(closed).toMatchObject({
      published: 5,
      pending: 0,
      circuit: { open: false, closed: { madeDue: 0 } },
    });
    expect(accepting.wakeups.calls).toEqual([]);
    expect(closedMetrics[relayMetricNames.circuitClosed]).toBe(1);
    expect(closedMetrics[relayMetricNames.circuitOpened]).toBeUndefined();
  });

  it('an empty outbox wakes nothing', async () => {
    const { run, wakeups } = build();
    await run(undefined, lambdaContext());
    expect(wakeups.calls).toEqual([]);
  });

  it('a run whose time runs out with rows still due wakes a successor at once', async () => {
    await seedPending(db, 30);
    let remaining = 50_000;
    const publisher = new RecordingPublisher(() => {
      remaining = 0;
      return undefined;
    });
    const { run, wakeups } = build(publisher, {
      settings: { claimBatchSize: 10, roundsInFlight: 1, maxRuns: 1 },
    });

    const summary = await run(
      undefined,
      lambdaContext(() => remaining),
    );

    expect(summary).toMatchObject({ published: 10, pending: 20 });
    expect(wakeups.calls).toEqual([[0, 'due']]);
  });

  it('a change whose transaction began before the run gave its slot up, and commits after, is still drained by that run', async () => {
    // The change read the lease as held (so it nudged nobody) and commits only after the run's
    // last claim and its release: the run waits for that transaction, then finds its row.
    const writer = new pg.Client({ connectionString: tasksUrl });
    await writer.connect();
    try {
      await writer.query('BEGIN');
      await writer.query(
        `INSERT INTO outbox (event_id, event_type, aggregate_id, aggregate_version, payload)
         VALUES (gen_random_uuid(), 'content.approved', gen_random_uuid(), 2, '{}')`,
      );
      let commit!: Promise<unknown>;
      const { run, wakeups } = build(new RecordingPublisher(), {
        lease: {
          writersInFlight: async (since?: string) => {
            const seen = await new RelayLeaseStore(relayDb).writersInFlight(since);
            // The run is waiting for the open change: let it commit now.
            if (seen.open > 0 && !commit) commit = writer.query('COMMIT');
            return seen;
          },
        },
      });

      const summary = await run({ nudge: true }, lambdaContext());

      expect(commit).toBeDefined();
      expect(summary).toMatchObject({ published: 1, pending: 0 });
      expect(wakeups.calls).toEqual([]);
      expect(await statusCounts(db)).toEqual({ delivered: 1 });
    } finally {
      await writer.end();
    }
  });

  it('a backlog with every round busy asks for a helper, which takes a slot of its own and drains beside it', async () => {
    await seedPending(db, 200);
    const wakeups = recordingWakeups();
    const { run } = build(new RecordingPublisher(), {
      settings: { claimBatchSize: 10, roundsInFlight: 1, maxRuns: 2 },
      wakeups,
    });

    const primary = await run({ nudge: true }, lambdaContext());

    expect(primary).toMatchObject({ role: 'primary', published: 200 });
    expect(wakeups.calls).toEqual([[0, 'helper']]);
    // The helper wake-up arrives (here after the primary is done): it takes slot 1, finds nothing, returns.
    const helper = await run({ Records: [{ body: JSON.stringify({ wake: 'helper' }) }] }, lambdaContext());
    expect(helper).toMatchObject({ role: 'helper', slot: 1, published: 0 });
  });

  it('with one run allowed there is no helper slot: a helper wake-up returns at once', async () => {
    const { run, wakeups } = build(new RecordingPublisher(), { settings: { maxRuns: 1 } });
    const helper = await run({ wake: 'helper' }, lambdaContext());
    expect(helper).toEqual({ owner: expect.any(String), role: 'helper', skipped: 'a run holds the lease' });
    expect(wakeups.calls).toEqual([]);
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
    // The alarmed gauges always; the rest only when not zero (a missing count is none, and is not billed).
    const zero = [
      relayMetricNames.fencedOut,
      relayMetricNames.purged,
      relayMetricNames.held,
      relayMetricNames.circuitOpened,
      relayMetricNames.circuitClosed,
      relayMetricNames.failedProbes,
    ];
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

  it('an idle run sends only the gauges an alarm needs: the oldest age and the dead count, not PendingEvents', async () => {
    const { run, metrics } = build();
    const summary = await run({ nudge: true }, lambdaContext());
    expect(ran(summary)).toBe(true);
    const emf = metrics.serializeMetrics();
    const values = emf as unknown as Record<string, unknown>;
    const definitions = emf._aws.CloudWatchMetrics[0]?.Metrics.map((m) => m.Name) ?? [];
    // relay-silent counts the age's samples and outbox-dead clears on a zero; PendingEvents has
    // no alarm, and an hourly zero would bill it all month (the dashboard fills its gaps with 0).
    expect(definitions.sort()).toEqual([relayMetricNames.dead, relayMetricNames.oldestPendingAge].sort());
    expect(values[relayMetricNames.oldestPendingAge]).toBe(0);
    expect(values[relayMetricNames.dead]).toBe(0);
    expect(values[relayMetricNames.pending]).toBeUndefined();
  });
});
