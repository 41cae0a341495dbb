import { describe, expect, it } from 'vitest';
import { backoffDelay, withRetry } from '../../shared/db/retry';

describe('backoff with full jitter', () => {
  it('grows exponentially up to the cap, scaled by the random draw', () => {
    const policy = { baseMs: 100, maxMs: 1_000 };
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffDelay(n, policy, () => 0.999999))).toEqual([
      99, 199, 399, 799, 999, 999,
    ]);
    expect(backoffDelay(3, policy, () => 0)).toBe(0);
    expect(backoffDelay(3, policy, () => 0.5)).toBe(200);
  });

  it('spreads retries: different draws give different delays', () => {
    const delays = new Set(
      Array.from({ length: 50 }, () => backoffDelay(8, { baseMs: 1_000, maxMs: 60_000 })),
    );
    expect(delays.size).toBeGreaterThan(40);
  });

  it('retries only what the predicate allows, then rethrows the last error', async () => {
    const slept: number[] = [];
    let calls = 0;
    const failing = () => {
      calls++;
      return Promise.reject(new Error(`fail ${calls}`));
    };
    await expect(
      withRetry(
        failing,
        () => true,
        { attempts: 3, baseMs: 100, maxMs: 1_000 },
        { sleep: async (ms) => void slept.push(ms) },
      ),
    ).rejects.toThrow('fail 3');
    expect(slept).toHaveLength(2);
    calls = 0;
    await expect(withRetry(failing, () => false, { attempts: 3, baseMs: 100, maxMs: 1_000 })).rejects.toThrow(
      'fail 1',
    );
  });
});
