import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RelayRunner, relayRetryDelayMs } from '../../infra/local/relay-runner';
import type { RelaySummary } from '../../shared/outbox/relay-invocation';

const summary = {} as RelaySummary;

describe('the local relay runner after a failed run', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('retries on its own after 1 s, doubling, instead of waiting for the hourly sweep', async () => {
    const calls: number[] = [];
    let failuresLeft = 3;
    const runner = new RelayRunner({
      sweepMs: 3_600_000,
      timeoutMs: 60_000,
      relay: async () => {
        calls.push(Date.now());
        if (failuresLeft-- > 0) throw new Error('password authentication failed');
        return summary;
      },
    });
    const start = Date.now();
    runner.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toHaveLength(1); // the start's sweep, failed
    await vi.advanceTimersByTimeAsync(999);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toHaveLength(2); // 1 s later
    await vi.advanceTimersByTimeAsync(2_000);
    expect(calls).toHaveLength(3); // 2 s later
    await vi.advanceTimersByTimeAsync(4_000);
    expect(calls).toHaveLength(4); // 4 s later, and this one succeeds
    expect(calls.map((t) => t - start)).toEqual([0, 1_000, 3_000, 7_000]);
    expect(runner.errors).toBe(3);
    // A run that succeeded asks for nothing more: the next one is the sweep's.
    await vi.advanceTimersByTimeAsync(600_000);
    expect(calls).toHaveLength(4);
    await runner.stop();
  });

  it('caps the retry at a minute', () => {
    expect([1, 2, 3, 6, 7, 20].map(relayRetryDelayMs)).toEqual([1_000, 2_000, 4_000, 32_000, 60_000, 60_000]);
  });
});
