import { appendFileSync, closeSync, existsSync, fsyncSync, openSync, readFileSync } from 'node:fs';
import type { BusEvent, BusTarget, TargetDelivery } from './bus-types';
import { replaceDurably } from './durable-file';

/** A line of the journal: an accepted event with its targets, or one target finished with it. */
type JournalLine =
  | { t: 'event'; event: BusEvent; targets: BusTarget[] }
  | { t: 'done'; id: string; consumer: BusTarget['consumer']; rule: string };

/** An event and the targets it still has to reach. */
export interface JournalledEvent {
  readonly event: BusEvent;
  readonly targets: readonly BusTarget[];
}

/**
 * The bus's write-ahead journal (`journal.jsonl`), what makes an `EventId` a promise.
 *
 * Invariant: an event is in the journal, fsync'ed, before its EventId is answered (or before a
 * redrive forgets its dead letter), and each (event, target) leaves it only once the target
 * succeeded or was dead-lettered. A crash or SIGKILL therefore loses nothing the relay marked
 * delivered: the next start re-delivers what was pending (at least once, as EventBridge does).
 * A `done` line is not fsync'ed: losing one only delivers that target again.
 */
export class BusJournal {
  private fd: number | undefined;

  constructor(private readonly path: string) {}

  /**
   * Reads what an earlier run left pending, compacts the journal to just that (durably, before
   * the old journal is replaced: a crash right after a restart must not lose pending
   * deliveries), and returns one delivery per pending (event, target).
   */
  recover(): TargetDelivery[] {
    if (!existsSync(this.path)) return [];
    const open = new Map<string, { event: BusEvent; targets: Map<string, BusTarget> }>();
    for (const line of readFileSync(this.path, 'utf8').split('\n')) {
      if (!line.trim()) continue;
      let entry: JournalLine;
      try {
        entry = JSON.parse(line) as JournalLine;
      } catch {
        continue; // a torn last line from a crash mid-append: its entry was never answered
      }
      if (entry.t === 'event') {
        const existing = open.get(entry.event.id) ?? { event: entry.event, targets: new Map() };
        for (const t of entry.targets) existing.targets.set(`${t.rule}/${t.consumer}`, t);
        open.set(entry.event.id, existing);
      } else {
        const existing = open.get(entry.id);
        existing?.targets.delete(`${entry.rule}/${entry.consumer}`);
        if (existing && existing.targets.size === 0) open.delete(entry.id);
      }
    }
    const pending: TargetDelivery[] = [];
    const compacted: string[] = [];
    for (const { event, targets } of open.values()) {
      compacted.push(
        JSON.stringify({ t: 'event', event, targets: [...targets.values()] } satisfies JournalLine),
      );
      for (const t of targets.values()) pending.push({ event, ...t, firstAttemptAt: Date.now() });
    }
    replaceDurably(this.path, compacted);
    return pending;
  }

  /** Opens the journal for appending (after {@link recover}). */
  open(): void {
    this.fd = openSync(this.path, 'a');
  }

  /** Journals events with their targets and fsyncs: the caller may answer their EventIds after this returns. */
  recordEvents(events: readonly JournalledEvent[]): void {
    this.append(
      events.map(({ event, targets }) => ({ t: 'event', event, targets: [...targets] })),
      true,
    );
  }

  /** Journals that one target is finished with its event (delivered or dead-lettered). */
  recordDone(delivery: TargetDelivery): void {
    const { event, consumer, rule } = delivery;
    this.append([{ t: 'done', id: event.id, consumer, rule }], false);
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  // After close (a delivery finishing while the bus stops) nothing is written: the line is
  // not needed, the next start re-delivers that target.
  private append(lines: readonly JournalLine[], durable: boolean): void {
    if (lines.length === 0 || this.fd === undefined) return;
    appendFileSync(this.fd, lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
    if (durable) fsyncSync(this.fd);
  }
}
