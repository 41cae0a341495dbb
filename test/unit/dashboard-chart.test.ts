import { describe, expect, it } from 'vitest';

// app.js is browser code, type-checked by its own tsconfig (DOM lib, checkJs). The root project
// has no allowJs, so the helpers' signatures are restated here; a drift shows as a failing test.
interface Sample {
  at: number;
  approved: number;
  delivered: number;
  oldestPendingAgeSeconds: number;
}
type Series = (number | null)[];
interface ChartHelpers {
  chartWindowMs: number;
  chartBuckets: number;
  sampleOf(status: unknown, at: number): Sample;
  addSample(samples: readonly Sample[], sample: Sample, windowMs: number, buckets: number): Sample[];
  chartSeries(
    samples: readonly Sample[],
    now: number,
    windowMs: number,
    buckets: number,
  ): { approvals: Series; deliveries: Series; oldestAge: Series };
  niceCeiling(value: number): number;
  niceAgeCeiling(seconds: number): number;
  linePath(values: Series, max: number, width: number, height: number): string;
  total(values: Series): number;
  historySamples(history: unknown): Sample[];
}
const appJs = '../../infra/ops-tools/dashboard/app.js';
const {
  addSample,
  chartSeries,
  historySamples,
  linePath,
  niceAgeCeiling,
  niceCeiling,
  sampleOf,
  total,
  ...constants
} = (await import(appJs)) as ChartHelpers;

// A window of 60 s in 6 buckets of 10 s, ending in the bucket [1000 s, 1010 s).
const windowMs = 60_000;
const buckets = 6;
const now = 1_005_000;
const sample = (at: number, approved: number, delivered: number, age = 0): Sample => ({
  at,
  approved,
  delivered,
  oldestPendingAgeSeconds: age,
});

describe('the dashboard chart helpers', () => {
  it('draw the last hour (what the runtime keeps) in one-minute buckets', () => {
    expect(constants.chartWindowMs).toBe(3_600_000);
    expect(constants.chartBuckets).toBe(60);
  });

  it("read the runtime's history defensively, oldest first, dropping readings without a time", () => {
    expect(
      historySamples({
        samples: [
          { at: 3_000, approved: 2, delivered: 1, oldestPendingAgeSeconds: 5 },
          { at: 1_000, approved: 1, delivered: 'x' },
          { approved: 9 },
          null,
        ],
      }),
    ).toEqual([sample(1_000, 1, 0, 0), sample(3_000, 2, 1, 5)]);
    expect(historySamples({ samples: 'none' })).toEqual([]);
    expect(historySamples(null)).toEqual([]);
  });

  it('read a sample from a status answer, a missing or non-numeric figure counting 0', () => {
    expect(
      sampleOf(
        { tasks: { approved: 7, pending_review: 2 }, outbox: { delivered: 8, oldestPendingAgeSeconds: 4.5 } },
        42,
      ),
    ).toEqual(sample(42, 7, 8, 4.5));
    expect(sampleOf({ tasks: { approved: '7' }, outbox: null }, 1)).toEqual(sample(1, 0, 0, 0));
    expect(sampleOf(null, 1)).toEqual(sample(1, 0, 0, 0));
  });

  it('keep the samples of the window and one bucket before it, oldest first', () => {
    const kept = [sample(930_000, 0, 0), sample(940_000, 1, 1), sample(950_000, 2, 2)];

    const next = addSample(kept, sample(1_005_000, 3, 3), windowMs, buckets);

    // 1005 s - 60 s - 10 s = 935 s: the reading at 930 s is dropped, the one at 940 s kept.
    expect(next.map((s) => s.at)).toEqual([940_000, 950_000, 1_005_000]);
    expect(kept).toHaveLength(3); // the kept array is not changed
  });

  it('count each rise of a counter in the bucket of the later reading; the first reading only sets the base', () => {
    const samples = [
      sample(951_000, 5, 3, 0), // bucket 0: the base, nothing counted
      sample(953_000, 6, 3, 2), // bucket 0: +1 approval
      sample(971_000, 8, 5, 7), // bucket 2: +2 approvals, +2 deliveries
      sample(975_000, 8, 6, 1), // bucket 2: +1 delivery; the age is the largest read (7)
      sample(1_001_000, 9, 7, 0), // bucket 5
    ];

    const series = chartSeries(samples, now, windowMs, buckets);

    expect(series.approvals).toEqual([1, null, 2, null, null, 1]);
    expect(series.deliveries).toEqual([0, null, 3, null, null, 1]);
    expect(series.oldestAge).toEqual([2, null, 7, null, null, 0]);
  });

  it('count nothing for a counter that falls (rows purged, an approved task withdrawn)', () => {
    const series = chartSeries([sample(991_000, 5, 9), sample(993_000, 4, 2)], now, windowMs, buckets);

    expect(series.approvals.at(-2)).toBe(0);
    expect(series.deliveries.at(-2)).toBe(0);
  });

  it('keep a reading in its bucket from one poll to the next (buckets follow the clock, not the poll)', () => {
    const samples = [sample(991_000, 0, 0), sample(993_000, 1, 0), sample(999_000, 2, 0)];

    const first = chartSeries(samples, 1_000_500, windowMs, buckets).approvals;
    const later = chartSeries(samples, 1_009_500, windowMs, buckets).approvals;
    const next = chartSeries(samples, 1_010_500, windowMs, buckets).approvals;

    expect(first).toEqual([null, null, null, null, 2, null]);
    expect(later).toEqual(first);
    expect(next).toEqual([null, null, null, 2, null, null]); // one whole bucket to the left
  });

  it('leave out readings outside the window', () => {
    const series = chartSeries([sample(900_000, 0, 0), sample(1_020_000, 5, 5)], now, windowMs, buckets);

    expect(series.approvals).toEqual([null, null, null, null, null, null]);
    expect(series.oldestAge).toEqual([null, null, null, null, null, null]);
  });

  it.each([
    [0, 1],
    [0.4, 1],
    [1, 1],
    [1.5, 2],
    [3, 5],
    [5, 5],
    [7, 10],
    [10, 10],
    [11, 20],
    [230, 500],
    [999, 1000],
  ])('scale a count of %d to a top of %d', (value, top) => {
    expect(niceCeiling(value)).toBe(top);
  });

  it.each([
    [0, 1],
    [3, 5],
    [14, 15],
    [40, 60],
    [400, 600],
    [3000, 3600],
    [3601, 7200],
    [4 * 3600, 5 * 3600],
  ])('scale an age of %d s to a top of %d s', (seconds, top) => {
    expect(niceAgeCeiling(seconds)).toBe(top);
  });

  it('draw a path across the box, the top of the scale at y 0, breaking at a bucket without readings', () => {
    expect(linePath([0, 1, 2, null, 2, 0], 2, 100, 50)).toBe('M0 50 L20 25 L40 0 M80 0 L100 50');
  });

  it('draw a reading with no neighbour as a dot, and clamp values to the scale', () => {
    expect(linePath([null, 3, null, -1], 2, 30, 10)).toBe('M10 0h0 M30 10h0');
    expect(linePath([], 1, 30, 10)).toBe('');
    expect(linePath([1], 1, 30, 10)).toBe('M0 0h0');
  });

  it('add up a series, a bucket without readings counting 0', () => {
    expect(total([1, null, 2, 0])).toBe(3);
    expect(total([null, null])).toBe(0);
  });
});
