import type { InboxKey, InboxRecord } from '../inbox/inbox-store';
import type { ConsumerName } from '../topology';

/**
 * The delivery audit's other direction: every effect a consumer performed must be of an event
 * the pipeline committed. Its outbox row is that commitment (the relay publishes only what a
 * task change wrote there), so an effect whose event has no outbox row came from an event
 * someone else put on the bus: a forged `PutEvents`, or another pipeline's event on this bus.
 * Nothing stops such an event on the way (its shape is valid), so the audit is what sees it.
 */

/** A consumer processed an event: its effect ran (reported once per record, when it completed). */
export interface EffectArrival {
  readonly consumer: ConsumerName;
  /** The event id the consumer's inbox keys the record by: the outbox row's id for the pipeline's events. */
  readonly eventId: string;
}

/** An effect of an event the pipeline never committed, as the audit reports it. */
export interface ForeignEffect extends EffectArrival {
  readonly eventType: string;
  /** The task the event named (CloudEvent `subject`); null when it named none. */
  readonly subject: string | null;
  /** The inbox record's status when found (PROCESSED: the effect happened). */
  readonly status: InboxRecord['status'];
  /** When the consumer first received the event (ISO). */
  readonly receivedAt: string;
  /** When the audit found it (ISO). */
  readonly foundAt: string;
  readonly reason: string;
}

/** What the check reads: which events the outbox holds, and the consumers' inbox records. */
export interface ForeignEffectDeps {
  /** The ids among `eventIds` (UUIDs) that have an outbox row, whatever its status. */
  readonly committed: (eventIds: readonly string[]) => Promise<ReadonlySet<string>>;
  readonly inbox: { get(key: InboxKey): Promise<InboxRecord | undefined> };
  /** Epoch ms now, on the clock the inbox records are written by. */
  readonly now: number;
  /**
   * How long the relay keeps a delivered row (its purge's retention): a record first received
   * longer ago than that (less a margin) is not judged, since its row may be purged by now (an
   * old DEAD record redriven today, say).
   */
  readonly retentionSeconds: number;
}

/** A record first received within this much of the retention is judged only if its row is surely still kept. */
const retentionMarginMs = 60 * 60_000;

/** Ids one outbox read looks up: a statement of a few tens of KB. */
const committedBatch = 1_000;

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The arrivals whose event has no outbox row, each with its record and a reason. Legitimate
 * traffic costs one indexed read of the outbox for the batch; only the arrivals without a row
 * read their inbox record (for its status and first receipt). An id that is no UUID has no row
 * by construction. A record gone (deleted by hand) or first received before the retention is
 * not reported: nothing can be told of it.
 */
export async function findForeignEffects(
  arrivals: readonly EffectArrival[],
  deps: ForeignEffectDeps,
): Promise<ForeignEffect[]> {
  const unique = [...new Map(arrivals.map((a) => [`${a.consumer}#${a.eventId}`, a])).values()];
  const ids = [...new Set(unique.map((a) => a.eventId).filter((id) => uuid.test(id)))];
  const committed = new Set<string>();
  for (let i = 0; i < ids.length; i += committedBatch) {
    for (const id of await deps.committed(ids.slice(i, i + committedBatch))) committed.add(id.toLowerCase());
  }
  const suspects = unique.filter((a) => !committed.has(a.eventId.toLowerCase()));
  const judgedSince = deps.now - deps.retentionSeconds * 1_000 + retentionMarginMs;
  const found: ForeignEffect[] = [];
  for (const arrival of suspects) {
    const record = await deps.inbox.get(arrival);
    if (record === undefined || record.receivedAt < judgedSince) continue;
    found.push({
      ...arrival,
      eventType: record.eventType,
      subject: record.subject,
      status: record.status,
      receivedAt: new Date(record.receivedAt).toISOString(),
      foundAt: new Date(deps.now).toISOString(),
      reason: `${arrival.consumer} acted on event ${arrival.eventId} (${record.eventType}${record.subject ? ` for ${record.subject}` : ''}), which has no outbox row: the pipeline never committed it, so it was put on the bus by something other than the relay (a forged PutEvents, or another pipeline's event)`,
    });
  }
  return found;
}
