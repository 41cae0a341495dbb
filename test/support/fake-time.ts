import { vi } from 'vitest';

/** Where fake time starts unless a test says otherwise (the fixtures' TestClock starts here too). */
export const fakeTimeStart = Date.parse('2026-11-30T12:00:00.000Z');

/**
 * Time a test moves by hand, on vitest's fake timers: `Date.now` and every timer are fake, so
 * leases, backoff and heartbeats run exactly as the test steps them, and nothing depends on how
 * fast the machine is. Call `vi.useRealTimers()` after each test.
 */
export interface FakeTime {
  /** Epoch ms of fake time: the clock a test hands to the code under test. */
  readonly now: () => number;
  /** Lets `ms` pass: timers due within it fire in order, and promises settle between them. */
  advance(ms: number): Promise<void>;
  /**
   * Moves the clock `ms` on without firing a timer: the event loop stalled that long (a long
   * GC pause, a frozen Lambda sandbox), so timers come due late and all at once.
   */
  stall(ms: number): void;
}

/** Installs vitest's fake timers at `start` and returns the handle that moves them. */
export function useFakeTime(start = fakeTimeStart): FakeTime {
  vi.useFakeTimers({ now: start });
  return {
    now: () => Date.now(),
    async advance(ms) {
      await vi.advanceTimersByTimeAsync(ms);
    },
    stall(ms) {
      vi.setSystemTime(Date.now() + ms);
    },
  };
}

/**
 * Resolves with `value` once `ms` of fake time has passed: work or latency that takes time in
 * a test on fake timers. It refuses to run on real timers, so no test can wait on real time
 * through it.
 */
export function elapse<T>(ms: number, value: T): Promise<T> {
  if (!vi.isFakeTimers()) throw new Error('elapse() runs on fake time only: call useFakeTime() first');
  return new Promise((resolve) => setTimeout(() => resolve(value), ms));
}
