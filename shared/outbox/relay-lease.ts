import type { SqlClient } from '../db/sql-client';

/**
 * Which slot of the run lease a run asks for: `primary` is slot 0, the one the tasks API reads
 * to decide whether to nudge; a `helper` takes any free slot from 1 to `maxRuns - 1`, started
 * by a run that met a backlog it cannot drain alone.
 */
export type RunRole = 'primary' | 'helper';

/**
 * The relay's run lease (`relay_lease`, migration 0007): at most one primary run and
 * `maxRuns - 1` helpers drain the outbox at a time, whatever the rate of nudges. A slot is
 * held for `leaseSeconds` and renewed while the run lasts; a run that dies frees it when the
 * lease runs out. Claims stay fenced by each row's own lease and token: the run lease decides
 * how many runs there are, never which rows are whose.
 */
export class RelayLeaseStore {
  constructor(private readonly db: SqlClient) {}

  /** Takes a free (or lapsed) slot for `owner`; the slot's number, or null when none is free. */
  async acquire(owner: string, role: RunRole, leaseSeconds: number, maxRuns: number): Promise<number | null> {
    // SKIP LOCKED: two helpers starting at once take two slots, not one each in turn.
    const { rows } = await this.db.query<{ slot: number }>(
      `UPDATE relay_lease l
          SET owner = :owner, lease_until = clock_timestamp() + make_interval(secs => :leaseSeconds::float8)
        WHERE l.slot = (SELECT slot FROM relay_lease
                         WHERE slot BETWEEN :first AND :last
                           AND (owner IS NULL OR lease_until < now())
                         ORDER BY slot LIMIT 1
                         FOR UPDATE SKIP LOCKED)
       RETURNING l.slot`,
      {
        owner,
        leaseSeconds,
        first: role === 'primary' ? 0 : 1,
        last: role === 'primary' ? 0 : Math.max(0, maxRuns - 1),
      },
    );
    return rows[0]?.slot ?? null;
  }

  /** Extends `owner`'s hold on `slot`; false when it lost it (its lease ran out and another run took it). */
  async renew(owner: string, slot: number, leaseSeconds: number): Promise<boolean> {
    const { rows } = await this.db.query(
      `UPDATE relay_lease SET lease_until = clock_timestamp() + make_interval(secs => :leaseSeconds::float8)
        WHERE slot = :slot AND owner = :owner
       RETURNING slot`,
      { owner, slot, leaseSeconds },
    );
    return rows.length > 0;
  }

  /** Frees `slot` if `owner` still holds it. */
  async release(owner: string, slot: number): Promise<void> {
    await this.db.query(
      'UPDATE relay_lease SET owner = NULL, lease_until = NULL WHERE slot = :slot AND owner = :owner',
      {
        owner,
        slot,
      },
    );
  }

  /**
   * How many tasks-API transactions that began before `since` are still open; `since` defaults
   * to this statement's own start, which is after the caller's release committed. Such a
   * transaction may have read the lease as held and skipped its nudge: once none is left, every
   * change that skipped one is committed and visible to the next read. `since` travels as
   * PostgreSQL's own text, microseconds and all.
   */
  async writersInFlight(since?: string): Promise<{ since: string; open: number }> {
    const { rows } = await this.db.query<{ since: string; open: number }>(
      since === undefined
        ? 'SELECT statement_timestamp()::text AS since, relay_writers_in_flight(statement_timestamp()) AS open'
        : 'SELECT :since::text AS since, relay_writers_in_flight(:since::text::timestamptz) AS open',
      since === undefined ? {} : { since },
    );
    const row = rows[0];
    if (!row) throw new Error('relay_writers_in_flight returned no row');
    return row;
  }
}
