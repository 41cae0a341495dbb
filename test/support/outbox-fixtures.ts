import { randomUUID } from 'node:crypto';
import { topology } from '../../functions/topology';
import type { SqlClient } from '../../shared/db/sql-client';
import type { OutboundEvent } from '../../shared/events/cloud-event';
import type { ClaimedEvent, OutboxStore } from '../../shared/outbox/outbox-store';
import type { EventPublisher, PublishOutcome } from '../../shared/outbox/publisher';
import type { RelayDeps } from '../../shared/outbox/relay';
import type { RelaySettings } from '../../shared/topology';

/**
 * Inserts `count` pending content.approved rows in one statement (generate_series), oldest
 * first, each with its own task id. `padding` adds that many characters to the payload.
 */
export async function seedPending(db: SqlClient, count: number, padding = 0): Promise<void> {
  await db.query(
    `WITH t AS (SELECT g, gen_random_uuid() AS id FROM generate_series(1, :count) AS g)
     INSERT INTO outbox (event_id, event_type, aggregate_id, aggregate_version, payload, created_at)
     SELECT gen_random_uuid(), 'content.approved', t.id, 2,
            jsonb_build_object('taskId', t.id, 'version', 2, 'title', 'task ' || t.g, 'assignee', NULL,
                               'reviewer', 'rita', 'approvedAt', '2026-11-30T00:00:00.000Z',
                               'padding', repeat('x', :padding::int)),
            clock_timestamp() - make_interval(secs => (:count - t.g)::float8 / 1000)
       FROM t`,
    { count, padding },
  );
}

/** Row counts by status. */
export async function statusCounts(db: SqlClient): Promise<Record<string, number>> {
  const { rows } = await db.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM outbox GROUP BY status',
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

/** Makes every pending row due now (skips the backoff a test does not want to wait for). */
export async function makeAllDue(db: SqlClient): Promise<void> {
  await db.query("UPDATE outbox SET next_attempt_at = now() WHERE status = 'pending'");
}

/**
 * Lets every lease held now run out, as PostgreSQL judges time (the claim compares `lease_until`
 * with `now()`): "the lease has lapsed" as a state the test sets, where sleeping past a short
 * lease would bet on how long the machine takes between the claim and the next statement.
 */
export async function expireLeases(db: SqlClient): Promise<void> {
  await db.query("UPDATE outbox SET lease_until = now() - interval '1 second' WHERE lease_until IS NOT NULL");
}

/** A publisher that accepts everything at once and records what it saw. */
export class RecordingPublisher implements EventPublisher {
  readonly published: OutboundEvent[] = [];
  constructor(private readonly decide: (e: OutboundEvent) => PublishOutcome | undefined = () => undefined) {}
  async publish(events: readonly OutboundEvent[]): Promise<PublishOutcome[]> {
    return events.map((e) => {
      const decided = this.decide(e);
      if (decided) return decided;
      this.published.push(e);
      return { eventId: e.eventId, ok: true, busEventId: randomUUID() };
    });
  }
}

/** Topology relay settings with test-sized timing. */
export function testSettings(overrides: Partial<RelaySettings> = {}): RelaySettings {
  return {
    ...topology.relay,
    pollIntervalMs: 10,
    budgetMarginMs: 0,
    ...overrides,
  };
}

/** `store.claim` with the topology's limits and `rows`/`leaseSeconds` as given: the claimed rows. */
export async function claimRows(
  store: Pick<OutboxStore, 'claim'>,
  owner: string,
  rows: number,
  leaseSeconds: number,
): Promise<ClaimedEvent[]> {
  const { claimed } = await store.claim(owner, {
    rows,
    leaseSeconds,
    bytes: topology.relay.claimBytes,
    maxUnsettledClaims: topology.relay.maxUnsettledClaims,
  });
  return claimed;
}

/** `count` claimed content.approved rows, as `OutboxStore.claim` returns them: first attempt, token 1. */
export function claimedEvents(count: number): ClaimedEvent[] {
  return Array.from({ length: count }, () => ({
    eventId: randomUUID(),
    eventType: 'content.approved',
    aggregateId: randomUUID(),
    aggregateVersion: 2,
    payload: {},
    createdAt: new Date(),
    attempts: 1,
    claimToken: 1,
    leaseExpired: false,
  }));
}

/** The outbox a relay run needs, with `claim` as given; every mark accepted, the stats empty. */
export function stubOutbox(claim: OutboxStore['claim']): RelayDeps['outbox'] {
  return {
    claim,
    markDelivered: async (items) => items.map((i) => i.eventId),
    markFailed: async () => [],
    release: async (_owner, items) => items.map((i) => i.eventId),
    purgeDelivered: async () => 0,
    stats: async () => ({ pending: 0, dead: 0, oldestPendingAgeSeconds: 0, nextDueInMs: null }),
  };
}

/** The relay's view of `store`, with some of its calls replaced (to count them, or to commit rows in between). */
export function throughStore(
  store: OutboxStore,
  overrides: Partial<RelayDeps['outbox']> = {},
): RelayDeps['outbox'] {
  return {
    claim: (owner, limits) => store.claim(owner, limits),
    markDelivered: (items) => store.markDelivered(items),
    markFailed: (owner, items) => store.markFailed(owner, items),
    release: (owner, items, options) => store.release(owner, items, options),
    purgeDelivered: (hours, batch) => store.purgeDelivered(hours, batch),
    stats: () => store.stats(),
    ...overrides,
  };
}
