import { createReadStream, existsSync } from 'node:fs';
import { type FileHandle, open as openFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createInterface } from 'node:readline';
import type { BusEvent, BusTarget, TargetDelivery } from './bus-types';
import { keepAside } from './damaged-lines';
import { freeBytes, probeWrite, replaceDurablyAsync } from './durable-file';

/** A line of the journal: an accepted event with its targets, or one target finished with it. */
type JournalLine =
  | { t: 'event'; event: BusEvent; targets: BusTarget[] }
  | { t: 'done'; id: string; consumer: BusTarget['consumer']; rule: string };

/** A journal line the start could not read, as it was kept aside (see {@link BusJournal.recover}). */
export interface DamagedLine {
  /** 1-based, in the journal as the start found it. */
  readonly lineNumber: number;
  readonly text: string;
  /** The file's last line, without its newline: an append a crash cut short (never answered). */
  readonly torn: boolean;
}

/** An event and the targets it still has to reach. */
export interface JournalledEvent {
  readonly event: BusEvent;
  readonly targets: readonly BusTarget[];
}

/** What the journal needs of its open file. */
export type JournalFile = Pick<FileHandle, 'appendFile' | 'sync' | 'close'>;

/** The journal's file operations, so a test can put a failing disk under it. */
export interface JournalDisk {
  /** Opens the journal for appending. */
  openAppend(path: string): Promise<JournalFile>;
  /** Replaces the file with `lines` so that a crash leaves the old file or the whole new one (see replaceDurablyAsync). */
  replace(path: string, lines: Iterable<string>): Promise<void>;
  /** Bytes free on the filesystem of `dir` (statfs); undefined when it cannot tell. */
  freeBytes(dir: string): Promise<number | undefined>;
  /** Writes `bytes` to `path`, fsyncs them, and removes the file (see probeWrite). */
  probe(path: string, bytes: number): Promise<void>;
}

const realDisk: JournalDisk = {
  openAppend: (path) => openFile(path, 'a'),
  replace: replaceDurablyAsync,
  freeBytes,
  probe: probeWrite,
};

/** What a journal tells its owner, and how it is built. */
export interface BusJournalOptions {
  /** Told when a `done` line could not be written (its target is delivered again after a restart). */
  readonly onLostDone?: (err: unknown) => void;
  /** Told once when a write fails and the journal stops taking events. */
  readonly onFailure?: (err: unknown) => void;
  /** Told once the journal takes events again after a failure, with how long it could not. */
  readonly onRecovered?: (downMs: number) => void;
  /** The disk under it (tests put a failing one here). */
  readonly disk?: Partial<JournalDisk>;
  /** Epoch ms; `Date.now` by default. */
  readonly clock?: () => number;
  /**
   * The journal is compacted while running once this much has been appended since the last
   * compaction and at least as much as that compaction wrote. @default 8 MiB (about 7,000
   * approvals' lines)
   */
  readonly compactAfterBytes?: number;
  /**
   * What a journal that failed needs before it takes events again: this much free on its
   * filesystem (statfs), and a write of this much, fsync'ed (then removed). A rewrite of what is
   * undelivered is no such proof: it is small, and fits where the next events do not (a
   * journal that took events again on it failed again at the next write, every second, for as
   * long as the disk stayed full). @default 1 MiB (about 800 approvals' lines: a relay round)
   */
  readonly recoveryBytes?: number;
}

/** See BusJournalOptions.compactAfterBytes. */
const defaultCompactAfterBytes = 8 << 20;

/** See BusJournalOptions.recoveryBytes. */
const defaultRecoveryBytes = 1 << 20;

/**
 * How often a journal that failed looks at its filesystem's free space (one statfs, no write)
 * while there is not enough: a disk freed is noticed within this long.
 */
export const journalRoomCheckMs = 1_000;

/** A failure this soon after a recovery continues that recovery's backoff instead of starting a new one. */
const steadyAfterMs = 60_000;

/** Lines waiting for the next write, and the callers waiting for their fsync. */
interface JournalBatch {
  text: string;
  durable: boolean;
  /** The events this batch makes durable: they join the open set once it is. */
  readonly events: JournalledEvent[];
  readonly waiters: { resolve: () => void; reject: (err: unknown) => void }[];
}

/** The first words of every refusal while the journal cannot write: the relay's `last_error` carries them. */
export const journalUnavailableMessage = 'the bus journal cannot write';

/**
 * How long a broken journal waits before it tries to write again (attempt 1-based) after a try
 * that failed although its filesystem had room (an I/O error, a read-only filesystem): 1 s
 * doubling to 30 s. Room that is missing is looked for every {@link journalRoomCheckMs}, with
 * no write.
 */
export function journalRetryDelayMs(attempt: number): number {
  return Math.min(30_000, 1_000 * 2 ** Math.max(0, attempt - 1));
}

const targetKey = (t: BusTarget) => `${t.rule}/${t.consumer}`;

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
 * The journal keeps in memory what it holds durably and is not finished (the open set): the
 * events of batches whose fsync succeeded, less the targets finished since. It is compacted to
 * that set while running (between two writes, the same rewrite as after a failure) once what
 * was appended since the last compaction is both over `compactAfterBytes` and as large as what
 * that compaction wrote: the file stays within about twice the larger of the two, so its size
 * follows what is still undelivered, never the history. The start reads it as a stream, line
 * by line, whatever its size.
 *
 * A failed write or fsync stops the journal from appending: the write may have left a torn line
 * that the next append would glue onto (recovery then skips the glued line: an answered event
 * lost), and on Linux a later fsync can succeed although the failed one's pages never reached
 * the disk. The failed batch's events are refused (never answered), and so is every event after
 * it (the bus answers InternalFailure, which the relay treats as its transport being down)
 * until it can really write again: its filesystem has `recoveryBytes` free (statfs, looked at
 * every second without writing), a probe write of that size succeeds (fsync'ed, removed), and
 * it rewrites itself from the open set: a new file, fsync'ed, renamed over the old one (no torn
 * line survives that), then opened for appending. Only then does it take events again (and
 * `state` say up): writes succeed again, and nothing it answered is missing from the file. A
 * try that fails with room on the disk (an I/O error) waits 1 s doubling to 30 s before the
 * next; one that fails within a minute of a recovery continues that backoff.
 */
export class BusJournal {
  private handle: JournalFile | undefined;
  /** Opened for appending once (the handle itself is replaced while compacting or reopening). */
  private opened = false;
  private next: JournalBatch | undefined;
  private writing: Promise<void> | undefined;
  private closed: Promise<void> | undefined;
  private broken: { err: unknown; since: number } | undefined;
  private reopening: { timer: NodeJS.Timeout } | undefined;
  private reopenAttempts = 0;
  /** When it last took events again after a failure. */
  private recoveredAt = Number.NEGATIVE_INFINITY;
  /** What the last look at the filesystem found, while it had too little room. */
  private room: { free: number; needed: number } | undefined;
  /** A rewrite is under way; `retrySoon` asks for another at once if it fails. */
  private rewriting = false;
  private retrySoon = false;
  /** Characters appended since the last compaction, and how many that compaction wrote. */
  private appended = 0;
  private compacted = 0;
  /** The lines the last {@link recover} could not read, kept aside in `damagedPath`. */
  damaged: readonly DamagedLine[] = [];
  /** Durable, unfinished events by id, with the targets each still has to reach. */
  private readonly open = new Map<string, { event: BusEvent; targets: Map<string, BusTarget> }>();
  private readonly disk: JournalDisk;
  private readonly clock: () => number;

  constructor(
    private readonly path: string,
    private readonly options: BusJournalOptions = {},
  ) {
    this.disk = { ...realDisk, ...options.disk };
    this.clock = options.clock ?? Date.now;
  }

  /** Where {@link recover} keeps the lines it could not read: `<journal>.damaged.jsonl`, beside it. */
  get damagedPath(): string {
    return `${this.path.replace(/\.jsonl$/, '')}.damaged.jsonl`;
  }

  /**
   * Reads what an earlier run left pending, line by line (a journal of any size: never one
   * string), compacts the journal to just that (durably, before the old journal is replaced:
   * a crash right after a restart must not lose pending deliveries), and returns one delivery
   * per pending (event, target).
   *
   * A line it cannot read (damaged on the disk while the runtime was stopped, or the last line
   * of an append a crash cut short) is never dropped silently: it is appended to
   * {@link damagedPath} (fsync'ed) before the journal is rewritten without it, and listed in
   * {@link damaged}, so that its owner reports it and makes its deliveries again from what the
   * line's ids name (the local bus does, from the outbox: infra/local/journal-repair.ts).
   */
  async recover(): Promise<TargetDelivery[]> {
    this.open.clear();
    this.damaged = [];
    if (!existsSync(this.path)) return [];
    const lines = createInterface({
      input: createReadStream(this.path, { encoding: 'utf8' }),
      crlfDelay: Number.POSITIVE_INFINITY,
    });
    const damaged: { lineNumber: number; text: string }[] = [];
    let lineNumber = 0;
    for await (const line of lines) {
      lineNumber++;
      if (!line.trim()) continue;
      const entry = parseLine(line);
      if (!entry) damaged.push({ lineNumber, text: line });
      else if (entry.t === 'event') this.remember(entry.event, entry.targets);
      else this.forget(entry.id, entry);
    }
    if (damaged.length > 0) {
      const torn = !(await endsWithNewline(this.path));
      this.damaged = damaged.map((d) => ({ ...d, torn: torn && d.lineNumber === lineNumber }));
      await keepAside(this.damagedPath, this.damaged, this.clock());
    }
    const pending: TargetDelivery[] = [];
    for (const { event, targets } of this.open.values()) {
      for (const t of targets.values()) pending.push({ event, ...t, firstAttemptAt: this.clock() });
    }
    await this.rewrite();
    return pending;
  }

  /** Opens the journal for appending (after {@link recover}). */
  async openForAppend(): Promise<void> {
    this.handle = await this.disk.openAppend(this.path);
    this.opened = true;
    this.closed = undefined;
  }

  /** Whether the journal takes events, and if not, the write failure that stopped it and since when. */
  get state(): { readonly up: boolean; readonly cause?: string; readonly since?: string } {
    if (!this.broken) return { up: true };
    const room = this.room
      ? `; ${this.room.free} bytes free on its filesystem, ${this.room.needed} needed to take events again`
      : '';
    return {
      up: false,
      cause: `${journalUnavailableMessage}: ${messageOf(this.broken.err)}${room}`,
      since: new Date(this.broken.since).toISOString(),
    };
  }

  /** Events durably journalled and not finished with every target. */
  get openEvents(): number {
    return this.open.size;
  }

  /** Journals events with their targets; resolves once they are fsync'ed: then the caller may answer their EventIds. */
  recordEvents(events: readonly JournalledEvent[]): Promise<void> {
    return this.append(
      events.map(({ event, targets }) => ({ t: 'event', event, targets: [...targets] })),
      true,
      events,
    );
  }

  /** Journals that one target is finished with its event (delivered or dead-lettered); nobody waits for it. */
  recordDone(delivery: TargetDelivery): void {
    const { event, consumer, rule } = delivery;
    this.forget(event.id, delivery);
    this.append([{ t: 'done', id: event.id, consumer, rule }], false, []).catch((err: unknown) =>
      this.options.onLostDone?.(err),
    );
  }

  /**
   * Tries to take events again now rather than at the next retry (a broken journal only). For
   * a caller that knows the disk was freed; the journal retries on its own anyway.
   */
  retryNow(): void {
    if (!this.broken || this.closed) return;
    if (this.rewriting) this.retrySoon = true;
    else this.scheduleReopen(0);
  }

  /** Writes what is recorded so far, then closes; later records are not written. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      if (this.reopening) clearTimeout(this.reopening.timer);
      this.reopening = undefined;
      while (this.writing) await this.writing;
      await this.handle?.close().catch(() => undefined);
      this.handle = undefined;
    })();
    return this.closed;
  }

  private remember(event: BusEvent, targets: readonly BusTarget[]): void {
    const existing = this.open.get(event.id) ?? { event, targets: new Map<string, BusTarget>() };
    for (const t of targets) existing.targets.set(targetKey(t), { rule: t.rule, consumer: t.consumer });
    this.open.set(event.id, existing);
  }

  private forget(id: string, target: BusTarget): void {
    const existing = this.open.get(id);
    existing?.targets.delete(targetKey(target));
    if (existing && existing.targets.size === 0) this.open.delete(id);
  }

  /** The open set as journal lines: what a compacted journal holds. */
  private *openLines(): Generator<string> {
    for (const { event, targets } of this.open.values()) {
      yield JSON.stringify({ t: 'event', event, targets: [...targets.values()] } satisfies JournalLine);
    }
  }

  /** Replaces the file with the open set (no handle may be open on it); counts what it wrote. */
  private async rewrite(): Promise<void> {
    let written = 0;
    const counted = function* (lines: Iterable<string>) {
      for (const line of lines) {
        written += line.length + 1;
        yield line;
      }
    };
    await this.disk.replace(this.path, counted(this.openLines()));
    this.appended = 0;
    this.compacted = written;
  }

  /** Compacts between two writes: the file is replaced by the open set and opened again. */
  private async compact(handle: JournalFile): Promise<JournalFile> {
    this.handle = undefined;
    await handle.close();
    await this.rewrite();
    const reopened = await this.disk.openAppend(this.path);
    this.handle = reopened;
    return reopened;
  }

  // After close a `done` line (a delivery finishing while the bus stops) is dropped: the next
  // start re-delivers that target. An event line is refused: its EventId must not be answered.
  private append(
    lines: readonly JournalLine[],
    durable: boolean,
    events: readonly JournalledEvent[],
  ): Promise<void> {
    if (lines.length === 0) return Promise.resolve();
    const refusal = this.broken
      ? new Error(`${journalUnavailableMessage}: ${messageOf(this.broken.err)}`, { cause: this.broken.err })
      : !this.opened || this.closed
        ? new Error('the bus journal is closed')
        : undefined;
    if (refusal) return durable ? Promise.reject(refusal) : Promise.resolve();
    const batch = this.next ?? { text: '', durable: false, events: [], waiters: [] };
    this.next = batch;
    batch.text += lines.map((l) => `${JSON.stringify(l)}\n`).join('');
    batch.durable ||= durable;
    batch.events.push(...events);
    const written = new Promise<void>((resolve, reject) => batch.waiters.push({ resolve, reject }));
    if (!this.writing) this.writing = this.flush();
    return written;
  }

  /** Writes batch after batch until none is waiting; one at a time, so lines stay in order. */
  private async flush(): Promise<void> {
    for (let batch = this.next; batch; batch = this.next) {
      this.next = undefined;
      let handle = this.handle;
      if (handle && !this.broken && this.compactionDue()) {
        try {
          handle = await this.compact(handle);
        } catch (err) {
          // The old file is whole (a failed replace leaves it); the journal rewrites itself later.
          this.fail(err);
          handle = undefined;
        }
      }
      if (this.broken || !handle) {
        const why = this.broken
          ? new Error(`${journalUnavailableMessage}: ${messageOf(this.broken.err)}`, {
              cause: this.broken.err,
            })
          : new Error('the bus journal is closed');
        for (const w of batch.waiters) w.reject(why);
        continue;
      }
      try {
        this.appended += batch.text.length;
        await handle.appendFile(batch.text);
        if (batch.durable) await handle.sync();
      } catch (err) {
        this.fail(err);
        // Named as every refusal after it is: the relay's last error says what it was.
        const why = new Error(`${journalUnavailableMessage}: ${messageOf(err)}`, { cause: err });
        for (const w of batch.waiters) w.reject(why);
        continue;
      }
      for (const { event, targets } of batch.events) this.remember(event, targets);
      for (const w of batch.waiters) w.resolve();
    }
    this.writing = undefined;
  }

  private compactionDue(): boolean {
    const after = this.options.compactAfterBytes ?? defaultCompactAfterBytes;
    return this.appended >= after && this.appended >= this.compacted;
  }

  private fail(err: unknown): void {
    if (this.broken) return;
    this.broken = { err, since: this.clock() };
    this.room = undefined;
    if (this.clock() - this.recoveredAt >= steadyAfterMs) this.reopenAttempts = 0;
    this.options.onFailure?.(err);
    // The handle may sit past a torn line: it is not written again, only replaced.
    const handle = this.handle;
    this.handle = undefined;
    void handle?.close().catch(() => undefined);
    this.scheduleReopen(journalRetryDelayMs(1));
  }

  private scheduleReopen(ms: number): void {
    if (this.closed) return;
    if (this.reopening) clearTimeout(this.reopening.timer);
    const timer = setTimeout(() => {
      this.reopening = undefined;
      void this.reopen();
    }, ms);
    timer.unref();
    this.reopening = { timer };
  }

  /**
   * Takes events again once it can really write: room on the filesystem, a probe write of
   * `recoveryBytes`, then the file rewritten from the open set and opened again. Too little
   * room: looks again in {@link journalRoomCheckMs}; any other failure: tries again later.
   */
  private async reopen(): Promise<void> {
    if (!this.broken || this.closed || this.rewriting) return;
    this.rewriting = true;
    try {
      // Writes run one at a time: none is under way while broken (flush refuses every batch).
      while (this.writing) await this.writing;
      const needed = this.options.recoveryBytes ?? defaultRecoveryBytes;
      const free = await this.disk.freeBytes(dirname(this.path));
      if (free !== undefined && free < needed) {
        this.room = { free, needed };
        this.scheduleReopen(this.retrySoon ? 0 : journalRoomCheckMs);
        return;
      }
      this.room = undefined;
      this.reopenAttempts++;
      await this.disk.probe(`${this.path}.probe`, needed);
      await this.rewrite();
      const handle = await this.disk.openAppend(this.path);
      if (this.closed) {
        await handle.close();
        return;
      }
      this.handle = handle;
    } catch {
      this.scheduleReopen(this.retrySoon ? 0 : journalRetryDelayMs(this.reopenAttempts + 1));
      return;
    } finally {
      this.rewriting = false;
      this.retrySoon = false;
    }
    const downMs = this.clock() - this.broken.since;
    this.broken = undefined;
    this.recoveredAt = this.clock();
    this.options.onRecovered?.(downMs);
  }
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** A journal line, or undefined when it is not one whole: not JSON, or not the shape this journal writes. */
function parseLine(line: string): JournalLine | undefined {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return undefined;
  }
  const e = entry as Partial<Record<string, unknown>> | null;
  if (typeof e !== 'object' || e === null) return undefined;
  if (e.t === 'event') {
    const event = e.event as Partial<BusEvent> | undefined;
    return typeof event?.id === 'string' && Array.isArray(e.targets) ? (e as JournalLine) : undefined;
  }
  return e.t === 'done' &&
    typeof e.id === 'string' &&
    typeof e.consumer === 'string' &&
    typeof e.rule === 'string'
    ? (e as JournalLine)
    : undefined;
}

/** Whether the file's last byte is a newline (an empty file counts as ending well). */
async function endsWithNewline(path: string): Promise<boolean> {
  const handle = await openFile(path, 'r');
  try {
    const { size } = await handle.stat();
    if (size === 0) return true;
    const byte = Buffer.alloc(1);
    await handle.read(byte, 0, 1, size - 1);
    return byte[0] === 0x0a;
  } finally {
    await handle.close();
  }
}
