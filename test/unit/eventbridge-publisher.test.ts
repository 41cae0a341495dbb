import { EventBridgeClient, PutEventsCommand, type PutEventsCommandInput } from '@aws-sdk/client-eventbridge';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { OutboundEvent } from '../../shared/events/cloud-event';
import { EventBridgePublisher, entrySize, packEntries } from '../../shared/outbox/eventbridge-publisher';
import { elapse, useFakeTime } from '../support/fake-time';

const eventBridge = mockClient(EventBridgeClient);

function event(n: number, padding = 0): OutboundEvent {
  return {
    eventId: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    eventType: 'content.approved',
    aggregateId: '11111111-1111-4111-8111-111111111111',
    aggregateVersion: 2,
    payload: { n, padding: 'é'.repeat(padding) },
    createdAt: new Date('2026-11-30T00:00:00Z'),
  };
}

function publisher(options: Partial<ConstructorParameters<typeof EventBridgePublisher>[1]> = {}) {
  return new EventBridgePublisher(new EventBridgeClient({ region: 'us-east-1', maxAttempts: 1 }), {
    busName: 'bus',
    source: 'src',
    maxEntries: 10,
    maxRequestBytes: 256 * 1024,
    concurrency: 4,
    ...options,
  });
}

const acceptAll = (input: PutEventsCommandInput) => ({
  FailedEntryCount: 0,
  Entries: (input.Entries ?? []).map((_, i) => ({ EventId: `e${i}` })),
});

describe('EventBridge publisher', () => {
  beforeEach(() => eventBridge.reset());
  afterEach(() => {
    vi.useRealTimers();
  });

  it('counts entry size the way AWS does: UTF-8 bytes plus 14 for Time', () => {
    expect(entrySize({ Source: 'ab', DetailType: 'c', Detail: '{"é":1}' })).toBe(2 + 1 + 8); // '{"é":1}' is 7 characters, 8 bytes
    expect(
      entrySize({ Source: 'ab', DetailType: 'c', Detail: '{}', Time: new Date(), Resources: ['xyz'] }),
    ).toBe(14 + 2 + 1 + 2 + 3);
  });

  it('packs at most 10 entries and the byte limit per call, in order', () => {
    const sized = Array.from({ length: 25 }, (_, i) => ({ eventId: String(i), entry: {}, bytes: 100 }));
    expect(packEntries(sized, 10, 10_000).map((c) => c.length)).toEqual([10, 10, 5]);
    expect(packEntries(sized, 10, 350).map((c) => c.length)).toEqual([3, 3, 3, 3, 3, 3, 3, 3, 1]);
    expect(
      packEntries(sized, 10, 350)
        .flat()
        .map((e) => e.eventId),
    ).toEqual(sized.map((e) => e.eventId));
  });

  it('never sends a call over 10 entries or the request byte limit', async () => {
    eventBridge.on(PutEventsCommand).callsFake(acceptAll);
    // ~60 KB each (2-byte characters): four fit in 256 KB, five do not.
    const events = Array.from({ length: 23 }, (_, i) => event(i, 30_000));
    const outcomes = await publisher().publish(events);
    expect(outcomes.filter((o) => o.ok)).toHaveLength(23);
    for (const call of eventBridge.commandCalls(PutEventsCommand)) {
      const entries = (call.args[0].input as PutEventsCommandInput).Entries ?? [];
      expect(entries.length).toBeLessThanOrEqual(10);
      expect(entries.reduce((n, e) => n + entrySize(e), 0)).toBeLessThanOrEqual(256 * 1024);
    }
    expect(eventBridge.commandCalls(PutEventsCommand).length).toBe(6);
  });

  it('keeps several calls in flight, never more than the concurrency', async () => {
    const time = useFakeTime();
    let inFlight = 0;
    let peak = 0;
    eventBridge.on(PutEventsCommand).callsFake(async (input: PutEventsCommandInput) => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      // Each call takes 5 ms of fake time: long enough for the others to start meanwhile.
      await elapse(5, undefined);
      inFlight--;
      return acceptAll(input);
    });
    const published = publisher({ concurrency: 3 }).publish(Array.from({ length: 100 }, (_, i) => event(i)));
    // Time enough for the ten calls even one at a time; the peak says how many overlapped.
    await time.advance(10 * 5);
    await published;
    expect(peak).toBe(3);
    expect(eventBridge.commandCalls(PutEventsCommand)).toHaveLength(10);
  });

  it('reads every entry result: retryable codes, permanent codes, missing results', async () => {
    eventBridge.on(PutEventsCommand).resolves({
      FailedEntryCount: 3,
      Entries: [
        { EventId: 'ok' },
        { ErrorCode: 'ThrottlingException', ErrorMessage: 'slow' },
        { ErrorCode: 'InvalidArgument', ErrorMessage: 'bad' },
      ],
    });
    const outcomes = await publisher().publish([event(1), event(2), event(3), event(4)]);
    expect(outcomes).toEqual([
      { eventId: event(1).eventId, ok: true, busEventId: 'ok' },
      {
        eventId: event(2).eventId,
        ok: false,
        retryable: true,
        errorCode: 'ThrottlingException',
        errorMessage: 'slow',
      },
      {
        eventId: event(3).eventId,
        ok: false,
        retryable: false,
        errorCode: 'InvalidArgument',
        errorMessage: 'bad',
      },
      expect.objectContaining({
        eventId: event(4).eventId,
        ok: false,
        retryable: true,
        errorCode: 'MissingResult',
      }),
    ]);
  });

  it('reports a failed call on each of its entries as retryable', async () => {
    eventBridge
      .on(PutEventsCommand)
      .rejects(Object.assign(new Error('down'), { name: 'ServiceUnavailable' }));
    const outcomes = await publisher().publish([event(1), event(2)]);
    expect(outcomes).toEqual([
      {
        eventId: event(1).eventId,
        ok: false,
        retryable: true,
        errorCode: 'ServiceUnavailable',
        errorMessage: 'down',
      },
      {
        eventId: event(2).eventId,
        ok: false,
        retryable: true,
        errorCode: 'ServiceUnavailable',
        errorMessage: 'down',
      },
    ]);
  });

  it('honours a raised limit (1 MB accounts) without code changes', async () => {
    eventBridge.on(PutEventsCommand).callsFake(acceptAll);
    const big = event(1, 200_000); // ~400 KB
    expect((await publisher().publish([big]))[0]).toMatchObject({ ok: false, retryable: false });
    expect((await publisher({ maxRequestBytes: 1024 * 1024 }).publish([big]))[0]).toMatchObject({ ok: true });
  });
});
