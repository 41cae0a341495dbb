/**
 * When a runner's recent failures happened, so that a local alarm counts them over its period
 * as CloudWatch sums a function's `Errors` per period: a failure an hour ago no longer alarms,
 * where a count since start never cleared. Keeps at most `keep` times (the newest).
 */
export class RecentFailures {
  private readonly times: number[] = [];
  /** Failures since start (the status page's figure). */
  total = 0;

  constructor(private readonly keep = 1_000) {}

  record(at: number): void {
    this.total++;
    this.times.push(at);
    if (this.times.length > this.keep) this.times.shift();
  }

  /** Failures at or after `from` (epoch ms). */
  since(from: number): number {
    let n = 0;
    for (let i = this.times.length - 1; i >= 0 && (this.times[i] as number) >= from; i--) n++;
    return n;
  }
}
