import { type BusIdentity, deliveredBusEvent } from '../events/bus-event';
import type { InboxStuckRecords } from '../inbox/inbox-ops';
import type { InboxRecord } from '../inbox/inbox-store';
import type { ConsumerRedelivery } from '../ops/ops-ports';
import type { ConsumerName } from '../topology';
import type { DeliveryAuditStore } from './audit-store';

/** What re-sending stuck records needs; the audit's run and the ops API's redrive build it alike. */
export interface StuckRecordDeps {
  /** The consumers whose records it looks through: its topology's. */
  readonly consumers: readonly ConsumerName[];
  readonly inbox: InboxStuckRecords;
  /** Hands an event to a consumer again: an async invoke on AWS, the bus (journalled) locally. */
  readonly redelivery: ConsumerRedelivery;
  /** Rebuilds an event whose stored copy was truncated from its delivered outbox row. */
  readonly outbox: Pick<DeliveryAuditStore, 'deliveredEvents'>;
  readonly bus: BusIdentity;
  /** Epoch ms on the clock the inbox records are written by (the local runtime's own clock). */
  readonly now: number;
  /** A record is stuck once nothing was due on it, nor done to it, for this long. */
  readonly stuckAfterSeconds: number;
  /** Records read per consumer at most (per status and shard of the operator's index, then in all). */
  readonly limit: number;
}

/** What one pass re-sent, per consumer, and what it could not (no stored event and no outbox row). */
export interface StuckReport {
  readonly resent: Readonly<Record<ConsumerName, number>>;
  readonly unsendable: number;
}

/**
 * Re-sends every `FAILED` or `PROCESSING` record nothing will retry: its next attempt and its
 * lease ended more than `stuckAfterSeconds` ago and nothing touched it since (see `isStuck`).
 * Such a record has lost its delivery (a bus journal line damaged while the runtime was stopped,
 * a kill between an inbox redrive's reset and its re-send, a dead letter expired) and would
 * otherwise wait for good, counted only by the retry-age alarm hours later.
 *
 * The re-send is one durable step (the bus journals it before scheduling it; Lambda accepted the
 * async invoke), and the record is not changed: the consumer takes it over as any due retry, and
 * a crash before the re-send leaves it stuck, so the next pass finds it again. A record whose
 * delivery was only slow is re-sent once more at worst: the inbox makes the repeat a no-op.
 */
export async function resendStuck(deps: StuckRecordDeps): Promise<StuckReport> {
  const resent: Record<ConsumerName, number> = Object.fromEntries(deps.consumers.map((c) => [c, 0]));
  let unsendable = 0;
  const before = deps.now - deps.stuckAfterSeconds * 1_000;
  for (const consumer of deps.consumers) {
    const records = await deps.inbox.stuck(consumer, before, deps.limit);
    const events = await eventsOf(records, deps);
    for (const r of records) {
      const event = events.get(r.eventId);
      if (event === undefined) {
        unsendable++;
        continue;
      }
      await deps.redelivery.redeliver(consumer, event);
      resent[consumer] = (resent[consumer] ?? 0) + 1;
    }
  }
  return { resent, unsendable };
}

/** Each record's event: the stored one, or (stored truncated) rebuilt from its delivered outbox row. */
async function eventsOf(
  records: readonly InboxRecord[],
  deps: Pick<StuckRecordDeps, 'outbox' | 'bus'>,
): Promise<Map<string, unknown>> {
  const events = new Map<string, unknown>();
  const truncated: string[] = [];
  for (const r of records) {
    if (typeof r.event === 'object' && r.event !== null) events.set(r.eventId, r.event);
    else truncated.push(r.eventId);
  }
  if (truncated.length > 0) {
    for (const [id, row] of await deps.outbox.deliveredEvents(truncated)) {
      events.set(id, deliveredBusEvent(row, row.busEventId, deps.bus));
    }
  }
  return events;
}
