import { existsSync, readFileSync } from 'node:fs';
import { type FileHandle, open as openFile } from 'node:fs/promises';
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

/** What the journal needs of its open file. */
export type JournalFile = Pick<FileHandle, 'appendFile' | 'sync' | 'close'>;

/** Lines waiting for the next write, and the callers waiting for their fsync. */
interface JournalBatch {
  text: string;
  durable: boolean;
  readonly waiters: { resolve: () => void; reject: (err: unknown) => void }[];
}

/**
 * The bus's write-ahead journal (`journal.jsonl`), what makes an `EventId` a promise.
 *
 * Invariant: an event is in the journal, fsync'ed, before its EventId is answered (or before a
 * redrive forgets its dead letter), and each (event, target) leaves it only once the target
 * succeeded or was dead-lettered. A crash or SIGKILL therefore loses nothing the relay marked
 * delivered: the next start re-delivers what was pending (at least once, as EventBridge does).
 * A `done` line is not fsync'ed: losing one only delivers that target again.
 *
 * Writes are asynchronous and group-committed: what is recorded while a write and its fsync are
 * under way goes out in the next one, in order, so the event loop never waits on the disk (a
 * synchronous append and fsync per PutEvents call held everything else in the process for a
 * millisecond or two each, measured in `npm run bench:e2e`) and one fsync covers every
 * PutEvents call that arrived meanwhile.
 *
 * A failed write or fsync breaks the journal for good: the write may have left a torn line
 * that the next append would glue onto (recovery then skips the glued line: an answered event
 * lost), and on Linux a later fsync can succeed although the failed one's pages never reached
 * the disk. Every later event is refused (the bus answers InternalFailure, which the relay
 * retries); the next start recovers what reached the file.
 */
export class BusJournal {
  private handle: JournalFile | undefined;
  private next: JournalBatch | undefined;
  private writing: Promise<void> | undefined;
  private closed: Promise<void> | undefined;
  private broken: unknown;
  private brokenSince: Date | undefined;

  constructor(
    private readonly path: string,
    /** Told when a `done` line could not be written (its target is delivered again after a restart). */
    private readonly onLostDone: (err: unknown) => void = () => {},
    /** Opens the file for appending (tests put a failing disk here). */
    private readonly open: (path: string) => Promise<JournalFile> = (p) => openFile(p, 'a'),
  ) {}

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

  /** Whether the journal takes events, and if not, the write failure that stopped it and when. */
  get state(): { readonly up: boolean; readonly cause?: string; readonly since?: string } {
    if (this.broken === undefined) return { up: true };
    return {
      up: false,
      cause: `a journal write failed: ${this.broken instanceof Error ? this.broken.message : String(this.broken)}`,
      since: this.brokenSince?.toISOString(),
    };
  }

  /** Opens the journal for appending (after {@link recover}). */
  async openForAppend(): Promise<void> {
    this.handle = await this.open(this.path);
    this.closed = undefined;
  }

  /** Journals events with their targets; resolves once they are fsync'ed: then the caller may answer their EventIds. */
  recordEvents(events: readonly JournalledEvent[]): Promise<void> {
    return this.append(
      events.map(({ event, targets }) => ({ t: 'event', event, targets: [...targets] })),
      true,
    );
  }

  /** Journals that one target is finished with its event (delivered or dead-lettered); nobody waits for it. */
  recordDone(delivery: TargetDelivery): void {
    const { event, consumer, rule } = delivery;
    this.append([{ t: 'done', id: event.id, consumer, rule }], false).catch(this.onLostDone);
  }

  /** Writes what is recorded so far, then closes; later records are not written. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      while (this.writing) await this.writing;
      await this.handle?.close();
      this.handle = undefined;
    })();
    return this.closed;
  }

  // After close a `done` line (a delivery finishing while the bus stops) is dropped: the next
  // start re-delivers that target. An event line is refused: its EventId must not be answered.
  private append(lines: readonly JournalLine[], durable: boolean): Promise<void> {
    if (lines.length === 0) return Promise.resolve();
    const refusal =
      this.broken !== undefined
        ? new Error('the bus journal failed a write and takes no more events until a restart', {
            cause: this.broken,
          })
        : this.handle === undefined || this.closed
          ? new Error('the bus journal is closed')
          : undefined;
    if (refusal) return durable ? Promise.reject(refusal) : Promise.resolve();
    const batch = this.next ?? { text: '', durable: false, waiters: [] };
    this.next = batch;
    batch.text += lines.map((l) => `${JSON.stringify(l)}\n`).join('');
    batch.durable ||= durable;
    const written = new Promise<void>((resolve, reject) => batch.waiters.push({ resolve, reject }));
    if (!this.writing) this.writing = this.flush();
    return written;
  }

  /** Writes batch after batch until none is waiting; one at a time, so lines stay in order. */
  private async flush(): Promise<void> {
    const handle = this.handle as JournalFile;
    for (let batch = this.next; batch; batch = this.next) {
      this.next = undefined;
      if (this.broken !== undefined) {
        for (const w of batch.waiters) w.reject(this.broken);
        continue;
      }
      try {
        await handle.appendFile(batch.text);
        if (batch.durable) await handle.sync();
        for (const w of batch.waiters) w.resolve();
      } catch (err) {
        this.broken = err;
        this.brokenSince = new Date();
        for (const w of batch.waiters) w.reject(err);
      }
    }
    this.writing = undefined;
  }
}
