import type { SqlClient } from '../../shared/db/sql-client';
import { taskCounts } from '../../shared/ops/ops-queries';
import { OutboxStore } from '../../shared/outbox/outbox-store';

/**
 * One reading of the counters the dashboard's chart draws: the approved tasks and delivered
 * events (their rises between readings are the approvals and deliveries), and the oldest
 * pending event's age as it was. `at` is epoch milliseconds.
 */
export interface HistorySample {
  readonly at: number;
  readonly approved: number;
  readonly delivered: number;
  readonly oldestPendingAgeSeconds: number;
}

/** What `GET /ops/history` answers: the readings of the last hour, oldest first. */
export interface HistorySnapshot {
  readonly periodSeconds: number;
  readonly windowSeconds: number;
  readonly samples: readonly HistorySample[];
}

/** The local runtime's history settings: a reading every 10 s, kept an hour (360 readings). */
export const historyDefaults = { periodMs: 10_000, keepMs: 3_600_000 } as const;

export interface StatusHistoryOptions {
  /** Reads the counters now; a failure leaves a gap (no reading), never a zero. */
  readonly read: () => Promise<Omit<HistorySample, 'at'>>;
  /** @default 10 s */
  readonly periodMs?: number;
  /** @default one hour */
  readonly keepMs?: number;
  /** Epoch ms; `Date.now` by default. */
  readonly clock?: () => number;
  readonly onError?: (err: unknown) => void;
}

/**
 * The dashboard chart's history, kept by the runtime rather than by each open page: a page
 * opened (or reloaded) now draws the same last hour any other page does, not just the minutes
 * since it opened. In memory: a restarted runtime starts a new history (AWS has CloudWatch).
 */
export class StatusHistory {
  private readonly periodMs: number;
  private readonly keepMs: number;
  private readonly clock: () => number;
  private samples: HistorySample[] = [];
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly options: StatusHistoryOptions) {
    this.periodMs = options.periodMs ?? historyDefaults.periodMs;
    this.keepMs = options.keepMs ?? historyDefaults.keepMs;
    this.clock = options.clock ?? Date.now;
  }

  /** Takes a reading now and then every period until {@link stop}. */
  start(): void {
    const tick = async () => {
      await this.sampleNow();
      if (this.stopped) return;
      this.timer = setTimeout(tick, this.periodMs);
      this.timer.unref();
    };
    void tick();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** Takes one reading, and forgets the readings older than the window. */
  async sampleNow(): Promise<void> {
    try {
      const figures = await this.options.read();
      const at = this.clock();
      this.samples = [
        ...this.samples.filter((s) => s.at >= at - this.keepMs && s.at < at),
        { at, ...figures },
      ];
    } catch (err) {
      this.options.onError?.(err);
    }
  }

  snapshot(): HistorySnapshot {
    return {
      periodSeconds: this.periodMs / 1_000,
      windowSeconds: this.keepMs / 1_000,
      samples: this.samples.slice(),
    };
  }
}

/** The chart's counters from the database (the ops role): three cheap reads of counters and partial indexes. */
export function databaseFigures(db: SqlClient): () => Promise<Omit<HistorySample, 'at'>> {
  const outbox = new OutboxStore(db);
  return async () => {
    const [tasks, stats, delivered] = await Promise.all([
      taskCounts(db),
      outbox.stats(),
      outbox.deliveredCount(),
    ]);
    return {
      approved: tasks.approved ?? 0,
      delivered,
      oldestPendingAgeSeconds: stats.oldestPendingAgeSeconds,
    };
  };
}
