import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { assertValidRules } from '../../shared/events/event-pattern';
import type { ConsumerName, RuleSpec } from '../../shared/topology';
import type { BusCounters, BusDeadLetter, BusEvent } from './bus/bus-types';
import { countKeptAside } from './bus/damaged-lines';
import { DeadLetterFile } from './bus/dead-letters';
import { BusJournal, type DamagedLine, type JournalDisk } from './bus/journal';
import { type AcceptedBatch, PutEventsEndpoint } from './bus/put-events-endpoint';
import { TargetDispatch, type TargetRetry } from './bus/target-dispatch';
import type { FaultInjector } from './faults';
import type { LocalAwsCredentials } from './sigv4-verifier.mjs';

export type { BusDeadLetter, BusEvent } from './bus/bus-types';
export type { TargetRetry } from './bus/target-dispatch';

export interface LocalBusOptions {
  readonly busName: string;
  readonly rules: readonly RuleSpec[];
  /** Invokes a consumer the way Lambda would; a throw is a failed invocation. */
  readonly invoke: (consumer: ConsumerName, event: BusEvent) => Promise<unknown>;
  readonly retry: (consumer: ConsumerName) => TargetRetry;
  /** Where the journal and the dead letters live; survives restarts. */
  readonly dir: string;
  readonly maxRequestBytes: number;
  readonly faults: FaultInjector;
  /** Invocations in flight per consumer (Lambda's reserved concurrency, locally). */
  readonly concurrency?: number;
  /** How long each (event, consumer) waits before its first invocation (EventBridge's own latency); none by default. */
  readonly deliveryDelayMs?: (consumer: ConsumerName) => number;
  readonly log?: (message: string, extra?: Record<string, unknown>) => void;
  readonly random?: () => number;
  /**
   * How long a dead letter of `consumer` is kept before it expires, as an SQS queue drops a
   * message after its retention period (`deadLetterRetentionSeconds`); kept for ever by default.
   */
  readonly deadLetterRetentionMs?: (consumer: ConsumerName) => number;
  /** Epoch ms of the bus's own bookkeeping (delivery ages, dead-letter times); `Date.now` by default. */
  readonly clock?: () => number;
  /** Told once the journal takes events again after a write failure (the runtime wakes the relay). */
  readonly onJournalRecovered?: () => void;
  /** The journal's disk (tests put a failing one here) and when it compacts; see BusJournalOptions. */
  readonly journal?: { readonly disk?: Partial<JournalDisk>; readonly compactAfterBytes?: number };
  /**
   * The key pair the PutEvents endpoint verifies SigV4 signatures with (the data directory's);
   * without, it takes any request, signed or not (a test's bus). See PutEventsEndpointOptions.
   */
  readonly credentials?: LocalAwsCredentials;
}

/**
 * A local EventBridge custom bus: a `PutEvents` endpoint (awsJson1.1) on loopback that the
 * real `@aws-sdk/client-eventbridge` client talks to (`bus/put-events-endpoint.ts`), the
 * topology's rules, and per-target delivery with retries and a dead-letter store
 * (`bus/target-dispatch.ts`, `bus/dead-letters.ts`), behind a write-ahead journal
 * (`bus/journal.ts`).
 *
 * Durability: an EventId is answered only once its event is journalled (fsync), and a target
 * leaves the journal only when finished, so a crash loses nothing the relay marked delivered
 * (the invariant is stated and kept in {@link BusJournal}).
 */
export class LocalBus {
  readonly counters: BusCounters = { accepted: 0, rejected: 0, delivered: 0, retried: 0, deadLettered: 0 };
  endpoint = '';
  /** The rules as deployed, each enabled or not: the topology's at start, then as changed by hand. */
  private rules: { spec: RuleSpec; enabled: boolean }[];
  private readonly clock: () => number;
  private readonly journal: BusJournal;
  private readonly dead: DeadLetterFile;
  private readonly dispatch: TargetDispatch;
  private readonly putEvents: PutEventsEndpoint;
  private redriving: Promise<unknown> = Promise.resolve();
  /** Journal lines kept aside in `damagedFile` (by this start and earlier ones), and those of this start. */
  private damage: { keptAside: number; lines: readonly DamagedLine[] } = { keptAside: 0, lines: [] };

  constructor(private readonly options: LocalBusOptions) {
    this.rules = options.rules.map((spec) => ({ spec, enabled: true }));
    this.clock = options.clock ?? Date.now;
    const log = (message: string, extra?: Record<string, unknown>) => options.log?.(message, extra);
    this.journal = new BusJournal(join(options.dir, 'journal.jsonl'), {
      onLostDone: (err) =>
        log('a journal line was not written: its target is delivered again after a restart', {
          error: String(err),
        }),
      onFailure: (err) =>
        log(`bus failed: a journal write failed (${String(err)}); refusing events until it can write again`, {
          component: 'bus',
          cause: String(err),
        }),
      onRecovered: (downMs) => {
        log(`bus recovered: the journal takes events again after ${downMs} ms`, { component: 'bus' });
        options.onJournalRecovered?.();
      },
      disk: options.journal?.disk,
      compactAfterBytes: options.journal?.compactAfterBytes,
      clock: this.clock,
    });
    this.dead = new DeadLetterFile(join(options.dir, 'dead-letters.jsonl'));
    this.dispatch = new TargetDispatch({
      invoke: options.invoke,
      retry: options.retry,
      concurrency: options.concurrency,
      deliveryDelayMs: options.deliveryDelayMs,
      random: options.random,
      clock: this.clock,
      journal: this.journal,
      deadLetters: this.dead,
      counters: this.counters,
      log,
    });
    this.putEvents = new PutEventsEndpoint({
      busName: options.busName,
      rules: () => this.rules.filter((r) => r.enabled).map((r) => r.spec),
      clock: this.clock,
      maxRequestBytes: options.maxRequestBytes,
      faults: options.faults,
      counters: this.counters,
      accept: (batch) => this.accept(batch),
      log,
      credentials: options.credentials,
    });
  }

  /** Opens the journal, re-delivers what a previous run left pending, and starts listening. */
  async start(): Promise<string> {
    // A rule EventBridge would refuse (PutRule: InvalidEventPatternException) stops the bus before it creates anything.
    assertValidRules(this.options.rules);
    mkdirSync(this.options.dir, { recursive: true });
    const journal = join(this.options.dir, 'journal.jsonl');
    let pending: Awaited<ReturnType<BusJournal['recover']>>;
    try {
      this.dead.load();
      const started = Date.now();
      pending = await this.journal.recover();
      if (Date.now() - started > 1_000)
        this.options.log?.('bus journal recovered', { ms: Date.now() - started, pending: pending.length });
      this.damage = {
        keptAside: await countKeptAside(this.journal.damagedPath),
        lines: this.journal.damaged,
      };
      for (const d of this.damage.lines) {
        this.options.log?.(
          `bus journal line ${d.lineNumber} could not be read (${d.torn ? 'its last line, cut short by a crash' : 'damaged'}): kept aside in ${this.journal.damagedPath}`,
          { component: 'bus', lineNumber: d.lineNumber, torn: d.torn, file: this.journal.damagedPath },
        );
      }
      await this.journal.openForAppend();
    } catch (err) {
      throw new Error(
        `the bus could not recover its journal ${journal}: ${err instanceof Error ? err.message : String(err)}`,
        { cause: err },
      );
    }
    this.endpoint = await this.putEvents.listen();
    for (const d of pending) this.dispatch.schedule(d);
    if (pending.length > 0)
      this.options.log?.('re-delivering events pending from the last run', { deliveries: pending.length });
    return this.endpoint;
  }

  /** Stops accepting; waits up to `drainMs` for invocations in flight; the rest stays journalled. */
  async stop(drainMs = 5_000): Promise<void> {
    this.dispatch.halt();
    await this.putEvents.close();
    await this.dispatch.drain(drainMs);
    await this.journal.close();
  }

  /**
   * Dead letters, oldest first (this run's and earlier runs'), but those past their queue's
   * retention: those are gone, as SQS deletes a message once its retention period is over.
   */
  deadLetters(): readonly BusDeadLetter[] {
    const retention = this.options.deadLetterRetentionMs;
    if (retention) {
      const expired = this.dead.expire((d) => Date.parse(d.deadAt) + retention(d.consumer) <= this.clock());
      for (const d of expired) {
        this.options.log?.('a dead letter expired (its queue kept it as long as SQS keeps a message)', {
          consumer: d.consumer,
          eventId: d.id,
          deadAt: d.deadAt,
        });
      }
    }
    return this.dead.all;
  }

  /**
   * EventBridge's DisableRule, as a person may run it in the console: the rule routes nothing
   * until enabled again. What the delivery audit exists to notice. False when there is no such rule.
   */
  disableRule(name: string): boolean {
    return this.setEnabled(name, false);
  }

  /** EventBridge's EnableRule: the rule routes again (what it missed meanwhile stays missed). */
  enableRule(name: string): boolean {
    return this.setEnabled(name, true);
  }

  /**
   * EventBridge's PutRule and PutTargets together, as a hand edit: the rule of this name gets
   * this pattern and these targets (added when there is none), enabled. Refused like PutRule
   * refuses a pattern EventBridge would not take.
   */
  putRule(spec: RuleSpec): void {
    assertValidRules([spec]);
    const existing = this.rules.find((r) => r.spec.name === spec.name);
    if (existing) {
      existing.spec = spec;
      existing.enabled = true;
    } else this.rules.push({ spec, enabled: true });
  }

  private setEnabled(name: string, enabled: boolean): boolean {
    const rule = this.rules.find((r) => r.spec.name === name);
    if (rule) rule.enabled = enabled;
    return rule !== undefined;
  }

  /**
   * The journal lines a start could not read: how many its keep-aside file holds (this start's
   * and earlier ones', until someone removes the file), where, and the lines of this start,
   * whose deliveries the runtime makes again (journal-repair.ts).
   */
  journalDamage(): {
    readonly keptAside: number;
    readonly file: string;
    readonly lines: readonly DamagedLine[];
  } {
    return { ...this.damage, file: this.journal.damagedPath };
  }

  /** Whether the bus takes events: its journal accepts writes (a full or failing disk stops it). */
  health(): { readonly up: boolean; readonly cause?: string; readonly since?: string } {
    return this.journal.state;
  }

  /** Retries now every delivery waiting for its next attempt (see TargetDispatch.retryNow). */
  retryNow(): number {
    return this.dispatch.retryNow();
  }

  /** Deliveries not yet finished (in flight or waiting for a retry). */
  get pendingDeliveries(): number {
    return this.dispatch.pending;
  }

  /** Resolves once no delivery is in flight or waiting for a retry (see {@link pendingDeliveries}). */
  idle(): Promise<void> {
    return this.dispatch.idle();
  }

  /** Puts a dead letter back on the bus for its target; false when there is none with that id. */
  redrive(id: string, consumer?: ConsumerName): Promise<boolean> {
    return this.redriveWhere(() => this.dead.find(id, consumer));
  }

  /** Puts this letter (one of {@link deadLetters}) back on the bus; false when it is gone already. */
  redriveLetter(letter: BusDeadLetter): Promise<boolean> {
    return this.redriveWhere(() => (this.dead.all.includes(letter) ? letter : undefined));
  }

  private redriveWhere(find: () => BusDeadLetter | undefined): Promise<boolean> {
    // One redrive at a time: two at once could both find the same letter and deliver it twice.
    const redriven = this.redriving.then(async () => {
      const letter = find();
      if (!letter) return false;
      const target = { rule: letter.rule, consumer: letter.consumer };
      // Journal the redelivery (fsync) before forgetting the letter: a crash between the two
      // writes then leaves a duplicate, never a loss.
      await this.journal.recordEvents([{ event: letter.event, targets: [target] }]);
      this.dead.remove(letter);
      this.dispatch.schedule({ event: letter.event, ...target, firstAttemptAt: this.clock() });
      return true;
    });
    this.redriving = redriven.catch(() => false);
    return redriven;
  }

  /** Delivers a stored event to one consumer again (an inbox redrive), journalled like any other. */
  async redeliver(consumer: ConsumerName, event: BusEvent): Promise<void> {
    const target = { rule: 'redrive', consumer };
    await this.journal.recordEvents([{ event, targets: [target] }]);
    this.dispatch.schedule({ event, ...target, firstAttemptAt: this.clock() });
  }

  // What PutEvents accepted: durable first, then on its way.
  private async accept({ events, deliveries }: AcceptedBatch): Promise<void> {
    await this.journal.recordEvents(events);
    for (const d of deliveries) this.dispatch.schedule(d);
  }
}
