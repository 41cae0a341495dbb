import { backoffDelay } from '../../shared/db/retry';
import { localLambdaContext } from '../../shared/http/proxy-event';
import type {
  RelayEvent,
  RelaySummary,
  RelayWakeups,
  WakeReason,
} from '../../shared/outbox/relay-invocation';
import type { RelayNudger } from '../../shared/tasks/relay-nudger';
import { RecentFailures } from './recent-failures';

/**
 * The relay as the runner calls it: Lambda's two arguments, and the run's deadline, aborted when
 * the runner gives the run up (so whoever built it can drop what the run holds: its connections).
 */
type RelayFunction = (
  event: RelayEvent,
  context: ReturnType<typeof localLambdaContext>,
  deadline: AbortSignal,
) => Promise<RelaySummary>;

/** A run the runner gave up at its deadline, as Lambda ends an invocation at its timeout. */
export class RelayRunAbandonedError extends Error {
  override readonly name = 'RelayRunAbandonedError';
  constructor(readonly timeoutMs: number) {
    super(
      `the relay run did not end within its deadline (${timeoutMs / 1_000} s): abandoned, its database connections dropped; the next run starts on fresh ones`,
    );
  }
}

/** What started an invocation: the sweep, a nudge, a wake-up for due rows, or a helper wake-up. */
export type RelayRunKind = 'sweep' | 'nudge' | 'wake' | 'helper';

export interface RelayRunnerOptions {
  /** The relay Lambda body (`createRelayInvocation(...)`), called as Lambda would call it. */
  readonly relay: RelayFunction;
  /** The safety sweep period (`topology.relay.sweepSeconds`, shorter in tests). */
  readonly sweepMs: number;
  /**
   * Each invocation's time limit, as the Lambda timeout (`topology.relay.timeoutSeconds`): the
   * run is told it (its context's remaining time) and is abandoned once it is past.
   */
  readonly timeoutMs: number;
  readonly onRun?: (summary: RelaySummary, kind: RelayRunKind) => void;
  readonly onError?: (err: unknown, kind: RelayRunKind) => void;
  /** Epoch ms of the runner's record (last run, failures); `Date.now` by default (a test moves it past an alarm's period). */
  readonly clock?: () => number;
}

/** How long the runner waits to retry after `failures` failed invocations in a row: 1 s doubling to 60 s. */
export function relayRetryDelayMs(failures: number): number {
  // The SQL adapters' backoff at its ceiling: one runner in one process needs no jitter.
  return backoffDelay(failures, { baseMs: 1_000, maxMs: 60_000 }, () => 1);
}

/**
 * Runs the relay locally the way AWS does: a sweep at start and then once per sweep period, a
 * nudge invocation when the tasks API asks for one, and the relay's own wake-ups (its
 * RelayWakeups, as the SQS wake queue is on AWS): a timer for rows due later, an invocation at
 * once for a successor or a helper. Nudges and due wake-ups coalesce: while one runs, more only
 * ask for one more run after it. The run lease in PostgreSQL, not this runner, keeps runs few:
 * an invocation that finds the lease held returns at once, here as on AWS.
 */
export class RelayRunner implements RelayNudger, RelayWakeups {
  private stopped = false;
  private sweeping: Promise<void> | undefined;
  private nudging: Promise<void> | undefined;
  private nudgeAgain = false;
  private readonly helpers = new Set<Promise<void>>();
  /** The pending wake-up timer and when it fires (epoch ms). */
  private wake: { timer: NodeJS.Timeout; at: number } | undefined;
  /** Ends the wait for the next sweep now (on stop). */
  private endWait: (() => void) | undefined;
  /** When the last invocation finished, for the local "relay silent" alarm. */
  lastRunAt: Date | undefined;
  /** Failed invocations, when: the `relay-errors` alarm counts those of its period. */
  readonly failures = new RecentFailures();
  /** Failed invocations in a row, for the retry's backoff; a run that succeeds resets it. */
  private failuresInARow = 0;

  private readonly clock: () => number;

  constructor(private readonly options: RelayRunnerOptions) {
    this.clock = options.clock ?? Date.now;
  }

  /** Failed invocations since start. */
  get errors(): number {
    return this.failures.total;
  }

  start(): void {
    this.sweeping = this.loop();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      await this.invoke(undefined, 'sweep');
      if (this.stopped) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.options.sweepMs);
        this.endWait = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.endWait = undefined;
    }
  }

  /** RelayNudger: asks for a drain now; never throws (the sweep is the safety net). */
  async nudge(): Promise<void> {
    this.drainSoon({ nudge: true }, 'nudge');
  }

  /** RelayWakeups: a helper starts at once beside the run that asked; due rows get a timer. */
  async wakeAfter(ms: number, reason: WakeReason): Promise<void> {
    if (this.stopped) return;
    if (reason === 'helper') {
      const helper = this.invoke({ wake: 'helper' }, 'helper').finally(() => this.helpers.delete(helper));
      this.helpers.add(helper);
      return;
    }
    // Compared only with another wake-up's: the monotonic clock, which no clock step moves.
    const at = performance.now() + Math.max(0, ms);
    // The earliest wake-up wins: a later one is covered by the run it starts.
    if (this.wake && this.wake.at <= at) return;
    if (this.wake) clearTimeout(this.wake.timer);
    const timer = setTimeout(
      () => {
        this.wake = undefined;
        this.drainSoon({ wake: 'due' }, 'wake');
      },
      Math.max(0, ms),
    );
    timer.unref();
    this.wake = { timer, at };
  }

  private drainSoon(event: RelayEvent, kind: RelayRunKind): void {
    if (this.stopped) return;
    if (this.nudging) {
      this.nudgeAgain = true;
      return;
    }
    this.nudging = (async () => {
      let next: [RelayEvent, RelayRunKind] = [event, kind];
      do {
        this.nudgeAgain = false;
        await this.invoke(...next);
        next = [{ nudge: true }, 'nudge'];
      } while (this.nudgeAgain && !this.stopped);
    })().finally(() => {
      this.nudging = undefined;
    });
  }

  /**
   * One invocation, bounded by `timeoutMs` as Lambda bounds one: a run still going at its deadline
   * (a statement a hung backend never answers, anything else that never settles) is abandoned, its
   * deadline signal aborted, and counted as a failed run; it no longer holds up the nudges, wake-ups
   * and sweeps that wait for it. Its run lease is released by the run itself once its dropped
   * connections fail it, or runs out and is taken over as any lapsed lease is.
   */
  private async invoke(event: RelayEvent, kind: RelayRunKind): Promise<void> {
    const { timeoutMs } = this.options;
    const deadline = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    try {
      const run = this.options.relay(event, localLambdaContext('outbox-relay', timeoutMs), deadline.signal);
      const summary = await Promise.race([
        run,
        new Promise<never>((_, reject) => {
          // A duration, so setTimeout's monotonic clock: a step of the wall clock moves no deadline.
          timer = setTimeout(() => {
            // What the run still does after this is nobody's to hear.
            run.catch(() => {});
            const abandoned = new RelayRunAbandonedError(timeoutMs);
            deadline.abort(abandoned);
            reject(abandoned);
          }, timeoutMs);
        }),
      ]);
      this.lastRunAt = new Date(this.clock());
      this.options.onRun?.(summary, kind);
      if ('skipped' in summary && this.failuresInARow > 0) {
        // Retrying after a failure and the run lease is held: by a run going on beside this one,
        // or by the run that failed (abandoned while its lease was still taken, or acquired by a
        // statement that ran later). Looked at again with the backoff until a run drains: a
        // tasks-API change that saw the lease held skipped its nudge, and would wait for the sweep.
        this.failuresInARow++;
        void this.wakeAfter(relayRetryDelayMs(this.failuresInARow), 'due');
        return;
      }
      this.failuresInARow = 0;
    } catch (err) {
      this.failures.record(this.clock());
      this.failuresInARow++;
      this.options.onError?.(err, kind);
      // A run that failed (its database login refused, the database restarting) left its rows
      // due, and no run of its own will say when to look again: without a retry they would wait
      // for the next sweep, an hour by default. On AWS the wake queue's message comes back after
      // its visibility timeout and an async invocation is retried by Lambda; here the runner
      // retries, 1 s after the first failure, doubling to a minute.
      void this.wakeAfter(relayRetryDelayMs(this.failuresInARow), 'due');
    } finally {
      clearTimeout(timer);
    }
  }

  /** Waits for the invocations in flight; the caller aborts their signal first so they stop claiming. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.wake) clearTimeout(this.wake.timer);
    this.wake = undefined;
    this.endWait?.();
    await Promise.allSettled([this.sweeping, this.nudging, ...this.helpers]);
  }
}
