/**
 * `work`, or `expired()`'s error once `ms` have passed without it settling. The work is not
 * stopped (a promise cannot be): whatever it still does is left to its own bounds (the pools'
 * timeouts), and its late failure is heard here so it is never an unhandled rejection. A
 * duration, so on setTimeout's monotonic clock: a step of the wall clock moves no deadline.
 */
export function withDeadline<T>(work: Promise<T>, ms: number, expired: () => Error): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      work.catch(() => {});
      reject(expired());
    }, ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
