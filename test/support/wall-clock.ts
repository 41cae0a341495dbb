/**
 * A step of this process's wall clock, as a step of the system clock looks from inside Node:
 * `Date.now()` and `new Date()` jump by the offset, the monotonic clock (`performance.now()`,
 * which timers run on) does not. Like faketime, for one process: PostgreSQL, a separate
 * process, keeps the real clock, and so do worker threads (dynalite's), which have their own
 * `Date`. {@link restoreWallClock} puts the real `Date` back.
 */

const RealDate = Date;
let offsetMs = 0;

class SteppedDate extends RealDate {
  constructor(...args: unknown[]) {
    if (args.length === 0) super(RealDate.now() + offsetMs);
    // biome-ignore lint/suspicious/noExplicitAny: Date's constructor overloads, passed on as given.
    else super(...(args as [any]));
  }

  static override now(): number {
    return RealDate.now() + offsetMs;
  }
}

/** Sets the wall clock `ms` ahead of the real one (0: the real time again). */
export function stepWallClock(ms: number): void {
  offsetMs = ms;
  globalThis.Date = SteppedDate as DateConstructor;
}

/** The real `Date` again. */
export function restoreWallClock(): void {
  offsetMs = 0;
  globalThis.Date = RealDate;
}

/** The real wall clock, whatever the step. */
export const realNow = (): number => RealDate.now();
