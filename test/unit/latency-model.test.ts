import { describe, expect, it } from 'vitest';
import {
  ContainerPool,
  containersFor,
  type Hop,
  type LatencyDistribution,
  latencyGoals,
  latencyModel,
  minus,
  quantile,
  sampler,
} from '../../bench/support/latency-model';

const distribution: LatencyDistribution = {
  points: [
    [0, 10],
    [0.5, 20],
    [0.9, 100],
    [1, 200],
  ],
  source: 'test',
};

/** A `random` that returns the given fractions in turn. */
const fractions = (...values: number[]) => {
  let i = 0;
  return () => values[i++ % values.length] as number;
};

/**
 * Steady arrivals at `perSecond`, each holding an environment for `durationMs`, on a simulated
 * clock: returns the pool after `seconds`.
 */
function simulate(pool: ContainerPool, perSecond: number, durationMs: number, seconds: number, from = 0) {
  const ends: number[] = [];
  const count = Math.round(perSecond * seconds);
  for (let i = 0; i < count; i++) {
    const now = from + (i * 1_000) / perSecond;
    ends.sort((a, b) => a - b);
    while (ends.length > 0 && (ends[0] as number) <= now) {
      ends.shift();
      pool.release();
    }
    pool.acquire();
    ends.push(now + durationMs);
  }
  for (const _ of ends) pool.release();
  return pool;
}

describe('the latency model', () => {
  it('samples a distribution by inverting its quantile points, linear between them', () => {
    const draw = sampler(distribution, fractions(0, 0.25, 0.5, 0.7, 0.9, 0.95, 0.999999));

    expect(Array.from({ length: 7 }, draw).map((v) => Math.round(v * 100) / 100)).toEqual([
      10, 15, 20, 60, 100, 150, 200,
    ]);
  });

  it('draws each value as often as its fraction says', () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 16_807) % 2_147_483_647;
      return seed / 2_147_483_647;
    };
    const draws = Array.from({ length: 20_000 }, sampler(distribution, random)).sort((a, b) => a - b);

    expect(draws[10_000]).toBeGreaterThan(19);
    expect(draws[10_000]).toBeLessThan(21);
    expect(draws[18_000]).toBeGreaterThan(95);
    expect(draws[18_000]).toBeLessThan(105);
  });

  it('cuts one hop out of a measurement that covered two, fraction by fraction', () => {
    expect(
      minus(
        [
          [0.5, 100],
          [0.9, 300],
        ],
        distribution,
        0.5,
      ),
    ).toEqual([
      [0.5, 90],
      [0.9, 250],
    ]);
  });

  it('needs rate x duration environments for a steady load, and starts new ones only while concurrency grows', () => {
    expect(containersFor(20, 500)).toBe(10);
    expect(containersFor(100, 150)).toBe(15);
    expect(containersFor(100, 155)).toBe(16);

    const pool = simulate(new ContainerPool(), 100, 150, 5);
    expect(pool.created).toBe(containersFor(100, 150));
    expect(pool.peak).toBe(15);

    // The same load again finds its environments warm; a higher one starts only the difference.
    simulate(pool, 100, 150, 5, 10_000);
    expect(pool.created).toBe(15);
    simulate(pool, 200, 150, 5, 20_000);
    expect(pool.created).toBe(containersFor(200, 150));
  });

  it('gives every hop ascending points from fraction 0 to 1 and a source with an address', () => {
    for (const hop of Object.keys(latencyModel) as Hop[]) {
      const { points, source } = latencyModel[hop];
      expect(points[0]?.[0], hop).toBe(0);
      expect(points.at(-1)?.[0], hop).toBe(1);
      for (let i = 1; i < points.length; i++) {
        const [f0, ms0] = points[i - 1] as readonly [number, number];
        const [f1, ms1] = points[i] as readonly [number, number];
        expect(f1, hop).toBeGreaterThan(f0);
        expect(ms1, hop).toBeGreaterThanOrEqual(ms0);
      }
      expect(source, hop).toMatch(/https:\/\//);
      expect(source, hop).toMatch(
        /[Pp]er (call|request|invocation|new execution|asynchronous|synchronous|event)/,
      );
    }
  });

  it("takes the Data API's per-call figure as the whole-invocation one less the warm Lambda floor", () => {
    const p50 = quantile(latencyModel.dataApiCall, 0.5);
    const p99 = quantile(latencyModel.dataApiCall, 0.99);

    expect(p50).toBeCloseTo(104.68 - 6.21, 1);
    expect(p99).toBeCloseTo(572.11 - 63.93, 1);
  });

  it("bounds the approve API's p99 by one Data API call's p99 and the gateway's and Lambda's overheads", () => {
    const p99 = (hop: Hop) => quantile(latencyModel[hop], 0.99);

    expect(latencyGoals().approveP99BoundMs).toBe(
      Math.round(p99('dataApiCall') + p99('apiGateway') + p99('lambdaInvoke') + p99('lambdaInvokeApi')),
    );
    expect(latencyGoals().effectsP99At100BoundMs).toBe(1_500);
  });
});
