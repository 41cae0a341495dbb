import { localLambdaContext } from '../../shared/http/proxy-event';
import type { RelayEvent, RelaySummary, SweepControl } from '../../shared/outbox/relay-invocation';
import type { RelayNudger } from '../../shared/tasks/relay-nudger';

type RelayFunction = (
  event: RelayEvent,
  context: ReturnType<typeof localLambdaContext>,
) => Promise<RelaySummary>;

export interface RelayRunnerOptions {
  /** The relay Lambda body (`createRelayInvocation(...)`), called as Lambda would call it. */
  readonly relay: RelayFunction;
  /** The safety sweep period (`topology.relay.sweepSeconds`, shorter in tests). */
  readonly sweepMs: number;
  /** The busy sweep period, while the relay reports rows left pending (`busySweepSeconds`). */
  readonly busySweepMs: number;
  /** Each invocation's time limit, as the Lambda timeout (`topology.relay.timeoutSeconds`). */
  readonly timeoutMs: number;
  readonly onRun?: (summary: RelaySummary, kind: 'sweep' | 'nudge') => void;
  readonly onError?: (err: unknown, kind: 'sweep' | 'nudge') => void;
}

/**
 * Runs the relay locally the way AWS does: a sweep at start and then once per sweep period,
 * every busy-sweep period instead while the relay says rows are left pending (it is the relay's
 * SweepControl, as the EventBridge rule is on AWS), plus a nudge invocation after each commit.
 * Nudges coalesce: while one runs, further nudges only ask for one more run after it, so a
 * burst of approvals never stacks up relay runs.
 */
export class RelayRunner implements RelayNudger, SweepControl {
  private stopped = false;
  private busy = false;
  private sweeping: Promise<void> | undefined;
  private nudging: Promise<void> | undefined;
  private nudgeAgain = false;
  /** While the loop waits for the next sweep: re-arms its timer (0 ends the wait now). */
  private rearm: ((ms: number) => void) | undefined;
  /** When the last invocation finished, for the local "relay silent" alarm. */
  lastRunAt: Date | undefined;
  errors = 0;

  constructor(private readonly options: RelayRunnerOptions) {}

  start(): void {
    this.sweeping = this.loop();
  }

  /** The sweep period now: the busy one while rows are left pending. */
  get periodMs(): number {
    return this.busy ? Math.min(this.options.busySweepMs, this.options.sweepMs) : this.options.sweepMs;
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      await this.invoke(undefined, 'sweep');
      if (this.stopped) break;
      await new Promise<void>((resolve) => {
        let timer = setTimeout(resolve, this.periodMs);
        this.rearm = (ms) => {
          clearTimeout(timer);
          timer = setTimeout(resolve, ms);
        };
      });
      this.rearm = undefined;
    }
  }

  /** SweepControl: a busy relay is swept at the busy period from now on, an idle one at the long one. */
  async setBusy(busy: boolean): Promise<boolean> {
    const changed = busy !== this.busy;
    this.busy = busy;
    // A relay that just turned busy must not wait out the rest of a long idle wait.
    if (changed && busy) this.rearm?.(this.periodMs);
    return changed;
  }

  /** RelayNudger: asks for a drain now; never throws (the sweep is the safety net). */
  async nudge(): Promise<void> {
    if (this.stopped) return;
    if (this.nudging) {
      this.nudgeAgain = true;
      return;
    }
    this.nudging = (async () => {
      do {
        this.nudgeAgain = false;
        await this.invoke({ nudge: true }, 'nudge');
      } while (this.nudgeAgain && !this.stopped);
    })().finally(() => {
      this.nudging = undefined;
    });
  }

  private async invoke(event: RelayEvent, kind: 'sweep' | 'nudge'): Promise<void> {
    try {
      const summary = await this.options.relay(
        event,
        localLambdaContext('outbox-relay', this.options.timeoutMs),
      );
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
    this.rearm?.(0);
    await Promise.allSettled([this.sweeping, this.nudging]);
  }
}
