import { randomUUID } from 'node:crypto';
import { type BusIdentity, deliveredBusEvent } from '../events/bus-event';
import { routedConsumers } from '../events/event-routing';
import { recordKey } from '../inbox/dynamo-inbox-table';
import type { InboxPresence, InboxStuckRecords } from '../inbox/inbox-ops';
import type { InboxKey } from '../inbox/inbox-store';
import type { ConsumerRedelivery } from '../ops/ops-ports';
import type { AuditSettings, ConsumerName, RuleSpec, Topology } from '../topology';
import type { DeliveredRow, DeliveryAuditStore, Finding } from './audit-store';
import type { ForeignEffect } from './foreign-effects';
import { resendStuck } from './stuck-records';

/** What one audit run did (the function's return value, and the local runner's record). */
export interface AuditReport {
  /** False when another run held the lease: this one did nothing. */
  readonly ran: boolean;
  /** Delivered events this run read and checked. */
  readonly audited: number;
  readonly pages: number;
  /** (event, consumer) pairs this run found missing, per consumer. */
  readonly found: Readonly<Record<ConsumerName, number>>;
  /** Earlier findings whose record this run found (a redrive, or a delivery that was only late). */
  readonly cleared: number;
  /** The walk reached the events still within the grace period: nothing more is due now. */
  readonly caughtUp: boolean;
  /** Open findings per consumer after the run: what `UndeliveredToConsumer` reports. */
  readonly undelivered: Readonly<Record<ConsumerName, number>>;
  /** Stuck inbox records this run re-sent, per consumer (none when the run has no `stuck` port). */
  readonly resent: Readonly<Record<ConsumerName, number>>;
  /** Stuck records it could not re-send: no whole stored event and no outbox row left to rebuild it from. */
  readonly unsendable: number;
  /**
   * Effects this run found of events that have no outbox row (foreign-effects.ts): where the
   * realization tells the audit what its consumers processed (the local runtime's runner).
   */
  readonly foreign?: readonly ForeignEffect[];
}

/** What a run needs; the AWS function and the local runtime build it alike. */
export interface DeliveryAuditDeps {
  /** As the audit's own database role. */
  readonly store: Pick<
    DeliveryAuditStore,
    | 'acquire'
    | 'release'
    | 'cursor'
    | 'nextPage'
    | 'recordPage'
    | 'findingsToRecheck'
    | 'settleRecheck'
    | 'undeliveredCounts'
    | 'deliveredEvents'
  >;
  readonly inbox: InboxPresence;
  /**
   * Where the run finds inbox records nothing will retry and how it re-sends them; without it
   * the run only looks for missing records.
   */
  readonly stuck?: {
    readonly inbox: InboxStuckRecords;
    readonly redelivery: ConsumerRedelivery;
    /** Epoch ms the inbox records are written by. @default Date.now */
    readonly clock?: () => number;
  };
  /** The pipeline it audits: its consumers, its rules, its audit settings, the relay's claim bound. */
  readonly topology: Pick<Topology, 'audit' | 'rules' | 'consumerNames' | 'relay'>;
  /**
   * The rules as the topology defines them: what should have been delivered, whatever is
   * deployed. @default the topology's
   */
  readonly rules?: readonly RuleSpec[];
  /** Account and Region of the bus, as EventBridge writes them into each event. */
  readonly bus: BusIdentity;
  /** @default the topology's `audit` */
  readonly settings?: AuditSettings;
  /** Milliseconds left in this invocation; a run stops paging while a page's time is left. */
  readonly remainingMs?: () => number;
}

/** The time a run keeps for its last page and its release: a page is a read and a few BatchGetItems. */
const pageMarginMs = 15_000;

/**
 * One run of the delivery audit: that every event the relay delivered at least
 * `graceSeconds` ago has, in the inbox of every consumer the topology's rules route it to, a
 * record in any state (`PROCESSED` and `DEAD` are settled, `PROCESSING` and `FAILED` are work
 * under way; what it looks for is the record that never came). It routes each event with the
 * matcher the local bus delivers with, over the topology's rule patterns, so a rule disabled
 * or changed by hand, a target misconfigured, a dead letter that expired or a record deleted
 * all show as missing.
 *
 * Bounded whatever the history: it first checks again up to `recheckPerRun` open findings (a
 * record that arrived since, after a redrive or a late delivery, clears its finding), then
 * walks on from its cursor, `pageSize` events a page and `maxPagesPerRun` pages a run, each
 * page one range read of the delivered rows' index and one presence check of its keys
 * (BatchGetItem). The cursor moves with each page's findings in one statement under the run's
 * lease, so a run that dies midway loses no finding and skips no event; the next run goes on.
 *
 * Then (with a `stuck` port) it re-sends the inbox records nothing will retry: a record is not
 * missing, yet `FAILED` or `PROCESSING` with no attempt due or leased for `stuckAfterSeconds`
 * has lost its delivery as surely (see stuck-records.ts).
 */
export async function runDeliveryAudit(deps: DeliveryAuditDeps): Promise<AuditReport> {
  const settings = deps.settings ?? deps.topology.audit;
  const rules = deps.rules ?? deps.topology.rules;
  const { consumerNames } = deps.topology;
  /** The outbox's largest answer to one page: the relay's claim bound, below the Data API's 1 MiB. */
  const pageBytes = deps.topology.relay.claimBytes.perClaim;
  const remainingMs = deps.remainingMs ?? (() => Number.POSITIVE_INFINITY);
  const owner = `audit/${randomUUID()}`;
  const found: Record<ConsumerName, number> = Object.fromEntries(consumerNames.map((c) => [c, 0]));
  if (!(await deps.store.acquire(owner, settings.leaseSeconds))) {
    return {
      ran: false,
      audited: 0,
      pages: 0,
      found,
      cleared: 0,
      caughtUp: false,
      undelivered: await deps.store.undeliveredCounts(consumerNames),
      resent: { ...found },
      unsendable: 0,
    };
  }
  let audited = 0;
  let pages = 0;
  let cleared = 0;
  let caughtUp = false;
  let stuck = { resent: { ...found }, unsendable: 0 };
  try {
    const open = await deps.store.findingsToRecheck(settings.recheckPerRun);
    if (open.length > 0) {
      const present = await deps.inbox.present(open);
      const arrived = open.filter((f) => present.has(recordKey(f)));
      await deps.store.settleRecheck(
        arrived,
        open.filter((f) => !present.has(recordKey(f))),
      );
      cleared = arrived.length;
    }
    // Only the lease holder moves the cursor: read once, then moved along page by page.
    let cursor = await deps.store.cursor();
    while (pages < settings.maxPagesPerRun && remainingMs() > pageMarginMs) {
      const rows = await deps.store.nextPage(cursor, settings.pageSize, settings.graceSeconds, pageBytes);
      const last = rows.at(-1);
      if (!last) {
        caughtUp = true;
        break;
      }
      const missing = await missingOf(rows, rules, deps);
      cursor = { deliveredAt: last.deliveredAt, eventId: last.eventId };
      const recorded = await deps.store.recordPage(
        owner,
        { audited: rows.length, findings: missing, cursor },
        settings.leaseSeconds,
      );
      // The lease lapsed and another run took over: it goes on from the cursor; this one stops.
      if (!recorded) break;
      pages++;
      audited += rows.length;
      for (const f of missing) found[f.consumer] = (found[f.consumer] ?? 0) + 1;
      if (rows.length < settings.pageSize) {
        caughtUp = true;
        break;
      }
    }
    // Under the lease, so two runs never re-send the same record at once.
    if (deps.stuck && remainingMs() > pageMarginMs) {
      stuck = await resendStuck({
        consumers: consumerNames,
        inbox: deps.stuck.inbox,
        redelivery: deps.stuck.redelivery,
        outbox: deps.store,
        bus: deps.bus,
        now: (deps.stuck.clock ?? Date.now)(),
        stuckAfterSeconds: settings.stuckAfterSeconds,
        limit: settings.stuckPerRun,
      });
    }
  } finally {
    await deps.store.release(owner, audited);
  }
  return {
    ran: true,
    audited,
    pages,
    found,
    cleared,
    caughtUp,
    undelivered: await deps.store.undeliveredCounts(consumerNames),
    ...stuck,
  };
}

/** The (event, consumer) pairs of `rows` the rules route but whose inbox record does not exist. */
async function missingOf(
  rows: readonly DeliveredRow[],
  rules: readonly RuleSpec[],
  deps: Pick<DeliveryAuditDeps, 'inbox' | 'bus'>,
): Promise<Finding[]> {
  const expected: (InboxKey & { deliveredAt: string })[] = rows.flatMap((row) =>
    routedConsumers(rules, deliveredBusEvent(row, row.busEventId, deps.bus)).map((consumer) => ({
      consumer,
      eventId: row.eventId,
      deliveredAt: row.deliveredAt,
    })),
  );
  if (expected.length === 0) return [];
  const present = await deps.inbox.present(expected);
  return expected
    .filter((k) => !present.has(recordKey(k)))
    .map((k) => ({ eventId: k.eventId, consumer: k.consumer as ConsumerName, deliveredAt: k.deliveredAt }));
}
