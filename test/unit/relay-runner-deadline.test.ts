import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RelayRunAbandonedError, RelayRunner } from '../../infra/local/relay-runner';
import type { RelaySummary } from '../../shared/outbox/relay-invocation';

const drained = {} as RelaySummary;
const skipped = { owner: 'o', role: 'primary', skipped: 'a run holds the lease' } as RelaySummary;

describe('the local relay runner bounds each run by its deadline', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('abandons a run still going at its deadline: aborts its signal, counts it failed, and runs again 1 s later', async () => {
    const signals: AbortSignal[] = [];
    const errors: unknown[] = [];
    let calls = 0;
    const runner = new RelayRunner({
      sweepMs: 3_600_000,
      timeoutMs: 60_000,
      // The first run never settles, as one waiting on a backend that is stopped.
      relay: (_event, _context, deadline) => {
        signals.push(deadline);
        return calls++ === 0 ? new Promise<RelaySummary>(() => {}) : Promise.resolve(drained);
      },
      onError: (err) => errors.push(err),
    });

    runner.start();
    await vi.advanceTimersByTimeAsync(59_999);
    const before = { calls, errors: runner.errors, aborted: signals[0]?.aborted };
    await vi.advanceTimersByTimeAsync(1);
    const atDeadline = { calls, errors: runner.errors, aborted: signals[0]?.aborted };
    await vi.advanceTimersByTimeAsync(1_000);

    expect(before).toEqual({ calls: 1, errors: 0, aborted: false });
    expect(atDeadline).toEqual({ calls: 1, errors: 1, aborted: true });
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(RelayRunAbandonedError);
    expect(String(errors[0])).toMatch(/did not end within its deadline \(60 s\): abandoned/);
    expect(signals[0]?.reason).toBe(errors[0]);
    // The retry runs on its own signal, untouched.
    expect(calls).toBe(2);
    expect(signals[1]?.aborted).toBe(false);
    // The sweep loop went on past the abandoned run: stopping waits for nothing it gave up.
    await runner.stop();
  });

  it('keeps looking after a failure while the run lease is held, until a run drains', async () => {
    const answers: (() => Promise<RelaySummary>)[] = [
      () => Promise.reject(new Error('a run failed')),
      // The failed run's lease is still held (it lapses later): the retries are skipped.
      () => Promise.resolve(skipped),
      () => Promise.resolve(skipped),
      () => Promise.resolve(drained),
    ];
    const at: number[] = [];
    const start = Date.now();
    const runner = new RelayRunner({
      sweepMs: 3_600_000,
      timeoutMs: 60_000,
      relay: () => {
        at.push(Date.now() - start);
        return (answers.shift() ?? (() => Promise.resolve(drained)))();
      },
    });

    runner.start();
    await vi.advanceTimersByTimeAsync(600_000);

    // 1 s after the failure, then 2 s and 4 s after each skip; nothing once a run drained.
    expect(at).toEqual([0, 1_000, 3_000, 7_000]);
    expect(runner.errors).toBe(1);
    await runner.stop();
  });
});
