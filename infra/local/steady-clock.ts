/**
 * The local runtime's one clock: epoch milliseconds that read the wall clock once, when the
 * runtime starts, and from then on move with the monotonic clock (`performance.now()`).
 *
 * Every age and every deadline the runtime keeps (a delivery's age and its retries on the bus,
 * an inbox record's lease, backoff and maximum event age, the relay's last run for
 * `relay-silent`, the alarms' windows, a redrive's new first attempt) is read from it, so they
 * all agree, and a step of the system clock while the runtime runs (a clock set by hand, an NTP
 * correction after a long drift, a VM restored from a snapshot) moves none of them: before, a
 * step of +25 h made every retrying record 25 h old, so DEAD at its next attempt, and raised
 * `relay-silent`; and what was written meanwhile stayed dated in the future once the clock was
 * set back. A step while the runtime is stopped counts as time that passed (it cannot be told
 * from a machine that was off), as it would for EventBridge and SQS.
 *
 * PostgreSQL keeps its own clock for what it stores (`now()`: an outbox row's creation, its
 * next attempt, the relay's lease), compared only with itself. An outbox row's age for its
 * maximum age is this clock's now against the row's creation time: a step of the system clock
 * moves `now()` and not this clock, so a step forward cannot make a row too old (one made after
 * the step only looks younger).
 */
export function steadyClock(wall: () => number = Date.now): () => number {
  const anchorWall = wall();
  const anchorMonotonic = performance.now();
  return () => anchorWall + Math.round(performance.now() - anchorMonotonic);
}
