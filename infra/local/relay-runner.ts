import { sleep } from '../../shared/db/retry';
import { localLambdaContext } from '../../shared/http/proxy-event';
import type { RelayEvent, RelaySummary } from '../../shared/outbox/relay-invocation';
import type { RelayNudger } from '../../shared/tasks/relay-nudger';

type RelayFunction = (
  event: RelayEvent,
  context: ReturnType<typeof localLambdaContext>,
) => Promise<RelaySummary>;

export interface RelayRunnerOptions {
  /** The relay Lambda body (`createRelayInvocation(...)`), called as Lambda would call it. */
  readonly relay: RelayFunction;
  /** The schedule period: a scheduled invocation polls for this long. */
  readonly scheduleMs: number;
  /**
   * The relay's budget margin: a scheduled invocation's timeout is the period plus this, so
   * its loop (which stops claiming at remaining time minus the margin) covers the period.
   */
  readonly budgetMarginMs: number;
  readonly onRun?: (summary: RelaySummary, kind: 'schedule' | 'nudge') => void;
  readonly onError?: (err: unknown, kind: 'schedule' | 'nudge') => void;
}

/**
 * Runs the relay locally the way AWS does: one invocation per schedule period (which polls
 * for the whole period), plus a nudge invocation after each commit. Nudges coalesce: while
 * one runs, further nudges only ask for one more run after it, so a burst of approvals never
 * stacks up pollers.
 */
export class RelayRunner implements RelayNudger {
  private stopped = false;
  private scheduled: Promise<void> | undefined;
  private nudging: Promise<void> | undefined;
  private nudgeAgain = false;
  /** When the last invocation finished, for the local "relay silent" alarm. */
  lastRunAt: Date | undefined;
  errors = 0;

  constructor(private readonly options: RelayRunnerOptions) {}

  start(): void {
    this.scheduled = this.loop();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      const started = Date.now();
      await this.invoke(undefined, 'schedule', this.options.scheduleMs + this.options.budgetMarginMs);
      // A run that failed fast must not spin: wait out the rest of the period (at least 1 s).
      const rest = Math.max(1_000 - (Date.now() - started), 0);
      if (!this.stopped && rest > 0) await sleep(rest);
    }
  }

  /** RelayNudger: asks for a drain now; never throws (the schedule is the safety net). */
  async nudge(): Promise<void> {
    if (this.stopped) return;
    if (this.nudging) {
      this.nudgeAgain = true;
      return;
    }
    this.nudging = (async () => {
      do {
        this.nudgeAgain = false;
        await this.invoke({ nudge: true }, 'nudge', 30_000 + this.options.budgetMarginMs);
      } while (this.nudgeAgain && !this.stopped);
    })().finally(() => {
      this.nudging = undefined;
    });
  }

  private async invoke(event: RelayEvent, kind: 'schedule' | 'nudge', timeoutMs: number): Promise<void> {
    try {
      const summary = await this.options.relay(event, localLambdaContext('outbox-relay', timeoutMs));
      this.lastRunAt = new Date();
      this.options.onRun?.(summary, kind);
    } catch (err) {
      this.errors++;
      this.options.onError?.(err, kind);
    }
  }

  /** Waits for the invocations in flight; the caller aborts their signal first so they stop claiming. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.allSettled([this.scheduled, this.nudging]);
  }
}
