import { appendFile, readFile, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Publisher, PublishOutcome, TopicMessage } from '../../../shared/consumers/resources';
import { snsSubject } from '../../../shared/consumers/topic-subject';
import { ensureDirectory } from './ensure-directory';

/** A send waiting for its file's writer. */
interface PendingSend {
  readonly message: TopicMessage;
  readonly resolve: (outcome: PublishOutcome) => void;
  readonly reject: (err: unknown) => void;
}

// One writer per file in this process, so the check-then-append below is not raced. Sends that
// arrive while it writes wait in `waiting` and go out together in its next append.
const writers = new Map<string, { waiting: PendingSend[]; writing: boolean }>();
// Message ids already in each file, valid while the file's size is the one recorded.
const seenByPath = new Map<string, { size: number; ids: Set<string>; endsWithNewline: boolean }>();

/**
 * A topic resource as JSON lines in a file (the local runtime's stand-in for SNS): one line per
 * message (`TopicMessage`, its subject cut as SNS needs it), skipped when a line with the same
 * id is already there, as a FIFO topic would.
 *
 * Group commit: the sends that arrive while an append is under way are written by the next one,
 * together (one stat and one append for the batch), so a burst costs a few file operations,
 * not a chain of them per message waiting behind each other. A failed append fails every
 * send of its batch; their retries find in the file whatever part of it landed.
 */
export class FilePublisher implements Publisher {
  constructor(readonly path: string) {}

  publish(message: TopicMessage): Promise<PublishOutcome> {
    return new Promise((resolve, reject) => {
      let writer = writers.get(this.path);
      if (!writer) {
        writer = { waiting: [], writing: false };
        writers.set(this.path, writer);
      }
      writer.waiting.push({
        message: { ...message, subject: snsSubject(message.subject, '') },
        resolve,
        reject,
      });
      if (!writer.writing) void this.write(writer);
    });
  }

  /** Every message in the file, in order (unreadable lines, e.g. a torn last write, skipped). */
  async read(): Promise<TopicMessage[]> {
    return parseLines(await this.readText());
  }

  private async readText(): Promise<string> {
    return readFile(this.path, 'utf8').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return '';
      throw err;
    });
  }

  /** Appends what is waiting, batch after batch, until nothing is. */
  private async write(writer: { waiting: PendingSend[]; writing: boolean }): Promise<void> {
    writer.writing = true;
    while (writer.waiting.length > 0) {
      const batch = writer.waiting.splice(0);
      try {
        const outcomes = await this.appendOnce(batch.map((p) => p.message));
        for (const [i, p] of batch.entries()) p.resolve(outcomes[i] as PublishOutcome);
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
    }
    writer.writing = false;
  }

  private async appendOnce(batch: readonly TopicMessage[]): Promise<PublishOutcome[]> {
    await ensureDirectory(dirname(this.path));
    // The file is re-read only when its size is not what this process last saw: a batch costs
    // one stat, not a parse of every earlier message.
    const size = await stat(this.path).then(
      (s) => s.size,
      (err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return 0;
        throw err;
      },
    );
    let seen = seenByPath.get(this.path);
    if (!seen || seen.size !== size) {
      const text = await this.readText();
      seen = {
        size: Buffer.byteLength(text),
        ids: new Set(parseLines(text).map((line) => line.id)),
        endsWithNewline: text.length === 0 || text.endsWith('\n'),
      };
      seenByPath.set(this.path, seen);
    }
    const fresh = new Set<string>();
    const outcomes: PublishOutcome[] = [];
    const lines: string[] = [];
    for (const n of batch) {
      if (seen.ids.has(n.id) || fresh.has(n.id)) {
        outcomes.push('duplicate');
        continue;
      }
      fresh.add(n.id);
      lines.push(`${JSON.stringify(n)}\n`);
      outcomes.push('sent');
    }
    if (lines.length === 0) return outcomes;
    // A torn last line must not swallow the first of these.
    const text = `${seen.endsWithNewline ? '' : '\n'}${lines.join('')}`;
    await appendFile(this.path, text);
    seen.size += Buffer.byteLength(text);
    for (const id of fresh) seen.ids.add(id);
    seen.endsWithNewline = true;
    return outcomes;
  }
}

function parseLines(text: string): TopicMessage[] {
  const out: TopicMessage[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const parsed = JSON.parse(line) as TopicMessage | Record<string, unknown>;
      // A line from before topics were a resource kind: the notification itself, keyed by its event.
      out.push(
        'body' in parsed && 'id' in parsed
          ? (parsed as TopicMessage)
          : { id: String(parsed.eventId), group: '', subject: '', body: parsed, attributes: {} },
      );
    } catch {
      // A line cut short by a crash mid-append: not a message.
    }
  }
  return out;
}
