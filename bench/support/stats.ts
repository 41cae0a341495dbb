/** Small statistics for the benchmarks: every figure they report is a median or a percentile. */

/** The median of `values` (the upper middle of an even count); NaN when empty. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** The nearest-rank `p`th percentile of ascending `sorted` values; NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  const rank = Math.ceil((p / 100) * sorted.length) - 1;
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank))] ?? Number.NaN;
}

/** Rounds to `digits` decimals. */
export function round(value: number, digits = 0): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** Runs `fn` and measures it: the count it returns and the seconds it took. */
export async function timed(fn: () => Promise<number>): Promise<{ count: number; seconds: number }> {
  const start = process.hrtime.bigint();
  const count = await fn();
  return { count, seconds: Number(process.hrtime.bigint() - start) / 1e9 };
}

/** The percentiles reported for a latency distribution. */
export interface LatencySummary {
  readonly p50Ms: number;
  readonly p95Ms: number;
  readonly p99Ms: number;
}

/** p50, p95 and p99 of ascending latencies, in whole milliseconds. */
export function summarize(sortedMs: readonly number[]): LatencySummary {
  return {
    p50Ms: Math.round(percentile(sortedMs, 50)),
    p95Ms: Math.round(percentile(sortedMs, 95)),
    p99Ms: Math.round(percentile(sortedMs, 99)),
  };
}
