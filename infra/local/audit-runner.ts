import type { AuditReport } from '../../shared/audit/delivery-audit';
import { RecentFailures } from './recent-failures';

export interface AuditRunnerOptions {
  /** One run of the delivery audit (`runDeliveryAudit` over the runtime's stores). */
  readonly run: () => Promise<AuditReport>;
  /** How often it runs on its own (`topology.audit.localPeriodSeconds`; tests pass a long one and call {@link AuditRunner.run}). */
  readonly periodMs: number;
  readonly onError?: (err: unknown) => void;
  /** Epoch ms of the runner's record; `Date.now` by default. */
  readonly clock?: () => number;
}

/**
 * Runs the delivery audit inside the local runtime as the schedule runs it on AWS: once per
 * period, the first a period after start, and at once when asked ({@link run}). Runs never
 * overlap here (nor anywhere: the audit's lease in PostgreSQL keeps one at a time).
 */
export class AuditRunner {
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<AuditReport> | undefined;
  /** The last run's report and when it ended, for the status page. */
  lastReport: AuditReport | undefined;
  lastRunAt: Date | undefined;
  /** Failed runs, when: the local `delivery-audit-errors` alarm counts those of its period. */
  readonly failures = new RecentFailures();

  constructor(private readonly options: AuditRunnerOptions) {}

  /** Failed runs since start. */
  get errors(): number {
    return this.failures.total;
  }

  start(): void {
    this.schedule();
  }

  /**
   * Runs the audit now, after the run in progress if there is one (that run may have read its
   * page before what the caller just did), and resolves with this run's report.
   */
  async run(): Promise<AuditReport> {
    const previous = this.running?.catch(() => undefined);
    const next = (async () => {
      await previous;
      try {
        const report = await this.options.run();
        this.lastReport = report;
        this.lastRunAt = new Date((this.options.clock ?? Date.now)());
        return report;
      } catch (err) {
        this.failures.record((this.options.clock ?? Date.now)());
        throw err;
      }
    })();
    this.running = next;
    return next;
  }

  /** Stops the schedule and waits for a run in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.run()
        .catch((err: unknown) => this.options.onError?.(err))
        .finally(() => this.schedule());
    }, this.options.periodMs);
    this.timer.unref();
  }
}
