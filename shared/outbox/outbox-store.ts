import { type SqlClient, type SqlExecutor, sqlParam } from '../db/sql-client';
import type { OutboundEvent } from '../events/cloud-event';

/** A row the relay claimed: publish it, then settle it with its own token. */
export interface ClaimedEvent extends OutboundEvent {
  /** Publish attempts so far, this one included. */
  readonly attempts: number;
  /** Fencing token of this claim: settling a failure requires it unchanged. */
  readonly claimToken: number;
  /** The row had a lease that ran out without being settled (a relay died or stalled). */
  readonly leaseExpired: boolean;
  /**
   * Set when the payload is too large for one row of a Data API response: the claim leaves
   * it out (`payload` is null) and says how large it is, so the relay can declare it dead.
   */
  readonly oversizePayloadBytes?: number;
}

/** How much one claim takes. */
export interface ClaimLimits {
  /** Rows at most. */
  readonly rows: number;
  /** How long the claim is the owner's. */
  readonly leaseSeconds: number;
  /** Bytes at most, as the Data API counts its response; and per row (larger payloads are left out). */
  readonly bytes: { readonly perClaim: number; readonly perRow: number };
  /** A due row claimed this many times without a settle goes `dead` instead. */
  readonly maxUnsettledClaims: number;
}

/** What a claim did: the rows it took, and the rows it declared dead for never settling. */
export interface Claim {
  readonly claimed: ClaimedEvent[];
  /** Ids marked `dead` because their last `maxUnsettledClaims` claims never settled. */
  readonly wedged: string[];
  /**
   * The claim stopped at one of its bounds (rows, or bytes) with due rows possibly left: claim
   * again at once. False when it took every due row it saw, so the outbox holds nothing more
   * that is due and unclaimed.
   */
  readonly more: boolean;
  /**
   * How long the statement ran in the database (`clock_timestamp() - statement_timestamp()`),
   * in milliseconds; absent when it returned no row. Against the claim's round trip it tells a
   * relay whether it waits on the database's own work or on the way there and back.
   */
  readonly databaseMs?: number;
}

export interface Delivered {
  readonly eventId: string;
  readonly busEventId: string;
}

export interface Failed {
  readonly eventId: string;
  readonly claimToken: number;
  readonly error: string;
  /** `dead`: never try again; otherwise try again after `retryInMs`. */
  readonly dead: boolean;
  readonly retryInMs: number;
}

/**
 * What the relay reports after a run, read through the pending and dead partial indexes only:
 * its cost follows the rows still to deliver, never the delivered history.
 */
export interface OutboxStats {
  readonly pending: number;
  readonly dead: number;
  /** Age of the oldest pending event in seconds, 0 when none is pending. */
  readonly oldestPendingAgeSeconds: number;
  /**
   * Milliseconds until the next pending row may be claimed: its backoff over and no live lease
   * on it (0: due now); null when nothing is pending. A run returns when it is above 0, and the
   * caller wakes a run again then.
   */
  readonly nextDueInMs: number | null;
}

export interface DeadEvent {
  readonly eventId: string;
  readonly eventType: string;
  readonly aggregateId: string;
  readonly attempts: number;
  readonly lastError: string | null;
  readonly createdAt: Date;
}

interface ClaimRow {
  event_id: string;
  event_type: string;
  aggregate_id: string;
  aggregate_version: number;
  payload: unknown;
  payload_bytes: number;
  created_at: Date;
  attempts: number;
  claim_token: number;
  lease_expired: boolean;
  wedged: boolean;
  due_count: number;
  database_ms: number;
  [k: string]: unknown;
}

/**
 * The bytes a claimed row adds to a Data API response besides its payload: the other eleven
 * columns as `{"stringValue": …}`-style fields, about 350 bytes (two uuids of 54 bytes each, a
 * timestamp of 44, the rest 15 to 35 each), with room to spare. The column metadata comes once
 * per response, within the margin `claimBytes.perClaim` leaves below 1 MiB.
 */
const claimRowOverheadBytes = 512;

/**
 * The claim fence of every settle but "delivered": the row `x.event_id` is still pending and
 * still claimed by `:owner` with the token `x.claim_token`. A take-over bumps the token, so a
 * relay whose lease ran out changes nothing the new claim decides.
 */
const claimFence = `o.event_id = x.event_id
          AND o.status = 'pending'
          AND o.claim_owner = :owner
          AND o.claim_token = x.claim_token`;

/** Where a redrive of every dead event stands: after this row (`created_at` as PostgreSQL's text, to the microsecond). */
export interface DeadRedriveCursor {
  readonly createdAt: string;
  readonly eventId: string;
}

/** Everything the outbox needs from PostgreSQL, in one place and through the SqlClient port. */
export class OutboxStore {
  constructor(private readonly db: SqlClient) {}

  /**
   * Appends an event inside the caller's transaction: the state change and its event commit
   * or roll back together.
   */
  async append(
    tx: SqlExecutor,
    event: {
      eventId: string;
      eventType: string;
      aggregateId: string;
      aggregateVersion: number;
      payload: unknown;
    },
  ): Promise<void> {
    await tx.query(
      `INSERT INTO outbox (event_id, event_type, aggregate_id, aggregate_version, payload)
       VALUES (:eventId, :eventType, :aggregateId, :aggregateVersion, :payload)`,
      {
        eventId: sqlParam.uuid(event.eventId),
        eventType: event.eventType,
        aggregateId: sqlParam.uuid(event.aggregateId),
        aggregateVersion: event.aggregateVersion,
        payload: sqlParam.json(event.payload),
      },
    );
  }

  /**
   * Claims due pending rows for `owner`, oldest first, within `limits`.
   *
   * The lock: the inner SELECT takes row locks with FOR UPDATE SKIP LOCKED, so concurrent
   * relays each get disjoint rows without waiting on each other; the UPDATE then bumps
   * `claim_token` (the fencing token), `attempts` and `unsettled_claims`, and sets the lease. A
   * row whose lease ran out is claimable again; its old owner's token no longer matches, so
   * that owner cannot record a failure over the new claim. `lease_expired` reports such
   * take-overs for the metric.
   *
   * The size: rows are taken while their running total stays within `bytes.perClaim`, counted
   * as the Data API counts its response (the payload's jsonb text, escaped again as a JSON
   * string: a quote or a control character in a title grows fourfold to sevenfold), so the
   * response can never pass the 1 MiB limit and fail after the UPDATE committed. A payload over
   * `bytes.perRow` is left out of the answer (the Data API refuses rows over 64 KB) and reported
   * by size; the relay declares it dead. At least one row is always taken.
   *
   * The wedged: a due row whose last `maxUnsettledClaims` claims never settled (every relay
   * that took it crashed or timed out) is marked `dead` with that reason in the same statement,
   * in place of being claimed (it takes its place in this batch, never one in the next).
   *
   * `more`: every answered row carries how many due rows the claim locked, so the caller knows
   * whether a short answer means a drained outbox or a byte bound (claim again at once).
   */
  async claim(owner: string, limits: ClaimLimits): Promise<Claim> {
    const { rows } = await this.db.query<ClaimRow>(
      `WITH due AS (
         SELECT event_id, created_at, unsettled_claims,
                lease_until IS NOT NULL AS lease_expired,
                octet_length(to_json(payload::text)::text) AS payload_bytes
           FROM outbox
          WHERE status = 'pending'
            AND next_attempt_at <= now()
            AND (lease_until IS NULL OR lease_until < now())
          ORDER BY created_at
          LIMIT :rows
          FOR UPDATE SKIP LOCKED
       ),
       sized AS (
         SELECT due.*,
                sum(:rowOverhead + CASE WHEN payload_bytes > :perRow THEN 0 ELSE payload_bytes END)
                  OVER (ORDER BY created_at, event_id) AS running,
                row_number() OVER (ORDER BY created_at, event_id) AS n
           FROM due
          WHERE unsettled_claims < :maxUnsettled
       ),
       taken AS (
         UPDATE outbox o
            SET claim_owner      = :owner,
                claim_token      = o.claim_token + 1,
                lease_until      = clock_timestamp() + make_interval(secs => :leaseSeconds::float8),
                attempts         = o.attempts + 1,
                unsettled_claims = o.unsettled_claims + 1
           FROM sized
          WHERE o.event_id = sized.event_id
            AND (sized.running <= :perClaim OR sized.n = 1)
         RETURNING o.event_id, o.event_type, o.aggregate_id, o.aggregate_version,
                   CASE WHEN sized.payload_bytes > :perRow THEN NULL ELSE o.payload END AS payload,
                   sized.payload_bytes, o.created_at, o.attempts, o.claim_token, sized.lease_expired
       ),
       wedged AS (
         UPDATE outbox o
            SET status = 'dead', lease_until = NULL,
                last_error = format('claimed %s times in a row without being marked: every relay that took it '
                                    'crashed or timed out (last error: %s)',
                                    o.unsettled_claims, coalesce(o.last_error, 'none'))
           FROM due
          WHERE o.event_id = due.event_id AND due.unsettled_claims >= :maxUnsettled
         RETURNING o.event_id
       )
       SELECT taken.*, false AS wedged, (SELECT count(*) FROM due)::int AS due_count,
              (extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000)::float8 AS database_ms
         FROM taken
       UNION ALL
       SELECT wedged.event_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, true,
              (SELECT count(*) FROM due)::int,
              (extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000)::float8
         FROM wedged`,
      {
        owner,
        rows: limits.rows,
        leaseSeconds: limits.leaseSeconds,
        perClaim: limits.bytes.perClaim,
        perRow: limits.bytes.perRow,
        rowOverhead: claimRowOverheadBytes,
        maxUnsettled: limits.maxUnsettledClaims,
      },
    );
    const claimed = rows
      .filter((r) => !r.wedged)
      .map(
        (r): ClaimedEvent => ({
          eventId: r.event_id,
          eventType: r.event_type,
          aggregateId: r.aggregate_id,
          aggregateVersion: r.aggregate_version,
          payload: r.payload,
          createdAt: r.created_at,
          attempts: r.attempts,
          claimToken: r.claim_token,
          leaseExpired: r.lease_expired,
          ...(r.payload === null && r.payload_bytes > limits.bytes.perRow
            ? { oversizePayloadBytes: r.payload_bytes }
            : {}),
        }),
      )
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
    const dueCount = rows[0]?.due_count ?? 0;
    return {
      claimed,
      wedged: rows.filter((r) => r.wedged).map((r) => r.event_id),
      more: dueCount >= limits.rows || rows.length < dueCount,
      ...(rows.length > 0 ? { databaseMs: Math.max(...rows.map((r) => r.database_ms)) } : {}),
    };
  }

  /**
   * Marks published rows delivered: every row still pending, whoever holds its claim now. An
   * event the bus accepted is delivered, whichever relay put it there; fencing this mark would
   * refuse it whenever another relay had taken the row over meanwhile, and with rounds slower
   * than the lease every mark would be refused and the event re-published for ever. A row
   * another relay settled first (delivered, or redriven and dead) is left as it is. Returns the
   * ids it marked; the first accepted publish's bus event id is the one kept.
   */
  async markDelivered(items: readonly Delivered[]): Promise<string[]> {
    if (items.length === 0) return [];
    const { rows } = await this.db.query<{ event_id: string }>(
      `UPDATE outbox o
          SET status = 'delivered', delivered_at = now(), bus_event_id = x.bus_event_id,
              lease_until = NULL, last_error = NULL, unsettled_claims = 0
         FROM jsonb_to_recordset(:items::jsonb) AS x(event_id uuid, bus_event_id text)
        WHERE o.event_id = x.event_id
          AND o.status = 'pending'
       RETURNING o.event_id`,
      {
        items: sqlParam.json(items.map((i) => ({ event_id: i.eventId, bus_event_id: i.busEventId }))),
      },
    );
    return rows.map((r) => r.event_id);
  }

  /**
   * Records failed publishes, fenced: only rows still pending and still claimed by `owner` with
   * the same token (a take-over bumps the token, and then the old owner's failure changes
   * nothing: the new claim decides). Back off, or `dead` with the reason.
   */
  async markFailed(owner: string, items: readonly Failed[]): Promise<string[]> {
    if (items.length === 0) return [];
    const { rows } = await this.db.query<{ event_id: string }>(
      `UPDATE outbox o
          SET status = CASE WHEN x.dead THEN 'dead' ELSE 'pending' END,
              next_attempt_at = now() + x.retry_in_ms * interval '1 millisecond',
              last_error = left(x.error, 2000),
              lease_until = NULL,
              unsettled_claims = 0
         FROM jsonb_to_recordset(:items::jsonb) AS x(event_id uuid, claim_token bigint, error text, dead boolean, retry_in_ms bigint)
        WHERE ${claimFence}
       RETURNING o.event_id`,
      {
        owner,
        items: sqlParam.json(
          items.map((i) => ({
            event_id: i.eventId,
            claim_token: i.claimToken,
            error: i.error,
            dead: i.dead,
            retry_in_ms: Math.max(0, Math.round(i.retryInMs)),
          })),
        ),
      },
    );
    return rows.map((r) => r.event_id);
  }

  /**
   * Gives claimed rows back unpublished, fenced like a failure: claimable again, and the attempt
   * (and the unsettled claim) the claim counted is taken back, so a row the transport refused as
   * a whole (the relay's circuit) gains no attempt and no backoff. `error` is kept as the row's
   * last error, for an operator; `holdMs` keeps it from being claimed for that long (a refused
   * probe's row, so the next probe takes another: see RelayCircuitStore).
   */
  async release(
    owner: string,
    items: readonly { eventId: string; claimToken: number }[],
    options: { readonly error?: string; readonly holdMs?: number } = {},
  ): Promise<string[]> {
    if (items.length === 0) return [];
    const { rows } = await this.db.query<{ event_id: string }>(
      `UPDATE outbox o
          SET lease_until = NULL, attempts = greatest(o.attempts - 1, 0),
              unsettled_claims = greatest(o.unsettled_claims - 1, 0),
              next_attempt_at = greatest(o.next_attempt_at, now() + :holdMs * interval '1 millisecond'),
              last_error = CASE WHEN :error = '' THEN o.last_error ELSE left(:error, 2000) END
         FROM jsonb_to_recordset(:items::jsonb) AS x(event_id uuid, claim_token bigint)
        WHERE ${claimFence}
       RETURNING o.event_id`,
      {
        owner,
        items: sqlParam.json(items.map((i) => ({ event_id: i.eventId, claim_token: i.claimToken }))),
        error: options.error ?? '',
        holdMs: Math.max(0, Math.round(options.holdMs ?? 0)),
      },
    );
    return rows.map((r) => r.event_id);
  }

  /**
   * Pending and dead counts, the oldest pending age and the next due time, in one statement.
   * Each part filters on the status of a partial index (`outbox_pending_idx`, `outbox_dead_idx`),
   * so it reads the rows still to deliver and the dead ones, whatever the delivered history
   * (test/integration/outbox-plans.test.ts checks the plans).
   */
  async stats(): Promise<OutboxStats> {
    const { rows } = await this.db.query<{
      pending: number;
      dead: number;
      oldest_age: number;
      next_due_ms: number | null;
    }>(
      `SELECT p.pending, (SELECT count(*) FROM outbox WHERE status = 'dead')::int AS dead,
              coalesce(extract(epoch FROM now() - p.oldest), 0)::float8 AS oldest_age,
              (extract(epoch FROM p.next_due - now()) * 1000)::float8 AS next_due_ms
         FROM (SELECT count(*)::int AS pending, min(created_at) AS oldest,
                      min(greatest(next_attempt_at, coalesce(lease_until, '-infinity'))) AS next_due
                 FROM outbox WHERE status = 'pending') AS p`,
    );
    const r = rows[0];
    const nextDue = r?.next_due_ms;
    return {
      pending: r?.pending ?? 0,
      dead: r?.dead ?? 0,
      oldestPendingAgeSeconds: Math.max(0, r?.oldest_age ?? 0),
      nextDueInMs: nextDue === null || nextDue === undefined ? null : Math.max(0, Math.ceil(nextDue)),
    };
  }

  /**
   * Delivered rows still kept, for the ops status: appended minus deleted (counters that the
   * tasks API's and the purge's writes keep, migration 0007) minus what is pending or dead (the
   * two partial indexes). Off the relay's path, and the same few reads whatever the history.
   */
  async deliveredCount(): Promise<number> {
    const { rows } = await this.db.query<{ delivered: number }>(
      `SELECT (coalesce(sum(n) FILTER (WHERE name = 'outbox.appended'), 0)
               - coalesce(sum(n) FILTER (WHERE name = 'outbox.deleted'), 0)
               - (SELECT count(*) FROM outbox WHERE status = 'pending')
               - (SELECT count(*) FROM outbox WHERE status = 'dead'))::float8 AS delivered
         FROM pipeline_counters WHERE name IN ('outbox.appended', 'outbox.deleted')`,
    );
    return Math.max(0, rows[0]?.delivered ?? 0);
  }

  /**
   * Deletes at most `batchSize` delivered rows older than `retentionHours`; returns how many.
   *
   * The bound: the rows are chosen once, in a MATERIALIZED CTE, and the DELETE joins on that
   * fixed set. `DELETE … WHERE event_id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)` let the
   * planner run the sub-select more than once (a re-check after a concurrent change, or a plan
   * that re-scans it), and with equal `delivered_at` each run could pick other rows: a batch of
   * 3 deleted 4. A materialized CTE is evaluated exactly once per statement:
   * https://www.postgresql.org/docs/current/queries-with.html#QUERIES-WITH-CTE-MATERIALIZATION
   */
  async purgeDelivered(retentionHours: number, batchSize: number): Promise<number> {
    const { rowCount } = await this.db.query(
      `WITH victims AS MATERIALIZED (
         SELECT event_id FROM outbox
          WHERE status = 'delivered' AND delivered_at < now() - make_interval(hours => :retentionHours::int)
          ORDER BY delivered_at
          LIMIT :batchSize
          FOR UPDATE SKIP LOCKED
       )
       DELETE FROM outbox o USING victims v WHERE o.event_id = v.event_id`,
      { retentionHours, batchSize },
    );
    return rowCount;
  }

  /** Dead events, oldest first. */
  async listDead(limit = 100): Promise<DeadEvent[]> {
    const { rows } = await this.db.query<{
      event_id: string;
      event_type: string;
      aggregate_id: string;
      attempts: number;
      last_error: string | null;
      created_at: Date;
    }>(
      `SELECT event_id, event_type, aggregate_id, attempts, last_error, created_at
         FROM outbox WHERE status = 'dead' ORDER BY created_at LIMIT :limit`,
      { limit },
    );
    return rows.map((r) => ({
      eventId: r.event_id,
      eventType: r.event_type,
      aggregateId: r.aggregate_id,
      attempts: r.attempts,
      lastError: r.last_error,
      createdAt: r.created_at,
    }));
  }

  /**
   * Puts up to `batchSize` dead events back to pending with fresh attempts, in one statement:
   * the oldest after `after` (every dead event when null), walked by (created_at, event_id).
   * Returns how many and the last one taken: pass it back as `after` for the next batch (call
   * again while a batch comes back full). A walk takes each event once: one it put back that
   * the relay makes dead again (an entry that can never succeed) is behind the walk, so a redrive
   * of everything never loops over events that die again.
   */
  async redriveDeadBatch(
    batchSize = 1_000,
    after: DeadRedriveCursor | null = null,
  ): Promise<{ readonly redriven: number; readonly last: DeadRedriveCursor | null }> {
    // MATERIALIZED: the rows are picked once, so the count and the cursor are those of the
    // rows the UPDATE changed (a CTE inlined into IN (...) may be evaluated again).
    const { rows } = await this.db.query<{
      redriven: number;
      last_at: string | null;
      last_id: string | null;
    }>(
      `WITH picked AS MATERIALIZED (
         SELECT event_id, created_at FROM outbox
          WHERE status = 'dead' AND (created_at, event_id) > (:afterAt::timestamptz, :afterId::uuid)
          ORDER BY created_at, event_id
          LIMIT :batchSize
          FOR UPDATE SKIP LOCKED
       ),
       moved AS (
         UPDATE outbox o
            SET status = 'pending', attempts = 0, unsettled_claims = 0, next_attempt_at = now(), lease_until = NULL
           FROM picked p
          WHERE o.event_id = p.event_id AND o.status = 'dead'
         RETURNING o.event_id
       ),
       last AS (SELECT created_at, event_id FROM picked ORDER BY created_at DESC, event_id DESC LIMIT 1)
       SELECT (SELECT count(*) FROM moved)::int AS redriven,
              (SELECT created_at::text FROM last) AS last_at,
              (SELECT event_id::text FROM last) AS last_id`,
      {
        batchSize,
        afterAt: after?.createdAt ?? '-infinity',
        afterId: sqlParam.uuid(after?.eventId ?? '00000000-0000-0000-0000-000000000000'),
      },
    );
    const r = rows[0];
    return {
      redriven: r?.redriven ?? 0,
      last: r?.last_at && r.last_id ? { createdAt: r.last_at, eventId: r.last_id } : null,
    };
  }

  /**
   * Makes due now every pending row backing off after a failure whose error contains `cause`:
   * what an outage that is over left waiting (the local bus's journal refusing events while its
   * disk was full), so its backoff (up to the relay's `backoff.maxMs`) does not hold them once
   * the outage is over. Attempts are kept: the maximum event age still counts from the first.
   * Reads pending rows only (their partial index): its cost is the backlog's, not the history's.
   */
  async dueAfterOutage(cause: string): Promise<number> {
    const { rowCount } = await this.db.query(
      `UPDATE outbox SET next_attempt_at = now()
        WHERE status = 'pending' AND next_attempt_at > now()
          AND strpos(last_error, :cause) > 0`,
      { cause },
    );
    return rowCount;
  }

  /** Puts a dead event back to pending with fresh attempts; false when it is not dead. */
  async redriveDead(eventId: string): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `UPDATE outbox SET status = 'pending', attempts = 0, unsettled_claims = 0, next_attempt_at = now(), lease_until = NULL
        WHERE event_id = :eventId AND status = 'dead'`,
      { eventId: sqlParam.uuid(eventId) },
    );
    return rowCount > 0;
  }
}
