/** Retry with exponential backoff and full jitter, shared by both SqlClient adapters. */
export interface RetryPolicy {
  /** Total tries, the first included. */
  readonly attempts: number;
  readonly baseMs: number;
  readonly maxMs: number;
}

export interface RetryDeps {
  readonly sleep?: (ms: number) => Promise<void>;
  readonly random?: () => number;
  readonly onRetry?: (err: unknown, attempt: number, delayMs: number) => void;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Full-jitter exponential delay for the n-th retry (1-based): uniform in [0, min(max, base*2^(n-1))]. */
export function backoffDelay(
  attempt: number,
  policy: { baseMs: number; maxMs: number },
  random = Math.random,
): number {
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.floor(random() * ceiling);
}

/** Runs `fn`, retrying while `isRetryable(err)` and tries remain; the last error is rethrown. */
export async function withRetry<T>(
  fn: () => Promise<T>,
  isRetryable: (err: unknown) => boolean,
  policy: RetryPolicy,
  deps: RetryDeps = {},
): Promise<T> {
  const pause = deps.sleep ?? sleep;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= policy.attempts || !isRetryable(err)) throw err;
      // At least a quarter of the ceiling so a resuming Aurora gets real time between tries.
      const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** (attempt - 1));
      const delay = Math.floor(ceiling / 4 + backoffDelay(attempt, policy, deps.random) * 0.75);
      deps.onRetry?.(err, attempt, delay);
      await pause(delay);
    }
  }
}
