import { backoffDelay, sleep as realSleep } from '../db/retry';
import type { RelayConfig } from '../topology';
import type { ClaimedEvent, Delivered, Failed, OutboxStats, OutboxStore } from './outbox-store';
import type { EventPublisher } from './publisher';

/** The relay settings it reads from the topology (tests shrink them). */
export type RelaySettings = Pick<
  RelayConfig,
  | 'claimBatchSize'
  | 'roundsInFlight'
  | 'leaseSeconds'
  | 'maxEventAgeSeconds'
  | 'maxUnsettledClaims'
  | 'claimBytes'
  | 'backoff'
  | 'pollIntervalMs'
  | 'budgetMarginMs'
  | 'purge'
>;

export interface RelayDeps {
  readonly outbox: Pick<OutboxStore, 'claim' | 'markDelivered' | 'markFailed' | 'purgeDelivered' | 'stats'>;
  readonly publisher: EventPublisher;
  /** This relay instance's identity (claim owner); unique per invocation. */
  readonly owner: string;
  readonly settings: RelaySettings;
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
}

const emptyRound: RelayRound = {
  claimed: 0,
  published: 0,
  failed: 0,
  dead: 0,
  expiredLeases: 0,
  fencedOut: 0,
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
  };
}

/**
 * One round: claim a batch, publish it, settle every row.
 * Invariants: a row the bus accepted is marked delivered whoever holds its claim by then (an
 * event on the bus is delivered); a failure is recorded only by the relay holding the row's
 * current token, so a relay that stalled past its lease cannot undo a newer claim. A crash
 * anywhere leaves rows pending, to be claimed again once the lease runs out: at least once;
 * a row whose claims keep not settling goes dead after `maxUnsettledClaims`.
 */
export async function relayOnce(deps: RelayDeps): Promise<RelayRound> {
  return (await relayRound(deps)).round;
}

/** What a round tells the run besides its counts. */
interface RoundShape {
  /** Its claim stopped at a bound with due rows left (`Claim.more`). */
  readonly more: boolean;
  /** How long its claim statement ran in the database (`Claim.databaseMs`). */
  readonly databaseMs: number | undefined;
}

/** A round, and its shape. */
async function relayRound(
  deps: RelayDeps,
  onClaimed: (more: boolean) => void = () => {},
): Promise<{ round: RelayRound } & RoundShape> {
  const { outbox, publisher, owner, settings } = deps;
  const { claimed, wedged, more, databaseMs } = await outbox.claim(owner, {
    rows: settings.claimBatchSize,
    leaseSeconds: settings.leaseSeconds,
    bytes: settings.claimBytes,
    maxUnsettledClaims: settings.maxUnsettledClaims,
  });
  onClaimed(more);
  if (claimed.length === 0) return { round: { ...emptyRound, dead: wedged.length }, more, databaseMs };

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
  for (const outcome of outcomes) {
    const row = byId.get(outcome.eventId);
    if (!row) continue;
    byId.delete(outcome.eventId);
    if (outcome.ok) {
      delivered.push({ eventId: row.eventId, busEventId: outcome.busEventId });
    } else {
      failed.push(failure(row, outcome.retryable, `${outcome.errorCode}: ${outcome.errorMessage}`, deps));
    }
  }
  // A publisher that forgot an event must not strand it under a lease: retry it.
  for (const row of byId.values())
    failed.push(failure(row, true, 'NoOutcome: publisher returned no result', deps));

  const [marked, settledFailures] = await Promise.all([
    outbox.markDelivered(delivered),
    outbox.markFailed(owner, failed),
  ]);
  const settled = new Set(settledFailures);
  const dead = failed.filter((f) => f.dead && settled.has(f.eventId)).length;
  return {
    round: {
      claimed: claimed.length,
      published: marked.length,
      failed: settled.size - dead,
      dead: dead + wedged.length,
      expiredLeases: claimed.filter((c) => c.leaseExpired).length,
      fencedOut: delivered.length - marked.length + (failed.length - settled.size),
    },
    more,
    databaseMs,
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

export interface RunReport extends RelayRound {
  readonly rounds: number;
  readonly purged: number;
  readonly stats: OutboxStats;
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
 */
export async function runRelay(deps: RelayDeps, options: RunOptions): Promise<RunReport> {
  const { settings } = deps;
  const pause = options.sleep ?? realSleep;
  const budgetLeft = () => options.remainingMs() - settings.budgetMarginMs;
  const stopped = () => budgetLeft() <= 0 || options.signal?.aborted === true;
  let total = emptyRound;
  let rounds = 0;
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
    const over = () => stopped() || failed.signal.aborted;
    let running = 0;
    // Set once a claim took every due row it saw: the backlog is gone, and no loop starts again.
    let caughtUp = false;
    const loop = async () => {
      running++;
      try {
        while (!over()) {
          const began = clock();
          // A full claim means a backlog: a second round claims at once, while this one publishes.
          const { round, more, databaseMs } = await relayRound(deps, (full) => {
            if (full && running >= most) options.onBacklog?.();
            if (full) while (running < Math.min(2, most) && !caughtUp && !over()) start();
          });
          total = addRounds(total, round);
          rounds++;
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

  // Drains in a row that claimed nothing: a second one while rows are due means they are locked.
  let emptyDrains = 0;
  for (;;) {
    const claimedBefore = total.claimed;
    await drain();
    if (stopped()) break;
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
  return { ...total, rounds, purged, stats: await deps.outbox.stats() };
}
