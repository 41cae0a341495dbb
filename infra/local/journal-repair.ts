import type { SqlClient } from '../../shared/db/sql-client';
import { deliveredBusEvent, localBusIdentity } from '../../shared/events/bus-event';
import { routedConsumers } from '../../shared/events/event-routing';
import type { ConsumerName, RuleSpec } from '../../shared/topology';
import type { BusEvent } from './bus/bus-types';

/** What the repair needs of the bus: a journalled delivery to one consumer. */
export interface RepairBus {
  redeliver(consumer: ConsumerName, event: BusEvent): Promise<void>;
}

/** What {@link remakeDamagedDeliveries} did. */
export interface JournalRepair {
  /** Delivered outbox rows the damaged lines named. */
  readonly events: number;
  /** Deliveries made again (event, consumer). */
  readonly deliveries: number;
}

const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

/**
 * Makes again the deliveries of the bus journal lines a start could not read, from PostgreSQL:
 * the outbox row is the truth, the line only says which. Every id still legible in a line (an
 * event line names the bus's event id and the outbox's in its detail, a `done` line the bus's)
 * is looked up among the delivered outbox rows; each row found is rebuilt as the bus delivered
 * it and handed, journalled, to every consumer the rules route it to. A consumer that finished
 * it already acknowledges the repeat (the inbox keeps it once); one whose record waits `FAILED`
 * for the retry the line held takes it.
 *
 * Not the delivery audit's redrive: that re-sends only the findings of its walk (records that
 * never came), and a line damaged while a record was `FAILED` leaves a record, not a finding.
 * Nor the event put back to pending: the relay did deliver it, so that would undo a true
 * `delivered` (its time, which the audit's cursor has walked past, and its bus event id: a
 * re-publish gets a new one) and send it to every rule's target again through the relay's
 * claim, where a journalled re-send reaches the consumers directly, with the id they saw.
 * A crash after the journal was rewritten and before these re-sends are journalled leaves the
 * line only in the kept-aside file: the records it held are then re-sent by that backstop too.
 * A line too damaged to name its event is left to the audit's re-send of records nothing will
 * retry (shared/audit/stuck-records.ts), within `audit.stuckAfterSeconds`.
 */
export async function remakeDamagedDeliveries(
  lines: readonly string[],
  deps: { readonly db: SqlClient; readonly rules: readonly RuleSpec[]; readonly bus: RepairBus },
): Promise<JournalRepair> {
  const ids = [...new Set(lines.flatMap((l) => l.match(uuid) ?? []).map((id) => id.toLowerCase()))];
  if (ids.length === 0) return { events: 0, deliveries: 0 };
  // By primary key for the outbox's ids; the bus's ids (no index) only in the rows of a repair
  // at start, a sequential read of the kept delivered rows at worst.
  const { rows } = await deps.db.query<{
    event_id: string;
    event_type: string;
    aggregate_id: string;
    aggregate_version: number;
    payload: unknown;
    created_at: Date;
    bus_event_id: string | null;
  }>(
    `SELECT event_id, event_type, aggregate_id, aggregate_version, payload, created_at, bus_event_id
       FROM outbox
      WHERE status = 'delivered'
        AND (event_id = ANY(:ids::uuid[]) OR bus_event_id = ANY(:ids::text[]))`,
    { ids: `{${ids.join(',')}}` },
  );
  let deliveries = 0;
  for (const r of rows) {
    const event = deliveredBusEvent(
      {
        eventId: r.event_id,
        eventType: r.event_type,
        aggregateId: r.aggregate_id,
        aggregateVersion: r.aggregate_version,
        payload: r.payload,
        createdAt: r.created_at,
      },
      r.bus_event_id ?? r.event_id,
      localBusIdentity,
    );
    for (const consumer of routedConsumers(deps.rules, event)) {
      await deps.bus.redeliver(consumer, event);
      deliveries++;
    }
  }
  return { events: rows.length, deliveries };
}
