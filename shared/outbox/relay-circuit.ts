import type { SqlClient } from '../db/sql-client';
import type { RelaySettings } from '../topology';

/** The circuit as a run reads it before it claims. */
export type CircuitView =
  | { readonly open: false }
  | {
      readonly open: true;
      /** How long it has been open. */
      readonly openForMs: number;
      /** Until the next probe may start (0: due now). */
      readonly probeInMs: number;
      /** Probes refused since it opened: the next waits {@link probeDelayMs} of one more. */
      readonly failedProbes: number;
      /** The transport's refusal that opened it, or the last probe's. */
      readonly cause: string;
    };

/** What closing the circuit did. */
export interface CircuitClosed {
  /** How long it was open. */
  readonly openForMs: number;
  /** Pending rows that were waiting (a backoff, a failed probe's wait) and are due now. */
  readonly madeDue: number;
}

/**
 * How long after its `failedProbes`-th refused probe the next probe waits (0: the first probe,
 * after the circuit opened): `probeBaseMs` doubling to `probeMaxMs`. No jitter: one run probes
 * at a time, whatever the number of relays.
 */
export function probeDelayMs(failedProbes: number, circuit: RelaySettings['circuit']): number {
  return Math.min(circuit.probeMaxMs, circuit.probeBaseMs * 2 ** Math.max(0, failedProbes));
}

/**
 * The relay's circuit over its transport (`relay_circuit`, migration 0010), shared by every
 * relay run, on AWS (each run is an invocation of its own) as locally.
 *
 * Invariants: while it is open no run claims a batch; at most one run at a time holds the probe
 * (`takeProbe` moves `probe_at` ahead in the statement that takes it, and a second run's
 * statement, waiting on the row lock, finds it ahead); it closes only by {@link close}, called
 * by a run whose probe the transport accepted, which makes every row waiting on a backoff due
 * in the same statement. Rows gain no attempts while it is open: the relay gives back every row
 * of a refused round, and a refused probe's row, with the attempt its claim counted.
 */
export class RelayCircuitStore {
  constructor(private readonly db: SqlClient) {}

  /** The circuit now, in one statement. */
  async read(): Promise<CircuitView> {
    const { rows } = await this.db.query<{
      open: boolean;
      open_ms: number | null;
      probe_in_ms: number | null;
      failed_probes: number;
      cause: string | null;
    }>(
      `SELECT opened_at IS NOT NULL AS open,
              (extract(epoch FROM now() - opened_at) * 1000)::float8 AS open_ms,
              (extract(epoch FROM probe_at - now()) * 1000)::float8 AS probe_in_ms,
              failed_probes, cause
         FROM relay_circuit WHERE id = 0`,
    );
    const r = rows[0];
    if (!r) throw new Error('relay_circuit has no row: migration 0010 did not run');
    if (!r.open) return { open: false };
    return {
      open: true,
      openForMs: Math.max(0, Math.round(r.open_ms ?? 0)),
      probeInMs: Math.max(0, Math.ceil(r.probe_in_ms ?? 0)),
      failedProbes: r.failed_probes,
      cause: r.cause ?? '',
    };
  }

  /**
   * Opens the circuit, its first probe `probeInMs` from now; true when this call opened it,
   * false when it was open already (another round, another run): the first cause is kept.
   */
  async open(cause: string, probeInMs: number): Promise<boolean> {
    const { rows } = await this.db.query(
      `UPDATE relay_circuit
          SET opened_at = now(), probe_at = now() + :probeInMs * interval '1 millisecond',
              failed_probes = 0, cause = left(:cause, 2000)
        WHERE id = 0 AND opened_at IS NULL
       RETURNING id`,
      { cause, probeInMs: Math.max(0, Math.round(probeInMs)) },
    );
    return rows.length > 0;
  }

  /**
   * Takes the probe when one is due: true for one caller, which then probes; `probe_at` moves
   * `holdMs` ahead meanwhile, so a run that dies while probing delays the next probe by that
   * much and no more.
   */
  async takeProbe(holdMs: number): Promise<boolean> {
    const { rows } = await this.db.query(
      `UPDATE relay_circuit SET probe_at = now() + :holdMs * interval '1 millisecond'
        WHERE id = 0 AND opened_at IS NOT NULL AND probe_at <= now()
       RETURNING id`,
      { holdMs: Math.max(0, Math.round(holdMs)) },
    );
    return rows.length > 0;
  }

  /** The probe was refused too: counted, with its cause, and the next one `probeInMs` from now. */
  async probeFailed(cause: string, probeInMs: number): Promise<void> {
    await this.db.query(
      `UPDATE relay_circuit
          SET failed_probes = failed_probes + 1, cause = left(:cause, 2000),
              probe_at = now() + :probeInMs * interval '1 millisecond'
        WHERE id = 0 AND opened_at IS NOT NULL`,
      { cause, probeInMs: Math.max(0, Math.round(probeInMs)) },
    );
  }

  /**
   * The next probe may start now: the transport said it is back (the local bus's journal writes
   * again), or a probe found no row to publish and the next due row should not wait. False when
   * the circuit is closed.
   */
  async probeNow(): Promise<boolean> {
    const { rows } = await this.db.query(
      'UPDATE relay_circuit SET probe_at = now() WHERE id = 0 AND opened_at IS NOT NULL RETURNING id',
    );
    return rows.length > 0;
  }

  /**
   * Closes the circuit (a probe was accepted) and, in the same statement, makes due now every
   * pending row waiting on a backoff or on a refused probe's wait: the transport is back, and
   * what waited for it should not wait out a backoff the outage built. Reads pending rows
   * through their partial index. Null when it was not open (another run's probe closed it).
   */
  async close(): Promise<CircuitClosed | null> {
    // The self-join reads the row as it was (`was.opened_at`); the WHERE on `c` is rechecked on
    // the newest version when two runs close at once, so only the first one closes it.
    const { rows } = await this.db.query<{ open_ms: number; made_due: number }>(
      `WITH closed AS (
         UPDATE relay_circuit c
            SET opened_at = NULL, probe_at = NULL, failed_probes = 0, cause = NULL
           FROM relay_circuit was
          WHERE c.id = 0 AND was.id = 0 AND c.opened_at IS NOT NULL
         RETURNING was.opened_at
       ),
       due AS (
         UPDATE outbox SET next_attempt_at = now()
          WHERE status = 'pending' AND next_attempt_at > now() AND EXISTS (SELECT 1 FROM closed)
         RETURNING 1
       )
       SELECT (extract(epoch FROM now() - opened_at) * 1000)::float8 AS open_ms,
              (SELECT count(*) FROM due)::int AS made_due
         FROM closed`,
    );
    const r = rows[0];
    return r ? { openForMs: Math.max(0, Math.round(r.open_ms)), madeDue: r.made_due } : null;
  }
}
