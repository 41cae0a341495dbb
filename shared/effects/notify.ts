import { appendFile, mkdir, readFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { PublishCommand, type SNSClient } from '@aws-sdk/client-sns';
import type { PipelineCloudEvent } from '../events/schemas';
import { eventTypes } from '../topology';
import type { ConsumerEffect } from './effect';
import { snsSubject } from './sns-subject';

/**
 * One notification: who should hear about which decision (an approval or a rejection, with its
 * reason). `eventId` is its idempotency key; `reviewer` is who decided.
 */
export type Notification = {
  readonly eventId: string;
  readonly taskId: string;
  readonly version: number;
  readonly title: string;
  readonly assignee: string | null;
  readonly reviewer: string;
  readonly message: string;
} & (
  | { readonly eventType: typeof eventTypes.approved; readonly approvedAt: string }
  | {
      readonly eventType: typeof eventTypes.rejected;
      readonly rejectedAt: string;
      readonly reason: string;
    }
);

/** `sent`: handed to the channel now; `duplicate`: the channel already has this event's notification. */
export type NotifyOutcome = 'sent' | 'duplicate';

/** The notification channel port. */
export interface Notifier {
  send(notification: Notification): Promise<NotifyOutcome>;
}

/**
 * Notifications over SNS. A standard topic cannot dedupe, so every message carries `eventId`
 * and `taskId` attributes for subscribers to dedupe on; a FIFO topic (`.fifo`) also gets the
 * event id as MessageDeduplicationId, which SNS honours for 5 minutes, and the task id as the
 * group, so one task's notifications stay in order.
 */
export class SnsNotifier implements Notifier {
  private readonly fifo: boolean;

  constructor(
    private readonly sns: SNSClient,
    private readonly topicArn: string,
  ) {
    this.fifo = topicArn.endsWith('.fifo');
  }

  async send(n: Notification): Promise<NotifyOutcome> {
    try {
      await this.sns.send(
        new PublishCommand({
          TopicArn: this.topicArn,
          Subject: snsSubject(n.title, n.eventType === eventTypes.rejected ? 'Rejected: ' : 'Approved: '),
          Message: JSON.stringify(n),
          MessageAttributes: {
            eventId: { DataType: 'String', StringValue: n.eventId },
            taskId: { DataType: 'String', StringValue: n.taskId },
            eventType: { DataType: 'String', StringValue: n.eventType },
            // SNS rejects empty attribute values; subscription filters can still match on absence.
            ...(n.assignee ? { assignee: { DataType: 'String', StringValue: n.assignee } } : {}),
            reviewer: { DataType: 'String', StringValue: n.reviewer },
          },
          ...(this.fifo ? { MessageDeduplicationId: n.eventId, MessageGroupId: n.taskId } : {}),
        }),
      );
      return 'sent';
    } catch (err) {
      throw new Error(`notification for event ${n.eventId} to ${this.topicArn} failed`, { cause: err });
    }
  }
}

/** A send waiting for its file's writer. */
interface PendingSend {
  readonly notification: Notification;
  readonly resolve: (outcome: NotifyOutcome) => void;
  readonly reject: (err: unknown) => void;
}

// One writer per file in this process, so the check-then-append below is not raced. Sends that
// arrive while it writes wait in `waiting` and go out together in its next append.
const writers = new Map<string, { waiting: PendingSend[]; writing: boolean }>();
// Event ids already in each file, valid while the file's size is the one recorded.
const seenByPath = new Map<string, { size: number; ids: Set<string>; endsWithNewline: boolean }>();

/**
 * Notifications as JSON lines in `<dataDir>/notifications.jsonl` (the local runtime): one line
 * per notification, skipped when a line with the same event id is already there.
 *
 * Group commit: the sends that arrive while an append is under way are written by the next one,
 * together (one stat and one append for the batch), so a burst costs a few file operations,
 * not a chain of them per notification waiting behind each other. A failed append fails every
 * send of its batch; their retries find in the file whatever part of it landed.
 */
export class FileNotifier implements Notifier {
  readonly path: string;

  constructor(dataDir: string) {
    this.path = join(dataDir, 'notifications.jsonl');
  }

  send(notification: Notification): Promise<NotifyOutcome> {
    return new Promise((resolve, reject) => {
      let writer = writers.get(this.path);
      if (!writer) {
        writer = { waiting: [], writing: false };
        writers.set(this.path, writer);
      }
      writer.waiting.push({ notification, resolve, reject });
      if (!writer.writing) void this.write(writer);
    });
  }

  /** Every notification in the file, in order (unreadable lines, e.g. a torn last write, skipped). */
  async read(): Promise<Notification[]> {
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
        const outcomes = await this.appendOnce(batch.map((p) => p.notification));
        for (const [i, p] of batch.entries()) p.resolve(outcomes[i] as NotifyOutcome);
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
    }
    writer.writing = false;
  }

  private async appendOnce(batch: readonly Notification[]): Promise<NotifyOutcome[]> {
    await mkdir(dirname(this.path), { recursive: true });
    // The file is re-read only when its size is not what this process last saw: a batch costs
    // one stat, not a parse of every earlier notification.
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
        ids: new Set(parseLines(text).map((line) => line.eventId)),
        endsWithNewline: text.length === 0 || text.endsWith('\n'),
      };
      seenByPath.set(this.path, seen);
    }
    const fresh = new Set<string>();
    const outcomes: NotifyOutcome[] = [];
    const lines: string[] = [];
    for (const n of batch) {
      if (seen.ids.has(n.eventId) || fresh.has(n.eventId)) {
        outcomes.push('duplicate');
        continue;
      }
      fresh.add(n.eventId);
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

function parseLines(text: string): Notification[] {
  const out: Notification[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as Notification);
    } catch {
      // A line cut short by a crash mid-append: not a notification.
    }
  }
  return out;
}

/**
 * The notification for an approval or a rejection (the events routed to notify): the assignee
 * hears that their content goes out, or why it does not.
 */
export function notificationFor(event: PipelineCloudEvent): Notification {
  if (event.type === eventTypes.rejected) {
    const d = event.data;
    return {
      eventId: event.id,
      taskId: d.taskId,
      version: d.version,
      eventType: event.type,
      title: d.title,
      assignee: d.assignee,
      reviewer: d.reviewer,
      rejectedAt: d.rejectedAt,
      reason: d.reason,
      message: `"${d.title}" was rejected by ${d.reviewer}: ${d.reason}${d.assignee ? `; assigned to ${d.assignee}` : ''}`,
    };
  }
  if (event.type !== eventTypes.approved) {
    throw new TypeError(`notify has no notification for ${event.type}`);
  }
  const d = event.data;
  return {
    eventId: event.id,
    taskId: d.taskId,
    version: d.version,
    eventType: event.type,
    title: d.title,
    assignee: d.assignee,
    reviewer: d.reviewer,
    approvedAt: d.approvedAt,
    message: `"${d.title}" was approved by ${d.reviewer}${d.assignee ? `; assigned to ${d.assignee}` : ''}`,
  };
}

/** The notify consumer's effect: send the decision's notification once per channel's own dedupe. */
export function notifyEffect(notifier: Notifier): ConsumerEffect {
  return async (event) => {
    const outcome = await notifier.send(notificationFor(event));
    return { outcome };
  };
}
