import { type SqlClient, sqlParam } from '../db/sql-client';
import type { OutboundEvent } from '../events/cloud-event';
import type { ConsumerName } from '../topology';

/** A delivered outbox row as the audit reads it: the event, and where the walk stands after it. */
export interface DeliveredRow extends OutboundEvent {
  /** The id EventBridge gave the event when the relay published it. */
  readonly busEventId: string;
  /** `delivered_at` as PostgreSQL's own text (microseconds and all): the cursor moves to it exactly. */
  readonly deliveredAt: string;
}

/** Where the audit's walk stands: after this row (null: it has audited nothing yet). */
export interface AuditCursor {
  readonly deliveredAt: string;
  readonly eventId: string;
}

/** An event the rules route to `consumer` that has no record in `consumer`'s inbox. */
export interface Finding {
  readonly eventId: string;
  readonly consumer: ConsumerName;
  /** ISO time the relay marked the event delivered. */
  readonly deliveredAt: string;
}

/** A finding as an operator reads it. */
export interface ListedFinding extends Finding {
  /** When a run first found it missing. */
  readonly foundAt: string;
  /** When it was last re-sent by `POST /ops/audit/redrive`; null if never. */
  readonly redrivenAt: string | null;
  readonly redrives: number;
}

/** The audit's state as the ops API shows it. */
export interface AuditState {
  readonly cursor: AuditCursor | null;
  readonly lastRunAt: string | null;
  /** Events the last run audited. */
  readonly lastRunAudited: number;
  /** Events audited since the audit began. */
  readonly audited: number;
  /**
   * Seconds since the oldest delivered event the audit has not read yet was delivered, beyond
   * the grace period (0 when it is caught up): how far behind the walk is.
   */
  readonly behindSeconds: number;
}

interface PageRow {
  event_id: string;
  event_type: string;
  aggregate_id: string;
  aggregate_version: number;
  payload: unknown;
  created_at: Date;
  bus_event_id: string | null;
  delivered_at: string;
  [k: string]: unknown;
}

/**
 * The next delivered rows after the cursor (`:afterAt`, `:afterId`) and older than the grace
 * period, in walk order: a range of `outbox_delivered_walk_idx` (a row comparison on its two
 * columns is an index bound), however long the history before the cursor.
 */
const nextRowsAfter = `
  SELECT o.event_id, o.event_type, o.aggregate_id, o.aggregate_version, o.payload, o.created_at,
         o.bus_event_id, o.delivered_at
    FROM outbox o
   WHERE o.status = 'delivered'
     AND o.delivered_at <= now() - make_interval(secs => :graceSeconds::float8)
     AND (o.delivered_at, o.event_id) > (:afterAt::timestamptz, :afterId::uuid)
   ORDER BY o.delivered_at, o.event_id`;

/** Where a walk that has read nothing yet starts: before every row. */
const beforeEverything = {
  afterAt: '-infinity',
  afterId: sqlParam.uuid('00000000-0000-0000-0000-000000000000'),
};

/** The `:afterAt`/`:afterId` parameters of a cursor. */
const afterParams = (cursor: AuditCursor | null) =>
  cursor === null
    ? beforeEverything
    : { afterAt: cursor.deliveredAt, afterId: sqlParam.uuid(cursor.eventId) };

const toDeliveredRow = (r: PageRow): DeliveredRow => ({
  eventId: r.event_id,
  eventType: r.event_type,
  aggregateId: r.aggregate_id,
  aggregateVersion: r.aggregate_version,
  payload: r.payload,
  createdAt: r.created_at,
  busEventId: r.bus_event_id ?? r.event_id,
  deliveredAt: r.delivered_at,
});

/** What a page row adds to a Data API response besides its payload (as the claim counts it). */
const pageRowOverheadBytes = 512;

/**
 * The delivery audit's PostgreSQL state (migration 0008): its cursor over the delivered rows,
 * its run lease, and its findings. The audit function writes it as its own role; the ops API
 * reads it and notes redrives as the ops role. Every statement reads an index range or one row:
 * the walk `outbox_delivered_walk_idx` from the cursor, the findings their own indexes, the
 * counts `pipeline_counters`.
 */
export class DeliveryAuditStore {
  constructor(private readonly db: SqlClient) {}

  /**
   * Takes the run lease for `owner` for `leaseSeconds` if no live run holds it; false when one
   * does. A run renews it with every page it records ({@link recordPage}), so a run that dies
   * holds it at most `leaseSeconds`.
   */
  async acquire(owner: string, leaseSeconds: number): Promise<boolean> {
    const { rows } = await this.db.query(
      `UPDATE delivery_audit
          SET lease_owner = :owner, lease_until = clock_timestamp() + make_interval(secs => :leaseSeconds::float8)
        WHERE lease_owner IS NULL OR lease_until < now()
       RETURNING id`,
      { owner, leaseSeconds },
    );
    return rows.length > 0;
  }

  /** Ends `owner`'s run: frees the lease and notes the run's figures (if `owner` still held it). */
  async release(owner: string, audited: number): Promise<void> {
    await this.db.query(
      `UPDATE delivery_audit
          SET lease_owner = NULL, lease_until = NULL, last_run_at = now(), last_run_audited = :audited
        WHERE lease_owner = :owner`,
      { owner, audited },
    );
  }

  /** Where the walk stands (read by the run that holds the lease: nobody else moves it). */
  async cursor(): Promise<AuditCursor | null> {
    const { rows } = await this.db.query<{ at: string | null; id: string | null }>(
      'SELECT cursor_delivered_at::text AS at, cursor_event_id AS id FROM delivery_audit',
    );
    const r = rows[0];
    return r?.at && r.id ? { deliveredAt: r.at, eventId: r.id } : null;
  }

  /**
   * The next delivered rows after `after` that were delivered at least `graceSeconds` ago (the
   * database's clock), oldest delivery first: at most `limit`, and no more than fit in
   * `maxBytes` as the Data API counts its answer (at least one).
   */
  async nextPage(
    after: AuditCursor | null,
    limit: number,
    graceSeconds: number,
    maxBytes: number,
  ): Promise<DeliveredRow[]> {
    // Cut by bytes as the relay's claim is: the answer must fit the Data API's 1 MiB response
    // whatever the payloads (each one already fit a claim, so the first row always fits).
    const { rows } = await this.db.query<PageRow>(
      `WITH next AS (${nextRowsAfter} LIMIT :limit),
       sized AS (
         SELECT next.*,
                sum(:rowOverhead + octet_length(to_json(payload::text)::text))
                  OVER (ORDER BY delivered_at, event_id) AS running,
                row_number() OVER (ORDER BY delivered_at, event_id) AS n
           FROM next
       )
       SELECT event_id, event_type, aggregate_id, aggregate_version, payload, created_at, bus_event_id,
              delivered_at::text AS delivered_at
         FROM sized WHERE running <= :maxBytes OR n = 1
        ORDER BY n`,
      { ...afterParams(after), graceSeconds, limit, maxBytes, rowOverhead: pageRowOverheadBytes },
    );
    return rows.map(toDeliveredRow);
  }

  /**
   * Records a page in one statement: its findings (a finding already open stays as it is), the
   * cursor moved to `cursor` and the rows it `audited` counted, renewing the lease, all only
   * while `owner` holds the lease; a run that lost it (it outlived its lease and another took
   * over) changes nothing. False then.
   */
  async recordPage(
    owner: string,
    page: { readonly audited: number; readonly findings: readonly Finding[]; readonly cursor: AuditCursor },
    leaseSeconds: number,
  ): Promise<boolean> {
    const { findings, cursor } = page;
    const { rows } = await this.db.query<{ moved: boolean }>(
      `WITH moved AS (
         UPDATE delivery_audit
            SET cursor_delivered_at = :cursorAt::timestamptz, cursor_event_id = :cursorId,
                audited = audited + :audited,
                lease_until = clock_timestamp() + make_interval(secs => :leaseSeconds::float8)
          WHERE lease_owner = :owner
         RETURNING id
       ),
       found AS (
         INSERT INTO delivery_audit_findings (event_id, consumer, delivered_at)
         SELECT f.event_id, f.consumer, f.delivered_at
           FROM jsonb_to_recordset(:findings::jsonb) AS f(event_id uuid, consumer text, delivered_at timestamptz)
          WHERE EXISTS (SELECT 1 FROM moved)
         ON CONFLICT (event_id, consumer) DO NOTHING
       )
       SELECT EXISTS (SELECT 1 FROM moved) AS moved`,
      {
        owner,
        cursorAt: cursor.deliveredAt,
        cursorId: sqlParam.uuid(cursor.eventId),
        audited: page.audited,
        leaseSeconds,
        findings: sqlParam.json(
          findings.map((f) => ({ event_id: f.eventId, consumer: f.consumer, delivered_at: f.deliveredAt })),
        ),
      },
    );
    return rows[0]?.moved === true;
  }

  /** The `limit` open findings checked longest ago: what a run looks at again. */
  async findingsToRecheck(limit: number): Promise<Finding[]> {
    const { rows } = await this.db.query<{ event_id: string; consumer: ConsumerName; delivered_at: Date }>(
      `SELECT event_id, consumer, delivered_at FROM delivery_audit_findings
        ORDER BY checked_at, event_id, consumer LIMIT :limit`,
      { limit },
    );
    return rows.map((r) => ({
      eventId: r.event_id,
      consumer: r.consumer,
      deliveredAt: r.delivered_at.toISOString(),
    }));
  }

  /** After a recheck: the findings whose record has arrived are gone, the others checked now. */
  async settleRecheck(found: readonly Finding[], stillMissing: readonly Finding[]): Promise<void> {
    const keys = (list: readonly Finding[]) =>
      sqlParam.json(list.map((f) => ({ event_id: f.eventId, consumer: f.consumer })));
    if (found.length > 0) {
      await this.db.query(
        `DELETE FROM delivery_audit_findings d
          USING jsonb_to_recordset(:keys::jsonb) AS k(event_id uuid, consumer text)
          WHERE d.event_id = k.event_id AND d.consumer = k.consumer`,
        { keys: keys(found) },
      );
    }
    if (stillMissing.length > 0) {
      await this.db.query(
        `UPDATE delivery_audit_findings d SET checked_at = now()
           FROM jsonb_to_recordset(:keys::jsonb) AS k(event_id uuid, consumer text)
          WHERE d.event_id = k.event_id AND d.consumer = k.consumer`,
        { keys: keys(stillMissing) },
      );
    }
  }

  /**
   * Open findings of each of `consumers` (a topology's): the counters the findings' triggers
   * keep, never a count of the table.
   */
  async undeliveredCounts(consumers: readonly ConsumerName[]): Promise<Record<ConsumerName, number>> {
    const { rows } = await this.db.query<{ consumer: string; n: number }>(
      `SELECT substr(name, 19) AS consumer, sum(n)::float8 AS n
         FROM pipeline_counters WHERE name LIKE 'audit.undelivered.%' GROUP BY name`,
    );
    const counts: Record<ConsumerName, number> = Object.fromEntries(consumers.map((c) => [c, 0]));
    for (const r of rows) if (Object.hasOwn(counts, r.consumer)) counts[r.consumer] = r.n;
    return counts;
  }

  /** Open findings, oldest delivery first, at most `limit`; only `consumer`'s or `eventId`'s when given. */
  async list(
    limit: number,
    only: { readonly consumer?: ConsumerName; readonly eventId?: string } = {},
  ): Promise<ListedFinding[]> {
    const { rows } = await this.db.query<{
      event_id: string;
      consumer: ConsumerName;
      delivered_at: Date;
      found_at: Date;
      redriven_at: Date | null;
      redrives: number;
    }>(
      `SELECT event_id, consumer, delivered_at, found_at, redriven_at, redrives
         FROM delivery_audit_findings
        WHERE (:consumer::text IS NULL OR consumer = :consumer::text)
          AND (:eventId::uuid IS NULL OR event_id = :eventId::uuid)
        ORDER BY delivered_at, event_id, consumer LIMIT :limit`,
      {
        limit,
        consumer: only.consumer ?? null,
        eventId: only.eventId === undefined ? null : sqlParam.uuid(only.eventId),
      },
    );
    return rows.map((r) => ({
      eventId: r.event_id,
      consumer: r.consumer,
      deliveredAt: r.delivered_at.toISOString(),
      foundAt: r.found_at.toISOString(),
      redrivenAt: r.redriven_at?.toISOString() ?? null,
      redrives: r.redrives,
    }));
  }

  /**
   * Open findings to re-send, oldest delivery first, at most `limit`: those of `eventId` (and
   * `consumer`) when given, else every one not re-sent in the last `quietSeconds` (a re-send
   * that recent is still on its way: sending it again would only duplicate it) nor since
   * `since` (a time {@link now} gave: a redrive of everything re-sends each finding once).
   */
  async toRedrive(
    limit: number,
    target:
      | { readonly eventId: string; readonly consumer?: ConsumerName }
      | { readonly quietSeconds: number; readonly since?: string },
  ): Promise<Finding[]> {
    const one = 'eventId' in target;
    const { rows } = await this.db.query<{ event_id: string; consumer: ConsumerName; delivered_at: Date }>(
      one
        ? `SELECT event_id, consumer, delivered_at FROM delivery_audit_findings
            WHERE event_id = :eventId AND (:consumer::text IS NULL OR consumer = :consumer::text)
            ORDER BY consumer LIMIT :limit`
        : `SELECT event_id, consumer, delivered_at FROM delivery_audit_findings
            WHERE redriven_at IS NULL
               OR (redriven_at < now() - make_interval(secs => :quietSeconds::float8)
                   AND (:since::timestamptz IS NULL OR redriven_at < :since::timestamptz))
            ORDER BY delivered_at, event_id, consumer LIMIT :limit`,
      one
        ? { limit, eventId: sqlParam.uuid(target.eventId), consumer: target.consumer ?? null }
        : { limit, quietSeconds: target.quietSeconds, since: target.since ?? null },
    );
    return rows.map((r) => ({
      eventId: r.event_id,
      consumer: r.consumer,
      deliveredAt: r.delivered_at.toISOString(),
    }));
  }

  /**
   * The delivered outbox rows of `eventIds` (those still kept: the relay purges delivered rows
   * after its retention), by event id: what a re-send rebuilds each event from.
   */
  async deliveredEvents(eventIds: readonly string[]): Promise<Map<string, DeliveredRow>> {
    if (eventIds.length === 0) return new Map();
    const { rows } = await this.db.query<PageRow>(
      `SELECT o.event_id, o.event_type, o.aggregate_id, o.aggregate_version, o.payload, o.created_at,
              o.bus_event_id, o.delivered_at::text AS delivered_at
         FROM outbox o JOIN jsonb_array_elements_text(:ids::jsonb) AS i(id) ON o.event_id = i.id::uuid
        WHERE o.status = 'delivered'`,
      { ids: sqlParam.json([...new Set(eventIds)]) },
    );
    return new Map(rows.map((r) => [r.event_id, toDeliveredRow(r)]));
  }

  /**
   * Which of `eventIds` (UUIDs) have an outbox row, in any status: the events the pipeline
   * committed (see foreign-effects.ts). One probe of the primary key per id.
   */
  async committedEvents(eventIds: readonly string[]): Promise<ReadonlySet<string>> {
    if (eventIds.length === 0) return new Set();
    const { rows } = await this.db.query<{ event_id: string }>(
      `SELECT o.event_id FROM outbox o
         JOIN jsonb_array_elements_text(:ids::jsonb) AS i(id) ON o.event_id = i.id::uuid`,
      { ids: sqlParam.json([...new Set(eventIds)]) },
    );
    return new Set(rows.map((r) => r.event_id));
  }

  /** The database's time now, as its own text: what `since` of {@link toRedrive} compares with the times it notes. */
  async now(): Promise<string> {
    const { rows } = await this.db.query<{ now: string }>(
      `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS now`,
    );
    return rows[0]?.now as string;
  }

  /** Notes a re-send of a finding (it stays open until a run finds the record). */
  async noteRedrive(eventId: string, consumer: ConsumerName): Promise<void> {
    await this.db.query(
      `UPDATE delivery_audit_findings SET redriven_at = now(), redrives = redrives + 1
        WHERE event_id = :eventId AND consumer = :consumer`,
      { eventId: sqlParam.uuid(eventId), consumer },
    );
  }

  /** The cursor, the last run and how far behind the walk is (one index probe past the cursor). */
  async state(graceSeconds: number): Promise<AuditState> {
    const cursor = await this.cursor();
    const { rows } = await this.db.query<{
      last_run_at: Date | null;
      last_run_audited: number;
      audited: number;
      behind_seconds: number | null;
    }>(
      `SELECT a.last_run_at, a.last_run_audited, a.audited::float8 AS audited,
              (SELECT extract(epoch FROM now() - make_interval(secs => :graceSeconds::float8) - n.delivered_at)::float8
                 FROM (${nextRowsAfter} LIMIT 1) AS n) AS behind_seconds
         FROM delivery_audit a`,
      { ...afterParams(cursor), graceSeconds },
    );
    const r = rows[0];
    return {
      cursor,
      lastRunAt: r?.last_run_at?.toISOString() ?? null,
      lastRunAudited: r?.last_run_audited ?? 0,
      audited: r?.audited ?? 0,
      behindSeconds: Math.max(0, Math.floor(r?.behind_seconds ?? 0)),
    };
  }
}
