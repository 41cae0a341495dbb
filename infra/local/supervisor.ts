import type { ComponentState, StatusComponent } from '../../shared/ops/ops-ports';
import { Pause } from './pause';
import { relayRetryDelayMs } from './relay-runner';

/** An engine the runtime runs and watches: it says when it died on its own, and stops on request. */
export interface Supervised {
  /**
   * Resolves with the cause once the engine has died without being asked to stop (its process
   * exited, its worker threw); never settles after a stop.
   */
  readonly died: Promise<string>;
  /** Stops the engine on request (its `died` then never settles). */
  stop(): Promise<void>;
}

/** How a supervisor restarts what died, and who hears of it. */
export interface SupervisorOptions<H extends Supervised> {
  readonly component: StatusComponent;
  /** Starts the engine again, where it was (the same port, the same data); rejects when it cannot. */
  readonly restart: () => Promise<H>;
  readonly log: (message: string, extra?: Record<string, unknown>) => void;
  /**
   * Awaited before each restart attempt: a test holds the engine down here to look at the
   * runtime meanwhile, then lets the restart go on. None by default.
   */
  readonly beforeRestart?: (component: StatusComponent, cause: string) => Promise<void>;
  /** Told once the engine serves again (the runtime wakes what waited on it). */
  readonly onRecovered?: (component: StatusComponent) => void;
  /** Epoch ms; `Date.now` by default. */
  readonly clock?: () => number;
}

/**
 * How long a supervisor waits before restart attempt `attempt` (1-based) after a death: at
 * once for the first (a crash is most often a one-off), then 1 s doubling to a minute, as the
 * relay runner retries a failed run: an engine that cannot start (a full disk, a port taken, a
 * dead PostgreSQL's children still holding its shared memory) is tried again without a storm.
 */
export function restartDelayMs(attempt: number): number {
  return attempt <= 1 ? 0 : relayRetryDelayMs(attempt - 1);
}

/**
 * An engine that stays up for this long after a restart counts as recovered for good: its next
 * death starts the backoff over. One that dies sooner goes on with the backoff it had, so a
 * crash loop is restarted at most once a minute.
 */
const stableAfterMs = 60_000;

/**
 * Watches one engine of the local runtime (PostgreSQL, the DynamoDB engine) and restarts it
 * when it dies, with backoff, logging one line when it fails (naming the component and the
 * cause), one per restart that fails, and one when it serves again. Its {@link state} is what
 * `/ops/status` reports for the component.
 */
export class Supervisor<H extends Supervised> {
  private engine: H;
  private down: { cause: string; since: number } | undefined;
  private stopped = false;
  private restarting: Promise<void> | undefined;
  private readonly pause = new Pause();
  private upSince: number;
  private failures = 0;
  private readonly clock: () => number;

  constructor(
    first: H,
    private readonly options: SupervisorOptions<H>,
  ) {
    this.clock = options.clock ?? Date.now;
    this.engine = first;
    this.upSince = this.clock();
    this.watch(first);
  }

  /** The engine running now (the last one started). */
  get current(): H {
    return this.engine;
  }

  /** Up, or down with the cause and since when. */
  get state(): ComponentState {
    if (!this.down) return { up: true };
    return { up: false, cause: this.down.cause, since: new Date(this.down.since).toISOString() };
  }

  /** Stops watching, waits for a restart under way, and stops the engine. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.pause.wake();
    await this.restarting;
    await this.engine.stop();
  }

  private watch(engine: H): void {
    void engine.died.then((cause) => {
      if (this.stopped || engine !== this.engine) return;
      this.restarting = this.recover(cause);
    });
  }

  private async recover(cause: string): Promise<void> {
    const { component, log } = this.options;
    const since = this.clock();
    if (since - this.upSince >= stableAfterMs) this.failures = 0;
    this.down = { cause, since };
    log(`${component} failed: ${cause}; restarting it`, { component, cause });
    for (;;) {
      this.failures++;
      await this.pause.for(restartDelayMs(this.failures));
      if (this.stopped) return;
      await this.options.beforeRestart?.(component, cause);
      if (this.stopped) return;
      try {
        const engine = await this.options.restart();
        if (this.stopped) {
          await engine.stop();
          return;
        }
        this.engine = engine;
        break;
      } catch (err) {
        const why = err instanceof Error ? err.message : String(err);
        log(`${component} restart failed: ${why}; trying again`, {
          component,
          cause: why,
          nextInMs: restartDelayMs(this.failures + 1),
        });
      }
    }
    this.upSince = this.clock();
    this.down = undefined;
    log(`${component} recovered: restarted after ${this.upSince - since} ms`, { component, cause });
    this.watch(this.engine);
    this.options.onRecovered?.(component);
  }
}
