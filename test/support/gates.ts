import type { OutboundEvent } from '../../shared/events/cloud-event';
import type { EventPublisher, PublishOutcome } from '../../shared/outbox/publisher';

/** A promise with its resolve handle, to hold work open while a test acts. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** One publish call a {@link PublishGate} holds: its events, and the handle that lets it go on. */
export interface HeldPublish {
  readonly events: readonly OutboundEvent[];
  /** Lets the call reach the publisher behind the gate; resolves with what that publisher answered. */
  release(): Promise<PublishOutcome[]>;
}

/**
 * Publishers whose calls wait at the gate until the test lets each one through: "a relay's
 * PutEvents is in flight" becomes a state the test reaches and holds for as long as it likes
 * (while it lets a lease lapse, stops a database, starts another relay), not a time it bets the
 * machine will take.
 */
export class PublishGate {
  private readonly arrived: HeldPublish[] = [];
  private readonly waiting: ((held: HeldPublish) => void)[] = [];

  /** `publisher` behind the gate: each call is held until released. */
  wrap(publisher: EventPublisher): EventPublisher {
    return {
      publish: (events) => {
        const opened = deferred();
        const answered = opened.promise.then(() => publisher.publish(events));
        const held: HeldPublish = {
          events,
          release: () => {
            opened.resolve();
            return answered;
          },
        };
        const taker = this.waiting.shift();
        if (taker) taker(held);
        else this.arrived.push(held);
        return answered;
      },
    };
  }

  /** The next call to reach the gate (one already waiting, oldest first), once it has. */
  next(): Promise<HeldPublish> {
    const held = this.arrived.shift();
    if (held) return Promise.resolve(held);
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Calls at the gate that {@link next} has not handed out yet. */
  get queued(): number {
    return this.arrived.length;
  }
}

/**
 * Counts work in flight (the calls passed through {@link track}) and says when there is none:
 * the one moment a test that steps concurrent work takes its next step, so the interleaving is
 * the test's, whatever the machine's speed. Work not tracked must be waiting on the test (at a
 * gate) or done by then.
 */
export class Quiescence {
  private busy = 0;
  private readonly waiters: (() => void)[] = [];

  /** `call`, counted as work in flight while it runs. */
  track<A extends unknown[], R>(call: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
    return async (...args) => {
      this.busy++;
      try {
        return await call(...args);
      } finally {
        this.busy--;
        this.check();
      }
    };
  }

  /**
   * Resolves once no tracked work is in flight. It looks after the event loop's pending
   * microtasks have run (`setImmediate`), so work that starts right after other work ends (a
   * mark after a publish) is seen to start.
   */
  reached(): Promise<void> {
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      this.check();
    });
  }

  private check() {
    setImmediate(() => {
      if (this.busy === 0) for (const resolve of this.waiters.splice(0)) resolve();
    });
  }
}
