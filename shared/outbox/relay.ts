import { backoffDelay, sleep as realSleep } from '../db/retry';
import type { RelaySettings } from '../topology';
import type { ClaimedEvent, Delivered, Failed, OutboxStats, OutboxStore } from './outbox-store';
import type { EventPublisher } from './publisher';
import { type CircuitClosed, probeDelayMs, type RelayCircuitStore } from './relay-circuit';

/** The relay settings it reads from the topology (tests shrink them). */
export type RelayRunSettings = Pick<
  RelaySettings,
  | 'claimBatchSize'
  | 'roundsInFlight'
  | 'leaseSeconds'
  | 'maxEventAgeSeconds'
  | 'maxUnsettledClaims'
  | 'claimBytes'
  | 'backoff'
  | 'circuit'
  | 'pollIntervalMs'
  | 'budgetMarginMs'
  | 'purge'
>;

export interface RelayDeps {
  readonly outbox: Pick<
    OutboxStore,
    'claim' | 'markDelivered' | 'markFailed' | 'release' | 'purgeDelivered' | 'stats'
  >;
  readonly publisher: EventPublisher;
  /**
   * The circuit over the transport, shared by every run (RelayCircuitStore). Without one (a test
   * of the rounds alone) every failure is settled per row, a refused round's included.
   */
  readonly circuit?: Pick<
    RelayCircuitStore,
    'read' | 'open' | 'takeProbe' | 'probeFailed' | 'probeNow' | 'close'
  >;
  /** This relay instance's identity (claim owner); unique per invocation. */
  readonly owner: string;
  readonly settings: RelayRunSettings;
  readonly random?: () => number;
  /** Epoch milliseconds; defaults to `Date.now`. An event's age is judged by it, and a round's time. */
  readonly clock?: () => number;
}

/** What one claim-publish-settle round did. */
export interface RelayRound {
  readonly claimed: number;
  /** Marked delivered. */
  readonly published: number;
  /** Failed and scheduled for another attempt. */
  readonly failed: number;
  /**
   * Failed for good this round: an error that can never succeed, an event past its maximum
   * age, or a row whose claims never settled.
   */
  readonly dead: number;
  /** Rows taken over from a relay whose lease ran out. */
  readonly expiredLeases: number;
  /** Settles refused by the fence: another relay took the row over meanwhile. */
  readonly fencedOut: number;
  /**
   * Given back unpublished, without an attempt or a backoff: the transport refused every entry
   * of their round (the circuit opened, or a probe was refused).
   */
  readonly held: number;
}

const emptyRound: RelayRound = {
  claimed: 0,
  published: 0,
  failed: 0,
  dead: 0,
  expiredLeases: 0,
  fencedOut: 0,
  held: 0,
};

/** Two rounds' (or runs') counts added up. */
export function addRounds(a: RelayRound, b: RelayRound): RelayRound {
  return {
    claimed: a.claimed + b.claimed,
    published: a.published + b.published,
    failed: a.failed + b.failed,
    dead: a.dead + b.dead,
    expiredLeases: a.expiredLeases + b.expiredLeases,
    fencedOut: a.fencedOut + b.fencedOut,
    held: a.held + b.held,
  };
}

/**
 * One round: claim a batch, publish it, settle every row.
 * Invariants: a row the bus accepted is marked delivered whoever holds its claim by then (an
 * event on the bus is delivered); a failure is recorded only by the relay holding the row's
 * current token, so a relay that stalled past its lease cannot undo a newer claim. A crash
 * anywhere leaves rows pending, to be claimed again once the lease runs out: at least once;
 * a row whose claims keep not settling goes dead after `maxUnsettledClaims`.
 *
 * It does not look at the circuit before claiming (runRelay does); given one, a round the
 * transport refused as a whole gives its rows back and opens it.
 */
export async function relayOnce(deps: RelayDeps): Promise<RelayRound> {
  const { round, refused } = await relayRound(deps);
  if (refused !== undefined) await deps.circuit?.open(refused, probeDelayMs(0, deps.settings.circuit));
  return round;
}

/** What a round tells the run besides its counts. */
interface RoundShape {
  /** Its claim stopped at a bound with due rows left (`Claim.more`). */
  readonly more: boolean;
  /** How long its claim statement ran in the database (`Claim.databaseMs`). */
  readonly databaseMs: number | undefined;
  /** Entries the transport accepted (marked delivered or not: another relay may have been first). */
  readonly accepted: number;
  /**
   * Set (with a circuit only) when the transport refused the round as a whole: it accepted none
   * of the entries it was sent, and refused at least one transiently. The first refusal, as
   * `<code>: <message>`; the transiently refused rows were given back (RelayRound.held).
   */
  readonly refused?: string;
}

/** How a round claims, and how long a refused round's rows wait. */
interface RoundMode {
  /** Rows at most: the batch size, or one for a probe. */
  readonly rows: number;
  /** A refused round's rows are not claimed for this long (a probe's: past the next probe). */
  readonly holdMs: number;
}

/** A round, and its shape. */
async function relayRound(
  deps: RelayDeps,
  onClaimed: (more: boolean) => void = () => {},
  mode: RoundMode = { rows: deps.settings.claimBatchSize, holdMs: 0 },
): Promise<{ round: RelayRound } & RoundShape> {
  const { outbox, publisher, owner, settings } = deps;
  const { claimed, wedged, more, databaseMs } = await outbox.claim(owner, {
    rows: mode.rows,
    leaseSeconds: settings.leaseSeconds,
    bytes: settings.claimBytes,
    maxUnsettledClaims: settings.maxUnsettledClaims,
  });
  onClaimed(more);
  if (claimed.length === 0)
    return { round: { ...emptyRound, dead: wedged.length }, more, databaseMs, accepted: 0 };

  const failed: Failed[] = [];
  const publishable: ClaimedEvent[] = [];
  for (const row of claimed) {
    if (row.oversizePayloadBytes === undefined) publishable.push(row);
    else
      failed.push(
        failure(
          row,
          false,
          `PayloadTooLarge: the payload is ${row.oversizePayloadBytes} bytes in a Data API response, over the ${settings.claimBytes.perRow}-byte row limit`,
          deps,
        ),
      );
  }
  const outcomes = publishable.length > 0 ? await publisher.publish(publishable) : [];
  const byId = new Map<string, ClaimedEvent>(publishable.map((c) => [c.eventId, c]));
  const delivered: Delivered[] = [];
  const transient: { row: ClaimedEvent; error: string }[] = [];
  for (const outcome of outcomes) {
    const row = byId.get(outcome.eventId);
    if (!row) continue;
    byId.delete(outcome.eventId);
    if (outcome.ok) delivered.push({ eventId: row.eventId, busEventId: outcome.busEventId });
    else if (outcome.retryable)
      transient.push({ row, error: `${outcome.errorCode}: ${outcome.errorMessage}` });
    else failed.push(failure(row, false, `${outcome.errorCode}: ${outcome.errorMessage}`, deps));
  }
  // A publisher that forgot an event must not strand it under a lease: retry it.
  for (const row of byId.values()) transient.push({ row, error: 'NoOutcome: publisher returned no result' });
  // Nothing passed and something was refused for a while: the transport, not these rows. They
  // go back as they were (no attempt, no backoff) and the circuit decides when to try again.
  // What was refused for good (too large, malformed) is the entry's own and settles as always.
  const refused =
    deps.circuit !== undefined && delivered.length === 0 && transient.length > 0
      ? (transient[0] as (typeof transient)[number]).error
      : undefined;
  if (refused === undefined) for (const t of transient) failed.push(failure(t.row, true, t.error, deps));

  const [marked, settledFailures, released] = await Promise.all([
    outbox.markDelivered(delivered),
    outbox.markFailed(owner, failed),
    refused === undefined
      ? Promise.resolve([])
      : outbox.release(
          owner,
          transient.map((t) => t.row),
          { error: refused, holdMs: mode.holdMs },
        ),
  ]);
  const settled = new Set(settledFailures);
  const dead = failed.filter((f) => f.dead && settled.has(f.eventId)).length;
  const heldBack = refused === undefined ? 0 : transient.length;
  return {
    round: {
      claimed: claimed.length,
      published: marked.length,
      failed: settled.size - dead,
      dead: dead + wedged.length,
      expiredLeases: claimed.filter((c) => c.leaseExpired).length,
      fencedOut:
        delivered.length - marked.length + (failed.length - settled.size) + (heldBack - released.length),
      held: released.length,
    },
    more,
    databaseMs,
    accepted: delivered.length,
    ...(refused === undefined ? {} : { refused }),
  };
}

/**
 * How a failed publish is settled. Permanent failures (an entry the bus can never accept) go
 * dead at once; transient ones (throttling, internal failures, a failed call) are retried with
 * capped backoff until the event is `maxEventAgeSeconds` old, so an outage of hours ends in
 * delivery, not in `dead`.
 */
function failure(row: ClaimedEvent, retryable: boolean, error: string, deps: RelayDeps): Failed {
  const now = (deps.clock ?? Date.now)();
  const ageMs = now - row.createdAt.getTime();
  const retryInMs = backoffDelay(row.attempts, deps.settings.backoff, deps.random);
  // Dead when the next try would come after the maximum age: no try is made past it.
  const tooOld = ageMs + retryInMs > deps.settings.maxEventAgeSeconds * 1000;
  const dead = !retryable || tooOld;
  return {
    eventId: row.eventId,
    claimToken: row.claimToken,
    error:
      dead && retryable
        ? `undelivered after ${row.attempts} attempts over ${Math.round(ageMs / 1000)} s (maximum age ${deps.settings.maxEventAgeSeconds} s); last error ${error}`
        : error,
    dead,
    retryInMs: dead ? 0 : retryInMs,
  };
}

export interface RunOptions {
  /** Milliseconds left in this invocation (Lambda's `getRemainingTimeInMillis`). */
  readonly remainingMs: () => number;
  /** Stop claiming when aborted (shutdown); the round in flight still settles. */
  readonly signal?: AbortSignal;
  readonly sleep?: (ms: number) => Promise<void>;
  /**
   * Called when a claim comes back full while every round this run may keep in flight is busy:
   * a backlog one run does not drain as fast as it grows. The invocation may start a helper.
   */
  readonly onBacklog?: () => void;
}

/** The circuit as a run left it, and what the run did to it. */
export interface CircuitReport {
  /** Open as the run ended: it claimed no batch once it was. */
  readonly open: boolean;
  /**
   * While open, when the next probe is due (0: now); null when there was no due row to probe
   * with (the probe waits for the next one: a commit's nudge, or the next due row's wake-up).
   */
  readonly probeInMs: number | null;
  /** While open, the transport's last refusal. */
  readonly cause?: string;
  /** This run opened it: a round of its was refused as a whole, with this cause. */
  readonly opened?: string;
  /** This run's probe was accepted and closed it. */
  readonly closed?: CircuitClosed;
  /** Probes of this run that the transport refused too. */
  readonly failedProbes: number;
}

/** A closed circuit that this run did not touch (or a run without one). */
const closedCircuit: CircuitReport = { open: false, probeInMs: null, failedProbes: 0 };

export interface RunReport extends RelayRound {
  readonly rounds: number;
  readonly purged: number;
  readonly stats: OutboxStats;
  readonly circuit: CircuitReport;
}

/**
 * One relay run, whatever started it (a nudge after a commit, a wake-up, or a sweep): claim,
 * publish and settle while rows are due, and return once nothing is due now. Rows that become
 * due later (a backoff, a lease that has not run out yet) are not waited for: the report's
 * `stats.nextDueInMs` tells the caller when to wake a run again. Then purge delivered rows past
 * retention in small batches and read the stats the metrics report.
 *
 * A run never polls an empty outbox: an idle pipeline touches the database once per sweep,
 * which is what lets an idle Aurora Serverless v2 cluster pause.
 *
 * Up to `roundsInFlight` rounds run side by side, so one batch is being claimed or settled in
 * the database while another waits on PutEvents: the relay overlaps its two latencies instead
 * of adding them. SKIP LOCKED keeps their claims disjoint, as it does across relays. A run
 * starts with one round, so a nudge for a few events or an idle sweep claims once, not once
 * per round in flight; a claim that stops at its bound (`Claim.more`: a backlog) starts a
 * second round at once, while its own round publishes. After each full round the run sets
 * its width anew, to as many rounds as keep the database busy: the round's time over the
 * database's work in it (its claim statement's time, twice, for the claim and the mark), at
 * least two, at most `roundsInFlight`. Through the Data API that is about ten, so all of
 * them; on a loopback database it is under two, so two, since more statements at once would
 * only share the database's cores (on 2 cores, medians of four drains: 24,700 events/s with
 * two rounds, 20,400 with four). A loop ends when its claim took every due row it saw; a
 * claim cut short by the byte bound is no such sign, and the loop claims again at once. A
 * claim that comes back full while all `roundsInFlight` rounds are busy calls `onBacklog`.
 *
 * The circuit (with `deps.circuit`): a run reads it before it claims. Open, the run claims no
 * batch; once its probe is due, one run takes it and publishes one due row for real (see
 * {@link throughCircuit}); accepted, the circuit closes, every waiting row is due, and the run
 * drains as usual. A round the transport refuses as a whole (none of its entries accepted, some
 * refused transiently) gives its rows back with no attempt and no backoff, opens the circuit,
 * and stops every loop of the run from claiming again: N refused rows are one outage, not N
 * failures, and an outage of any length leaves no row with more attempts or a longer wait.
 */
export async function runRelay(deps: RelayDeps, options: RunOptions): Promise<RunReport> {
  const { settings } = deps;
  const pause = options.sleep ?? realSleep;
  const budgetLeft = () => options.remainingMs() - settings.budgetMarginMs;
  const stopped = () => budgetLeft() <= 0 || options.signal?.aborted === true;
  let total = emptyRound;
  let rounds = 0;
  let circuit = closedCircuit;
  // Set once a round of this run was refused as a whole: no loop claims again.
  let refused = false;
  const clock = deps.clock ?? Date.now;
  const most = Math.max(1, settings.roundsInFlight);
  const widthFor = (roundMs: number, databaseMs: number | undefined) =>
    databaseMs === undefined || !Number.isFinite(databaseMs) || databaseMs <= 0 || !Number.isFinite(roundMs)
      ? most
      : Math.min(most, Math.max(2, Math.ceil(roundMs / (2 * databaseMs))));
  const drain = async () => {
    // One failing loop stops the others before the run reports the error: no loop may outlive its run.
    const failed = new AbortController();
    // Each loop's outcome is held from the start: a loop failing while an earlier one is awaited is no unhandled rejection.
    const loops: Promise<PromiseSettledResult<void>>[] = [];
    const start = () => {
      loops.push(
        loop().then(
          (): PromiseSettledResult<void> => ({ status: 'fulfilled', value: undefined }),
          (reason: unknown): PromiseSettledResult<void> => {
            failed.abort();
            return { status: 'rejected', reason };
          },
        ),
      );
    };
    const over = () => stopped() || failed.signal.aborted || refused;
    let running = 0;
    // Set once a claim took every due row it saw: the backlog is gone, and no loop starts again.
    let caughtUp = false;
    const loop = async () => {
      running++;
      try {
        while (!over()) {
          const began = clock();
          // A full claim means a backlog: a second round claims at once, while this one publishes.
          const {
            round,
            more,
            databaseMs,
            refused: refusal,
          } = await relayRound(deps, (full) => {
            if (full && running >= most) options.onBacklog?.();
            if (full) while (running < Math.min(2, most) && !caughtUp && !over()) start();
          });
          total = addRounds(total, round);
          rounds++;
          if (refusal !== undefined && deps.circuit) {
            refused = true;
            const probeInMs = probeDelayMs(0, settings.circuit);
            const opened = await deps.circuit.open(refusal, probeInMs);
            circuit = {
              ...circuit,
              open: true,
              probeInMs,
              cause: circuit.cause ?? refusal,
              ...(opened ? { opened: refusal } : {}),
            };
            break;
          }
          if (!more) {
            caughtUp = true;
            break;
          }
          // A loop beyond the width gives its place up; while the backlog lasts, a wider one starts loops.
          const width = widthFor(clock() - began, databaseMs);
          if (running > width) break;
          while (running < width && !caughtUp && !over()) start();
        }
      } finally {
        running--;
      }
    };
    start();
    // A loop starts its siblings before it ends, so each is in the list before the one that started it settles.
    const settled: PromiseSettledResult<void>[] = [];
    for (let i = 0; i < loops.length; i++)
      settled.push(await (loops[i] as Promise<PromiseSettledResult<void>>));
    const failure = settled.find((l): l is PromiseRejectedResult => l.status === 'rejected');
    if (failure) throw failure.reason;
  };

  const gate = deps.circuit ? await throughCircuit(deps, deps.circuit, stopped) : undefined;
  if (gate) {
    total = gate.round;
    rounds = gate.rounds;
    circuit = gate.report;
  }
  // Drains in a row that claimed nothing: a second one while rows are due means they are locked.
  let emptyDrains = 0;
  for (;;) {
    if (gate && !gate.pass) break;
    const claimedBefore = total.claimed;
    await drain();
    if (stopped() || refused) break;
    emptyDrains = total.claimed > claimedBefore ? 0 : emptyDrains + 1;
    const { nextDueInMs } = await deps.outbox.stats();
    // Nothing due now: what is due later is the caller's to wake a run for.
    if (nextDueInMs !== 0) break;
    // Due now: commits that landed after the drain's claim, claimable at once (under a steady
    // load a pause here held every new event for up to a poll interval), even after a drain that
    // found nothing (a run started for rows an earlier run took, as commits go on landing).
    if (emptyDrains < 2) continue;
    // Due now, but twice nothing was claimable: another relay's claim statement holds the rows
    // (SKIP LOCKED passes them by until it commits their lease). Look again shortly.
    if (settings.pollIntervalMs >= budgetLeft()) break;
    await pause(settings.pollIntervalMs);
  }
  let purged = 0;
  // Twice what this run delivered (at least `maxBatchesPerRun` batches), so the purge outpaces
  // any steady rate and catches up on a backlog: rows delivered a retention ago leave as fast as
  // rows are delivered now. Bounded by batch count and by the margin the budget keeps for this
  // wrap-up (half of it), so a long purge never runs the invocation out of time.
  const { batchSize, maxBatchesPerRun, retentionHours } = settings.purge;
  const batches = Math.max(maxBatchesPerRun, Math.ceil((2 * total.published) / batchSize));
  for (let batch = 0; batch < batches; batch++) {
    if (batch > 0 && options.remainingMs() < settings.budgetMarginMs / 2) break;
    const deleted = await deps.outbox.purgeDelivered(retentionHours, batchSize);
    purged += deleted;
    if (deleted < batchSize) break;
  }
  const stats = await deps.outbox.stats();
  return {
    ...total,
    rounds,
    purged,
    stats,
    circuit:
      circuit.open && circuit.probeInMs === null ? { ...circuit, probeInMs: stats.nextDueInMs } : circuit,
  };
}

/** What the circuit let a run do: drain (`pass`), or not; and the probe's round, if it made one. */
interface CircuitGate {
  readonly pass: boolean;
  readonly round: RelayRound;
  readonly rounds: number;
  readonly report: CircuitReport;
}

/**
 * The circuit before a run claims. Closed: the run drains. Open with its probe not yet due, or
 * taken by another run: the run claims nothing. Open with the probe due: this run probes.
 *
 * A probe is a real publish of one due row (the oldest), through the same publisher and the
 * same settle as any round, not a cheaper call: what is in doubt is whether PutEvents takes
 * events, and only an accepted event says so. A call beside it (DescribeEventBus, a health
 * endpoint) answers from elsewhere: EventBridge's control plane and its own quotas on AWS, and
 * locally nothing that writes the bus's journal, whose full disk is the outage. It costs one
 * entry, and the event it carries is delivered when it passes. Its outcome:
 * - accepted: the circuit closes, and every row waiting on a backoff is due with it;
 * - refused transiently: the row goes back without an attempt, held until just after the next
 *   probe (so that probe takes another row: one event refused on its own for a while cannot
 *   keep the circuit open), and the next probe waits twice as long, up to `probeMaxMs`;
 * - refused for good (too large, malformed): that row's own failure, settled as always (dead);
 *   it says nothing of the transport, and the next due row is probed at once;
 * - no due row: nothing to probe with; the probe is due again, for the next row.
 */
async function throughCircuit(
  deps: RelayDeps,
  circuit: NonNullable<RelayDeps['circuit']>,
  stopped: () => boolean,
): Promise<CircuitGate> {
  const { settings } = deps;
  const view = await circuit.read();
  if (!view.open) return { pass: true, round: emptyRound, rounds: 0, report: closedCircuit };
  const open = (probeInMs: number | null, cause: string, failedProbes = 0): CircuitReport => ({
    open: true,
    probeInMs,
    cause,
    failedProbes,
  });
  if (view.probeInMs > 0)
    return { pass: false, round: emptyRound, rounds: 0, report: open(view.probeInMs, view.cause) };
  // Held for as long as the probe's claim: a run that dies probing holds the next probe no longer.
  const holdMs = settings.leaseSeconds * 1_000;
  if (!(await circuit.takeProbe(holdMs)))
    return { pass: false, round: emptyRound, rounds: 0, report: open(holdMs, view.cause) };
  const nextProbeMs = probeDelayMs(view.failedProbes + 1, settings.circuit);
  let round = emptyRound;
  let rounds = 0;
  while (!stopped()) {
    const probe = await relayRound(deps, undefined, {
      rows: 1,
      holdMs: nextProbeMs + settings.circuit.probeBaseMs,
    });
    round = addRounds(round, probe.round);
    rounds++;
    if (probe.accepted > 0) {
      const closed = await circuit.close();
      return {
        pass: true,
        round,
        rounds,
        report: { ...closedCircuit, ...(closed ? { closed } : {}) },
      };
    }
    if (probe.refused !== undefined) {
      await circuit.probeFailed(probe.refused, nextProbeMs);
      return { pass: false, round, rounds, report: open(nextProbeMs, probe.refused, 1) };
    }
    if (probe.round.claimed === 0 && probe.round.dead === 0) {
      await circuit.probeNow();
      return { pass: false, round, rounds, report: open(null, view.cause) };
    }
  }
  // Out of time (or stopping) before a probe said anything: the next run probes at once.
  await circuit.probeNow();
  return { pass: false, round, rounds, report: open(0, view.cause) };
}
