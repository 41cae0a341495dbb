import { randomUUID } from 'node:crypto';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import { sleep as realSleep } from '../db/retry';
import type { OutboxStats } from './outbox-store';
import {
  addRounds,
  type CircuitReport,
  type RelayDeps,
  type RelayRunSettings,
  type RunReport,
  runRelay,
} from './relay';
import type { RelayLeaseStore, RunRole } from './relay-lease';
import { addRelayMetrics } from './relay-metrics';

/**
 * What invokes the relay: a sweep (a scheduled rule's event), the tasks API's nudge
 * `{"nudge": true}`, or a wake-up (`{"wake": "due" | "helper"}`, on AWS inside an SQS event's
 * records). Only a helper wake-up changes what a run does; every other event asks the same:
 * drain what is due and return.
 */
export type RelayEvent = { readonly nudge?: boolean } | Record<string, unknown> | null | undefined;

/** What a wake-up asks for: a run for rows due (`due`), or a helper for a backlog (`helper`). */
export type WakeReason = 'due' | 'helper';

/**
 * Wakes a relay run later (or now): on AWS a message with a delivery delay on the relay's wake
 * queue (SendMessage: a data-plane call, never a rule switched on and off), locally a timer of
 * the relay runner. Used when a run ends with rows due later (a backoff, a lease that has not
 * run out), when its time runs out with rows still due, and to start a helper on a backlog.
 */
export interface RelayWakeups {
  wakeAfter(ms: number, reason: WakeReason): Promise<void>;
}

/** The relay settings the invocation reads besides the run's own (tests shrink them). */
export type RelayInvocationSettings = RelayRunSettings & {
  readonly runLeaseSeconds: number;
  readonly maxRuns: number;
};

export interface RelayInvocationDeps extends Omit<RelayDeps, 'owner' | 'settings' | 'circuit'> {
  readonly settings: RelayInvocationSettings;
  /** The circuit over the transport (RelayCircuitStore): every deployed relay keeps one. */
  readonly circuit: NonNullable<RelayDeps['circuit']>;
  readonly lease: Pick<RelayLeaseStore, 'acquire' | 'renew' | 'release' | 'writersInFlight'>;
  readonly wakeups: RelayWakeups;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Aborted on shutdown (local runtime): stop claiming, settle the round in flight. */
  readonly signal?: AbortSignal;
  /** Pauses between two reads of the writers in flight; tests pass their own. */
  readonly sleep?: (ms: number) => Promise<void>;
}

/** The JSON the relay function returns (visible in a test invoke and in the local runtime). */
export type RelaySummary =
  | (Omit<RunReport, 'stats' | 'circuit'> &
      RunReport['stats'] & {
        readonly owner: string;
        readonly role: RunRole;
        readonly slot: number;
        readonly circuit: CircuitSummary;
      })
  | { readonly owner: string; readonly role: RunRole; readonly skipped: 'a run holds the lease' };

/** A helper wake-up, as the runner or SQS hands it over (a record's body is the message). */
export function isHelperWake(event: RelayEvent): boolean {
  const records = (event as { Records?: { body?: string }[] } | null | undefined)?.Records;
  const bodies = Array.isArray(records) ? records.map((r) => r.body ?? '') : [];
  const direct = (event as { wake?: unknown } | null | undefined)?.wake;
  return (
    direct === 'helper' ||
    (bodies.length > 0 &&
      bodies.every((b) => {
        try {
          return (JSON.parse(b) as { wake?: unknown }).wake === 'helper';
        } catch {
          return false;
        }
      }))
  );
}

const writersPollMs = { first: 5, max: 250 } as const;

/**
 * Builds the relay's Lambda body. A run first takes a slot of the run lease: the primary slot
 * for a nudge, a sweep or a due wake-up, a helper slot for a helper wake-up; an invocation that
 * finds its slot held returns at once (one statement), so a thousand nudges a second start one
 * run, not a thousand. The holder drains while rows are due, renewing its slot, and then:
 *
 * - a primary releases its slot, waits until every tasks-API transaction that began before the
 *   release has ended (such a change may have read the lease as held and skipped its nudge),
 *   and looks once more: rows due now are drained under the slot taken again (or left to the
 *   run that took it meanwhile). No change is left waiting for a sweep.
 * - a run whose time ran out with rows still due wakes a successor at once; rows due later (a
 *   backoff) get a wake-up for when they are due; a backlog one run does not drain wakes a
 *   helper (at most `maxRuns - 1`). No control-plane call is on this path.
 *
 * While the transport's circuit is open a run claims nothing and ends at once (or probes, when
 * the probe is due): it wakes a run for the next probe, never a successor for the rows that
 * wait (they are due, but not to be claimed). A run that opened or closed it logs so.
 *
 * Then the metrics of what it did.
 */
export function createRelayInvocation(deps: RelayInvocationDeps) {
  const { settings, lease } = deps;
  const pause = deps.sleep ?? realSleep;
  return async (
    event: RelayEvent,
    context: Pick<Context, 'getRemainingTimeInMillis' | 'awsRequestId'>,
  ): Promise<RelaySummary> => {
    const owner = `relay-${context.awsRequestId || randomUUID()}`;
    const role: RunRole = isHelperWake(event) ? 'helper' : 'primary';
    const budgetLeft = () => context.getRemainingTimeInMillis() - settings.budgetMarginMs;
    let slot = await lease.acquire(owner, role, settings.runLeaseSeconds, settings.maxRuns);
    if (slot === null) {
      deps.logger.debug('a relay run holds the lease; it drains what this invocation was for', { role });
      return { owner, role, skipped: 'a run holds the lease' };
    }
    const held = { slot: slot as number | null };
    const renewal = setInterval(
      () => {
        const s = held.slot;
        if (s === null) return;
        // Past the invocation's time the run is over, whatever it still awaits: Lambda ends an
        // invocation at its timeout, and the local runner abandons it. A renewal now would keep
        // its slot from lapsing for as long as whatever held the run (a hung backend) holds it.
        if (context.getRemainingTimeInMillis() <= 0) {
          clearInterval(renewal);
          return;
        }
        lease.renew(owner, s, settings.runLeaseSeconds).then(
          (kept) => {
            if (!kept)
              deps.logger.warn('the relay lost its run lease (it ran out); claims stay fenced', { slot: s });
          },
          (err: unknown) => deps.logger.warn('renewing the run lease failed', { slot: s, error: err }),
        );
      },
      (settings.runLeaseSeconds * 1_000) / 3,
    );
    renewal.unref?.();
    let helperAskedAt = Number.NEGATIVE_INFINITY;
    const clock = deps.clock ?? Date.now;
    const askHelper = () => {
      // At most one helper asked per lease period: it needs that long to start and take a slot.
      if (settings.maxRuns < 2 || clock() - helperAskedAt < settings.runLeaseSeconds * 1_000) return;
      helperAskedAt = clock();
      deps.wakeups.wakeAfter(0, 'helper').catch((err: unknown) => {
        deps.logger.warn('asking for a relay helper failed; this run drains alone', { error: err });
      });
    };

    let totals: Omit<RunReport, 'stats' | 'circuit'> | undefined;
    let stats: OutboxStats | undefined;
    let circuit: CircuitSeen | undefined;
    // Rows were still due when this run had to stop: a successor is woken at once.
    let successor = false;
    try {
      for (;;) {
        const run = await runRelay(
          {
            outbox: deps.outbox,
            publisher: deps.publisher,
            circuit: deps.circuit,
            settings,
            random: deps.random,
            clock: deps.clock,
            owner,
          },
          {
            remainingMs: () => context.getRemainingTimeInMillis(),
            signal: deps.signal,
            onBacklog: askHelper,
          },
        );
        totals = totals ? add(totals, run) : run;
        stats = run.stats;
        circuit = seen(circuit, run.circuit);
        // Open: the rows wait for the probe, not for a successor.
        if (run.circuit.open) break;
        if (stats.nextDueInMs === 0) {
          successor = !deps.signal?.aborted;
          break;
        }
        if (role === 'helper') break;
        // Nothing is due now: give the slot up, then make sure no change that saw it held is left.
        held.slot = null;
        await lease.release(owner, slot);
        await writersDone(lease, budgetLeft, pause);
        stats = await deps.outbox.stats();
        if (stats.nextDueInMs !== 0) break;
        if (budgetLeft() <= 0) {
          successor = true;
          break;
        }
        const again = await lease.acquire(owner, 'primary', settings.runLeaseSeconds, settings.maxRuns);
        // Another run took the slot meanwhile (a nudge saw it free): the rows are its.
        if (again === null) break;
        slot = again;
        held.slot = again;
      }
    } finally {
      clearInterval(renewal);
      if (held.slot !== null) await lease.release(owner, held.slot).catch(() => {});
    }
    if (!totals || !stats || !circuit) throw new Error('a relay run ended without a report');
    await wakeFor(deps, successor ? 0 : circuit.last.open ? circuit.last.probeInMs : stats.nextDueInMs);
    const settled: RunReport = { ...totals, stats, circuit: circuit.last };
    addRelayMetrics(deps.metrics, settled, {
      opened: circuit.opened !== undefined,
      closed: circuit.closed !== undefined,
      failedProbes: circuit.failedProbes,
    });
    const summary: RelaySummary = {
      owner,
      role,
      slot,
      ...totals,
      ...stats,
      circuit: circuitSummary(circuit),
    };
    // Info, not warn: the CircuitOpened metric and the oldest-age alarm are what alert; these
    // lines are the record (the local runtime logs its own, and keeps this logger at WARN).
    if (circuit.opened !== undefined)
      deps.logger.info(
        "the transport refused every event: the relay's circuit opened; no run claims until a probe is accepted",
        { cause: circuit.opened, held: totals.held, nextProbeInMs: circuit.last.probeInMs },
      );
    if (circuit.closed)
      deps.logger.info("the relay's circuit closed: a probe was accepted, every waiting event is due", {
        openForMs: circuit.closed.openForMs,
        madeDue: circuit.closed.madeDue,
      });
    if (settled.dead > 0) deps.logger.warn('events went dead', { dead: settled.dead, totalDead: stats.dead });
    if (settled.expiredLeases > 0)
      deps.logger.warn('took over expired leases', { expiredLeases: settled.expiredLeases });
    deps.logger.info('relay run', { ...summary });
    return summary;
  };
}

/** Waits (bounded by the budget) until no tasks-API transaction older than now is open. */
async function writersDone(
  lease: RelayInvocationDeps['lease'],
  budgetLeft: () => number,
  pause: (ms: number) => Promise<void>,
): Promise<void> {
  let { since, open } = await lease.writersInFlight();
  let waitMs: number = writersPollMs.first;
  while (open > 0 && budgetLeft() > waitMs) {
    await pause(waitMs);
    waitMs = Math.min(waitMs * 2, writersPollMs.max);
    ({ since, open } = await lease.writersInFlight(since));
  }
}

/**
 * What is left for later: `inMs` 0 when rows were still due as the run had to stop (a successor
 * now), the next due time of rows backing off, null when nothing is pending. A failed wake-up
 * is logged: the sweep still comes.
 */
async function wakeFor(deps: RelayInvocationDeps, inMs: number | null): Promise<void> {
  if (inMs === null) return;
  try {
    await deps.wakeups.wakeAfter(inMs, 'due');
  } catch (err) {
    deps.logger.warn('scheduling the next relay run failed; the sweep delivers those rows', {
      inMs,
      error: err,
    });
  }
}

/** Two runs' counts added up (the stats and the circuit are the last one's, kept apart). */
function add(a: Omit<RunReport, 'stats' | 'circuit'>, b: RunReport): Omit<RunReport, 'stats' | 'circuit'> {
  return { ...addRounds(a, b), rounds: a.rounds + b.rounds, purged: a.purged + b.purged };
}

/** What an invocation's runs did to the circuit, and how the last one left it. */
interface CircuitSeen {
  readonly last: CircuitReport;
  /** A run of this invocation opened it, refused with this cause. */
  readonly opened?: string;
  /** A run's probe closed it (the last close, when it opened and closed more than once). */
  readonly closed?: NonNullable<CircuitReport['closed']>;
  /** Probes the transport refused. */
  readonly failedProbes: number;
}

function seen(before: CircuitSeen | undefined, run: CircuitReport): CircuitSeen {
  const opened = run.opened ?? before?.opened;
  const closed = run.closed ?? before?.closed;
  return {
    last: run,
    failedProbes: (before?.failedProbes ?? 0) + run.failedProbes,
    ...(opened === undefined ? {} : { opened }),
    ...(closed === undefined ? {} : { closed }),
  };
}

/** The circuit in the invocation's summary: how the runs left it, and what they did to it. */
export interface CircuitSummary {
  readonly open: boolean;
  readonly nextProbeInMs?: number | null;
  readonly cause?: string;
  readonly opened?: string;
  readonly closed?: NonNullable<CircuitReport['closed']>;
  readonly failedProbes: number;
}

function circuitSummary(c: CircuitSeen): CircuitSummary {
  return {
    open: c.last.open,
    ...(c.last.open ? { nextProbeInMs: c.last.probeInMs, cause: c.last.cause } : {}),
    ...(c.opened === undefined ? {} : { opened: c.opened }),
    ...(c.closed ? { closed: c.closed } : {}),
    failedProbes: c.failedProbes,
  };
}
