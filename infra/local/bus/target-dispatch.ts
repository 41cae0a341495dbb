import { sleep } from '../../../shared/db/retry';
import type { ConsumerName } from '../../../shared/topology';
import type { BusCounters, BusDeadLetter, BusEvent, TargetDelivery } from './bus-types';
import type { DeadLetterFile } from './dead-letters';
import type { BusJournal } from './journal';

/** How the bus retries one target before dead-lettering (the Lambda async-invoke policy, locally). */
export interface TargetRetry {
  readonly maxAttempts: number;
  readonly baseMs: number;
  readonly maxMs: number;
  readonly maxAgeMs: number;
}

export interface TargetDispatchOptions {
  /** Invokes a consumer the way Lambda would; a throw is a failed invocation. */
  readonly invoke: (consumer: ConsumerName, event: BusEvent) => Promise<unknown>;
  readonly retry: (consumer: ConsumerName) => TargetRetry;
  /** Invocations in flight per consumer (Lambda's reserved concurrency, locally); 8 by default. */
  readonly concurrency?: number;
  /** Waited once per delivery before its first attempt, holding no concurrency slot: the bus's own latency. */
  readonly deliveryDelayMs?: (consumer: ConsumerName) => number;
  readonly random?: () => number;
  /** Epoch ms for delivery ages and dead-letter times. */
  readonly clock: () => number;
  readonly journal: BusJournal;
  readonly deadLetters: DeadLetterFile;
  readonly counters: BusCounters;
  readonly log: (message: string, extra?: Record<string, unknown>) => void;
}

/**
 * Delivers each (event, target) on its own: invokes the consumer, retries a failure with the
 * consumer's backoff until its attempt budget or maximum age is spent, then dead-letters it.
 * Either outcome is journalled as `done`, so a target leaves the journal only when finished.
 */
export class TargetDispatch {
  private stopping = false;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly waiting = new Map<ConsumerName, (() => void)[]>();
  private readonly running = new Map<ConsumerName, number>();
  /** Deliveries sleeping until their next retry, each with the handle that wakes it early. */
  private readonly sleeping = new Set<{ timer: NodeJS.Timeout; wake: () => void }>();

  constructor(private readonly options: TargetDispatchOptions) {}

  /**
   * Retries every delivery waiting for its next attempt now: what the runtime calls once a
   * component they failed on (the DynamoDB engine, PostgreSQL) serves again, so a backoff built
   * up against the outage does not hold them for up to the consumer's longest pause.
   */
  retryNow(): number {
    const woken = this.sleeping.size;
    for (const s of [...this.sleeping]) s.wake();
    return woken;
  }

  /** Deliveries not yet finished (in flight or waiting for a retry). */
  get pending(): number {
    return this.inFlight.size;
  }

  /**
   * Resolves once no delivery is in flight or waiting for a retry: what a caller in this
   * process waits on instead of reading {@link pending} until it is 0.
   */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  schedule(delivery: TargetDelivery): void {
    const task = this.deliver(delivery).finally(() => this.inFlight.delete(task));
    this.inFlight.add(task);
  }

  /** Starts no new attempt from now on; what is unfinished stays journalled for the next start. */
  halt(): void {
    this.stopping = true;
  }

  /** After {@link halt}: waits up to `drainMs` for invocations in flight, then frees every waiter. */
  async drain(drainMs: number): Promise<void> {
    await Promise.race([Promise.allSettled([...this.inFlight]), sleep(drainMs)]);
    for (const release of [...this.waiting.values()].flat()) release();
  }

  private async deliver(d: TargetDelivery): Promise<void> {
    const policy = this.options.retry(d.consumer);
    const random = this.options.random ?? Math.random;
    const delay = this.options.deliveryDelayMs?.(d.consumer) ?? 0;
    if (delay > 0) await sleep(delay);
    for (let attempt = 1; !this.stopping; attempt++) {
      let error: unknown;
      await this.acquire(d.consumer);
      if (this.stopping) return this.release(d.consumer);
      try {
        await this.options.invoke(d.consumer, d.event);
        this.options.counters.delivered++;
        this.options.journal.recordDone(d);
        return;
      } catch (err) {
        error = err;
      } finally {
        this.release(d.consumer);
      }
      const age = this.options.clock() - d.firstAttemptAt;
      if (attempt >= policy.maxAttempts || age >= policy.maxAgeMs) {
        return this.deadLetter(d, attempt, error);
      }
      // Retries are routine (a duplicate in flight, a backoff, an injected fault): counted, not logged.
      this.options.counters.retried++;
      // The ceiling of the consumer's own backoff, so a retry never lands before the inbox would take it.
      const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** (attempt - 1));
      await this.sleepUntilRetry(ceiling + Math.floor(random() * policy.baseMs));
    }
  }

  private sleepUntilRetry(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const entry = {
        timer: setTimeout(() => entry.wake(), ms),
        wake: () => {
          clearTimeout(entry.timer);
          this.sleeping.delete(entry);
          resolve();
        },
      };
      this.sleeping.add(entry);
    });
  }

  private deadLetter(d: TargetDelivery, attempts: number, error: unknown): void {
    const letter: BusDeadLetter = {
      id: d.event.id,
      consumer: d.consumer,
      rule: d.rule,
      attempts,
      error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
      deadAt: new Date(this.options.clock()).toISOString(),
      event: d.event,
    };
    try {
      this.options.deadLetters.add(letter);
    } catch (err) {
      // A full disk: the letter is not kept, so the target stays in the journal (no done line)
      // and the next start delivers it again rather than losing it.
      this.options.log('a dead letter could not be written: its target is delivered again after a restart', {
        consumer: d.consumer,
        eventId: d.event.id,
        error: String(err),
      });
      return;
    }
    this.options.counters.deadLettered++;
    this.options.journal.recordDone(d);
    this.options.log('target dead-lettered', {
      consumer: d.consumer,
      eventId: d.event.id,
      attempts,
      error: letter.error,
    });
  }

  private async acquire(consumer: ConsumerName): Promise<void> {
    const limit = this.options.concurrency ?? 8;
    if ((this.running.get(consumer) ?? 0) < limit) {
      this.running.set(consumer, (this.running.get(consumer) ?? 0) + 1);
      return;
    }
    await new Promise<void>((resolve) => {
      const queue = this.waiting.get(consumer) ?? [];
      queue.push(resolve);
      this.waiting.set(consumer, queue);
    });
  }

  private release(consumer: ConsumerName): void {
    const next = this.waiting.get(consumer)?.shift();
    if (next)
      next(); // the slot passes straight to the next waiter
    else this.running.set(consumer, Math.max(0, (this.running.get(consumer) ?? 1) - 1));
  }
}
