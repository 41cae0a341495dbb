import {
  type EventBridgeClient,
  PutEventsCommand,
  type PutEventsRequestEntry,
} from '@aws-sdk/client-eventbridge';
import { type OutboundEvent, toCloudEvent } from '../events/cloud-event';
import type { EventPublisher, PublishOutcome } from './publisher';

/** Per-entry error codes that may succeed on a later try; every other code never will. */
const retryableEntryCodes = new Set(['InternalFailure', 'ThrottlingException']);

export interface EventBridgePublisherOptions {
  readonly busName: string;
  readonly source: string;
  /** PutEvents entries per call (AWS: 1-10). */
  readonly maxEntries: number;
  /** Bytes per PutEvents request as AWS counts them (256 KB, or 1 MB since 2026). */
  readonly maxRequestBytes: number;
  /** Calls in flight at once. */
  readonly concurrency: number;
}

interface SizedEntry {
  readonly eventId: string;
  readonly entry: PutEventsRequestEntry;
  readonly bytes: number;
}

const utf8 = (s: string | undefined) => (s ? Buffer.byteLength(s, 'utf8') : 0);

/** AWS's entry size rule: 14 bytes for `Time`, plus the UTF-8 bytes of Source, DetailType, Detail, Resources. */
export function entrySize(entry: PutEventsRequestEntry): number {
  return (
    (entry.Time ? 14 : 0) +
    utf8(entry.Source) +
    utf8(entry.DetailType) +
    utf8(entry.Detail) +
    (entry.Resources ?? []).reduce((n, r) => n + utf8(r), 0)
  );
}

/** Packs entries into calls of at most `maxEntries` and `maxBytes`, keeping their order. */
export function packEntries(
  entries: readonly SizedEntry[],
  maxEntries: number,
  maxBytes: number,
): SizedEntry[][] {
  const calls: SizedEntry[][] = [];
  let current: SizedEntry[] = [];
  let bytes = 0;
  for (const e of entries) {
    if (current.length === maxEntries || (current.length > 0 && bytes + e.bytes > maxBytes)) {
      calls.push(current);
      current = [];
      bytes = 0;
    }
    current.push(e);
    bytes += e.bytes;
  }
  if (current.length > 0) calls.push(current);
  return calls;
}

/**
 * EventPublisher over `PutEvents`. Every entry's result is read: a 200 can carry failed
 * entries, which the SDK never retries. The SDK's own retry covers whole-call throttling and
 * 5xx; what still fails after it is reported on each entry of that call as retryable, since
 * nothing in the events caused it. An entry over the size limit is never sent and reported
 * as not retryable: it can never succeed.
 */
export class EventBridgePublisher implements EventPublisher {
  constructor(
    private readonly client: EventBridgeClient,
    private readonly options: EventBridgePublisherOptions,
  ) {}

  async publish(events: readonly OutboundEvent[]): Promise<PublishOutcome[]> {
    const outcomes: PublishOutcome[] = [];
    const sendable: SizedEntry[] = [];
    for (const event of events) {
      const entry: PutEventsRequestEntry = {
        EventBusName: this.options.busName,
        Source: this.options.source,
        DetailType: event.eventType,
        Detail: JSON.stringify(toCloudEvent(event, this.options.source)),
        Time: event.createdAt,
      };
      const bytes = entrySize(entry);
      if (bytes > this.options.maxRequestBytes) {
        outcomes.push({
          eventId: event.eventId,
          ok: false,
          retryable: false,
          errorCode: 'EntryTooLarge',
          errorMessage: `entry is ${bytes} bytes, over the ${this.options.maxRequestBytes}-byte PutEvents limit`,
        });
      } else {
        sendable.push({ eventId: event.eventId, entry, bytes });
      }
    }
    const calls = packEntries(sendable, this.options.maxEntries, this.options.maxRequestBytes);
    // A fixed pool of workers over a shared cursor: bounded concurrency in a few lines,
    // without a dependency for it.
    let next = 0;
    const worker = async () => {
      while (next < calls.length) {
        const call = calls[next++] as SizedEntry[];
        outcomes.push(...(await this.send(call)));
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.options.concurrency, calls.length) }, worker));
    return outcomes;
  }

  private async send(call: readonly SizedEntry[]): Promise<PublishOutcome[]> {
    try {
      const res = await this.client.send(new PutEventsCommand({ Entries: call.map((c) => c.entry) }));
      const results = res.Entries ?? [];
      return call.map((c, i): PublishOutcome => {
        const r = results[i];
        if (r?.EventId && !r.ErrorCode) return { eventId: c.eventId, ok: true, busEventId: r.EventId };
        const errorCode = r?.ErrorCode ?? 'MissingResult';
        return {
          eventId: c.eventId,
          ok: false,
          retryable: !r || retryableEntryCodes.has(errorCode),
          errorCode,
          errorMessage: r?.ErrorMessage ?? 'PutEvents returned no result for this entry',
        };
      });
    } catch (err) {
      const e = err as Error;
      return call.map((c) => ({
        eventId: c.eventId,
        ok: false as const,
        retryable: true,
        errorCode: e.name || 'PutEventsError',
        errorMessage: e.message,
      }));
    }
  }
}
