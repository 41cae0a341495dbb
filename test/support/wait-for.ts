import { setTimeout as pause } from 'node:timers/promises';

/** How long {@link waitFor} keeps reading, and how often. */
export interface WaitForOptions {
  /** Real time after which it gives up, in ms (default 10 s). */
  readonly timeoutMs?: number;
  /** Pause between two reads, in ms (default 50). */
  readonly intervalMs?: number;
  /** What is awaited, for the message when it gives up. */
  readonly what?: string;
}

/** Thrown when {@link waitFor} gives up; the message names what was awaited and the last value read. */
export class WaitForTimeoutError extends Error {
  override name = 'WaitForTimeoutError';
}

/**
 * Reads `read` until `done` accepts its value, and returns that value: the tests' one polling
 * helper, for what a test cannot be told about (another process, a socket, a database engine).
 * Work in this process waits on a promise, and timing waits on fake time (fake-time.ts), never
 * on this.
 *
 * `done` refuses a value by returning `false` or by throwing (an `expect`); anything else
 * accepts it. An error from `read` itself is not retried: a broken read is a failure, not a
 * "not yet". When the time is up it throws the last refusal `done` threw (so an `expect` shows
 * its diff), or a {@link WaitForTimeoutError} with the last value. It runs on real timers
 * (`node:timers/promises`, which vitest's fake timers leave alone) and outside vitest too, for
 * the benchmarks and the rehearsal.
 */
export async function waitFor<T>(
  read: () => T | Promise<T>,
  done: (value: T) => unknown,
  options: WaitForOptions = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const started = performance.now();
  for (;;) {
    const value = await read();
    let refusal: unknown;
    let accepted: boolean;
    try {
      accepted = done(value) !== false;
    } catch (err) {
      refusal = err;
      accepted = false;
    }
    if (accepted) return value;
    if (performance.now() - started >= timeoutMs) {
      if (refusal !== undefined) throw refusal;
      const seen = JSON.stringify(value)?.slice(0, 2_000);
      throw new WaitForTimeoutError(`${options.what ?? 'condition'}: still ${seen} after ${timeoutMs} ms`);
    }
    await pause(options.intervalMs ?? 50);
  }
}

/**
 * {@link waitFor} for a measurement rather than a precondition: true once `done` accepts a
 * value, false when the time runs out first (how long a pipeline takes to go quiet is the
 * result, and not going quiet is a finding). Any other error is thrown.
 */
export async function reachedWithin<T>(
  read: () => T | Promise<T>,
  done: (value: T) => boolean,
  options: WaitForOptions,
): Promise<boolean> {
  try {
    await waitFor(read, done, options);
    return true;
  } catch (err) {
    if (err instanceof WaitForTimeoutError) return false;
    throw err;
  }
}
