import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  EventBridgeClient,
  PutEventsCommand,
  type PutEventsRequestEntry,
  type PutEventsResultEntry,
} from '@aws-sdk/client-eventbridge';
import { afterEach, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { FaultInjector, type FaultRates, noFaults } from '../../infra/local/faults';
import { type BusEvent, LocalBus, type LocalBusOptions, type TargetRetry } from '../../infra/local/local-bus';
import { BusDeadLetters, BusRedelivery } from '../../infra/local/local-ops';
import type { OutboundEvent } from '../../shared/events/cloud-event';
import { localLambdaContext, toProxyEvent } from '../../shared/http/proxy-event';
import type { InboxOps } from '../../shared/inbox/inbox-ops';
import { createOpsApi, opsApiResources } from '../../shared/ops/ops-api';
import { EventBridgePublisher, entrySize } from '../../shared/outbox/eventbridge-publisher';
import type { ConsumerName, EventType } from '../../shared/topology';
import { deferred } from '../support/gates';
import { subscriberNames } from '../support/topology-expectations';

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** The consumers that subscribe to `type`, sorted (as `consumersOf` lists deliveries). */
const subscribersOf = (type: EventType): ConsumerName[] => subscriberNames(type).sort();
const approvedTargets = subscribersOf(topology.eventTypes.approved);

/** A tiny retry policy so a failing target is dead within milliseconds. */
const tinyRetry: TargetRetry = { maxAttempts: 3, baseMs: 5, maxMs: 20, maxAgeMs: 60_000 };

interface Delivered {
  readonly consumer: ConsumerName;
  readonly event: BusEvent;
}

const cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'local-bus-test-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Starts a bus on the topology's rules, recording every successful invocation in `delivered`.
 * `invoke` overrides what a target does (throw to fail); the default succeeds.
 */
async function startBus(
  options: Partial<LocalBusOptions> = {},
): Promise<{ bus: LocalBus; client: EventBridgeClient; delivered: Delivered[] }> {
  const delivered: Delivered[] = [];
  const invoke = options.invoke;
  const bus = new LocalBus({
    busName: topology.busName,
    rules: topology.rules,
    retry: () => tinyRetry,
    maxRequestBytes: topology.relay.maxRequestBytes,
    faults: new FaultInjector(noFaults, 1),
    random: () => 0,
    ...options,
    dir: options.dir ?? tempDir(),
    invoke: async (consumer, event) => {
      const result = invoke ? await invoke(consumer, event) : undefined;
      delivered.push({ consumer, event });
      return result;
    },
  });
  await bus.start();
  const client = new EventBridgeClient({
    endpoint: bus.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 1,
  });
  cleanups.push(async () => {
    client.destroy();
    await bus.stop(50);
  });
  return { bus, client, delivered };
}

function entry(overrides: Partial<PutEventsRequestEntry> = {}): PutEventsRequestEntry {
  return {
    EventBusName: topology.busName,
    Source: topology.source,
    DetailType: topology.eventTypes.approved,
    Detail: JSON.stringify({ taskId: 't-1', version: 2 }),
    Time: new Date('2026-11-30T10:20:30Z'),
    ...overrides,
  };
}

async function put(client: EventBridgeClient, entries: PutEventsRequestEntry[]) {
  return client.send(new PutEventsCommand({ Entries: entries }));
}

const eventIdOf = (result: PutEventsResultEntry | undefined): string => {
  if (!result?.EventId) throw new Error(`entry failed: ${JSON.stringify(result)}`);
  return result.EventId;
};

/** Waits until the bus has no delivery in flight or waiting for a retry. */
function settle(bus: LocalBus): Promise<void> {
  return bus.idle();
}

const consumersOf = (delivered: readonly Delivered[], eventId?: string) =>
  delivered
    .filter((d) => eventId === undefined || d.event.id === eventId)
    .map((d) => d.consumer)
    .sort();

describe('LocalBus PutEvents through the AWS SDK', () => {
  it('answers an accepted entry with an EventId and delivers the EventBridge event shape to each target', async () => {
    const { bus, client, delivered } = await startBus();
    const detail = { taskId: 't-1', version: 2, nested: { list: [1, 'two', null] } };

    const res = await put(client, [
      entry({ Detail: JSON.stringify(detail), Time: new Date('2026-11-30T10:20:30.789Z') }),
    ]);
    await settle(bus);

    expect(res.FailedEntryCount).toBe(0);
    const id = eventIdOf(res.Entries?.[0]);
    expect(id).toMatch(uuid);
    expect(consumersOf(delivered)).toEqual(approvedTargets);
    for (const d of delivered) {
      expect(d.event).toEqual({
        version: '0',
        id,
        'detail-type': topology.eventTypes.approved,
        source: topology.source,
        account: expect.stringMatching(/^\d{12}$/),
        time: '2026-11-30T10:20:30Z',
        region: 'us-east-1',
        resources: [],
        detail,
      });
    }
  });

  it('stamps the call time, in whole seconds with Z, on an entry without Time', async () => {
    const { bus, client, delivered } = await startBus();
    const before = Math.floor(Date.now() / 1000) * 1000;

    await put(client, [entry({ Time: undefined })]);
    await settle(bus);

    const time = delivered[0]?.event.time ?? '';
    expect(time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(Date.parse(time)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(time)).toBeLessThanOrEqual(Date.now());
  });

  it('gives each entry of a batch its own EventId, in request order', async () => {
    const { bus, client, delivered } = await startBus();

    const res = await put(client, [
      entry({ Detail: '{"n":1}' }),
      entry({ Detail: '{"n":2}', DetailType: topology.eventTypes.withdrawn }),
    ]);
    await settle(bus);

    const [first, second] = [eventIdOf(res.Entries?.[0]), eventIdOf(res.Entries?.[1])];
    expect(first).not.toBe(second);
    expect(delivered.find((d) => d.event.id === first)?.event.detail).toEqual({ n: 1 });
    expect(delivered.find((d) => d.event.id === second)?.event.detail).toEqual({ n: 2 });
  });

  it('fans the relay publisher content.approved and content.withdrawn out to the consumers that subscribe to each', async () => {
    const { bus, client, delivered } = await startBus();
    const publisher = new EventBridgePublisher(client, {
      busName: topology.busName,
      source: topology.source,
      maxEntries: topology.relay.putEventsMaxEntries,
      maxRequestBytes: topology.relay.maxRequestBytes,
      concurrency: 1,
    });
    const row = (n: number, eventType: EventType): OutboundEvent => ({
      eventId: `00000000-0000-4000-8000-00000000000${n}`,
      eventType,
      aggregateId: '11111111-1111-4111-8111-111111111111',
      aggregateVersion: n,
      payload: { n },
      createdAt: new Date('2026-11-30T00:00:00Z'),
    });

    const outcomes = await publisher.publish([
      row(1, topology.eventTypes.approved),
      row(2, topology.eventTypes.withdrawn),
    ]);
    await settle(bus);

    const busId = (eventId: string) => {
      const outcome = outcomes.find((o) => o.eventId === eventId);
      if (!outcome?.ok) throw new Error(`not published: ${JSON.stringify(outcome)}`);
      return outcome.busEventId;
    };
    expect(consumersOf(delivered, busId(row(1, topology.eventTypes.approved).eventId))).toEqual(
      approvedTargets,
    );
    expect(consumersOf(delivered, busId(row(2, topology.eventTypes.withdrawn).eventId))).toEqual(
      subscribersOf(topology.eventTypes.withdrawn),
    );
    expect(delivered).toHaveLength(
      approvedTargets.length + subscribersOf(topology.eventTypes.withdrawn).length,
    );
  });

  it('answers invalid entries per entry like AWS and delivers only the valid one', async () => {
    const { bus, client, delivered } = await startBus();

    const res = await put(client, [
      entry({ Source: undefined }),
      entry({ DetailType: undefined }),
      entry({ Detail: undefined }),
      entry({ Detail: '"a string"' }),
      entry({ Detail: '[1,2]' }),
      entry({ Detail: '{not json' }),
      entry({ Detail: JSON.stringify(JSON.stringify({ a: 1 })) }),
      entry({ Detail: 'null' }),
      entry(),
    ]);
    await settle(bus);

    expect(res.FailedEntryCount).toBe(8);
    const results = res.Entries ?? [];
    expect(results).toHaveLength(9);
    expect(results[0]).toEqual({
      ErrorCode: 'InvalidArgument',
      ErrorMessage: 'Parameter Source is not valid. Reason: Source is a required argument.',
    });
    expect(results[1]).toMatchObject({
      ErrorCode: 'InvalidArgument',
      ErrorMessage: expect.stringMatching(/DetailType/),
    });
    expect(results[2]).toMatchObject({
      ErrorCode: 'InvalidArgument',
      ErrorMessage: expect.stringMatching(/Detail /),
    });
    for (const malformed of results.slice(3, 8)) {
      expect(malformed).toEqual({ ErrorCode: 'MalformedDetail', ErrorMessage: 'Detail is malformed.' });
    }
    const id = eventIdOf(results[8]);
    expect(delivered.every((d) => d.event.id === id)).toBe(true);
    expect(consumersOf(delivered)).toEqual(approvedTargets);
    expect(bus.counters).toMatchObject({ accepted: 1, rejected: 8 });
  });

  it('accepts 10 entries but answers 11 with a ValidationException the SDK throws, delivering none of them', async () => {
    const { bus, client, delivered } = await startBus();

    const ten = await put(
      client,
      Array.from({ length: 10 }, () => entry({ DetailType: topology.eventTypes.withdrawn })),
    );
    await settle(bus);
    expect(ten.FailedEntryCount).toBe(0);
    expect(delivered).toHaveLength(10);

    await expect(
      put(
        client,
        Array.from({ length: 11 }, () => entry()),
      ),
    ).rejects.toMatchObject({
      name: 'ValidationException',
      message: expect.stringMatching(/less than or equal to 10/),
      $metadata: { httpStatusCode: 400 },
    });
    await settle(bus);
    expect(delivered).toHaveLength(10);
  });

  it('rejects a request whose entries together exceed the size limit, counting bytes the way AWS does', async () => {
    const limit = 1_000;
    const { bus, client, delivered } = await startBus({ maxRequestBytes: limit });
    const sized = (bytes: number) => {
      const base = entry({ Detail: '{"p":""}' });
      return entry({ Detail: JSON.stringify({ p: 'é'.repeat((bytes - entrySize(base)) / 2) }) });
    };
    expect(entrySize(sized(1_000))).toBe(1_000);
    expect(entrySize(sized(600))).toBe(600);

    const atLimit = await put(client, [sized(1_000)]);
    await expect(put(client, [sized(600), sized(600)])).rejects.toMatchObject({
      name: 'ValidationException',
      message: 'Total size of the entries in the request is over the limit.',
      $metadata: { httpStatusCode: 400 },
    });
    await expect(put(client, [sized(1_002)])).rejects.toMatchObject({ name: 'ValidationException' });
    await settle(bus);

    expect(atLimit.FailedEntryCount).toBe(0);
    expect(new Set(delivered.map((d) => d.event.id))).toEqual(new Set([eventIdOf(atLimit.Entries?.[0])]));
  });

  it('accepts an entry for another bus with an EventId and drops it, while its own bus by name or ARN delivers', async () => {
    const { bus, client, delivered } = await startBus();

    const res = await put(client, [
      entry({ EventBusName: 'some-other-bus' }),
      entry({ EventBusName: undefined }),
      entry({ EventBusName: `arn:aws:events:us-east-1:000000000000:event-bus/${topology.busName}` }),
    ]);
    await settle(bus);

    expect(res.FailedEntryCount).toBe(0);
    const [other, defaultBus, ours] = (res.Entries ?? []).map(eventIdOf);
    expect(other).toMatch(uuid);
    expect(defaultBus).toMatch(uuid);
    expect(consumersOf(delivered, ours)).toEqual(approvedTargets);
    expect(delivered).toHaveLength(approvedTargets.length);
  });
});

describe('LocalBus delivery', () => {
  it('retries a failing target, then dead-letters it after maxAttempts with the error, leaving the others delivered', async () => {
    const attempts: ConsumerName[] = [];
    const { bus, client, delivered } = await startBus({
      invoke: async (consumer) => {
        attempts.push(consumer);
        if (consumer === 'notify') throw new TypeError('notify is down');
      },
    });

    const id = eventIdOf((await put(client, [entry()])).Entries?.[0]);
    await settle(bus);

    expect(attempts.filter((c) => c === 'notify')).toHaveLength(tinyRetry.maxAttempts);
    expect(consumersOf(delivered)).toEqual(approvedTargets.filter((c) => c !== 'notify'));
    expect(bus.deadLetters()).toEqual([
      expect.objectContaining({
        id,
        consumer: 'notify',
        rule: 'content-approved',
        attempts: tinyRetry.maxAttempts,
        error: 'TypeError: notify is down',
        event: expect.objectContaining({ id, source: topology.source }),
      }),
    ]);
    expect(bus.counters).toMatchObject({
      delivered: approvedTargets.length - 1,
      retried: tinyRetry.maxAttempts - 1,
      deadLettered: 1,
    });
  });

  it('dead-letters a target once the event is older than maxAgeMs, before maxAttempts', async () => {
    let calls = 0;
    const { bus, client } = await startBus({
      retry: () => ({ ...tinyRetry, maxAttempts: 100, maxAgeMs: 0 }),
      invoke: async (consumer) => {
        if (consumer === 'index') {
          calls++;
          throw new Error('index is down');
        }
      },
    });

    await put(client, [entry({ DetailType: topology.eventTypes.withdrawn })]);
    await settle(bus);

    expect(calls).toBe(1);
    expect(bus.deadLetters().map((d) => [d.consumer, d.attempts])).toEqual([['index', 1]]);
  });

  it('drops a dead letter once its queue’s retention has passed on the bus’s clock, as SQS does, and keeps it before', async () => {
    let now = Date.parse('2026-11-30T12:00:00Z');
    const retentionMs = 14 * 24 * 3600_000;
    const { bus, client } = await startBus({
      clock: () => now,
      deadLetterRetentionMs: () => retentionMs,
      invoke: async (consumer) => {
        if (consumer === 'notify') throw new Error('notify is down');
      },
    });
    await put(client, [entry()]);
    await settle(bus);
    expect(bus.deadLetters().map((d) => [d.consumer, d.deadAt])).toEqual([
      ['notify', new Date(now).toISOString()],
    ]);

    now += retentionMs - 1;
    expect(bus.deadLetters()).toHaveLength(1);
    now += 1;
    expect(bus.deadLetters()).toEqual([]);
  });

  it('routes nothing by a disabled rule until it is enabled, and by a rule changed by hand as changed', async () => {
    const { bus, client, delivered } = await startBus();
    expect(bus.disableRule('content-approved')).toBe(true);
    expect(bus.disableRule('no-such-rule')).toBe(false);
    const unrouted = eventIdOf((await put(client, [entry()])).Entries?.[0]);
    await settle(bus);
    expect(consumersOf(delivered, unrouted)).toEqual([]);

    bus.enableRule('content-approved');
    const routed = eventIdOf((await put(client, [entry()])).Entries?.[0]);
    // A rule edited to one target, and withdrawals routed nowhere by a pattern that no longer matches.
    bus.putRule({ ...(topology.rules[0] as (typeof topology.rules)[number]), targets: ['notify'] });
    bus.putRule({
      ...(topology.rules[1] as (typeof topology.rules)[number]),
      pattern: { source: [topology.source], 'detail-type': ['content.gone'] },
    });
    const edited = eventIdOf((await put(client, [entry()])).Entries?.[0]);
    await put(client, [entry({ DetailType: topology.eventTypes.withdrawn })]);
    await settle(bus);
    expect(consumersOf(delivered, routed)).toEqual(approvedTargets);
    expect(consumersOf(delivered, edited)).toEqual(['notify']);
    expect(delivered).toHaveLength(approvedTargets.length + 1);
    // A pattern EventBridge would refuse is refused, and changes nothing.
    expect(() =>
      bus.putRule({ ...(topology.rules[0] as (typeof topology.rules)[number]), pattern: { source: 'x' } }),
    ).toThrow(/Event pattern is not valid/);
  });

  it('redrive puts a dead letter back for its consumer and delivers it', async () => {
    let notifyDown = true;
    const { bus, client, delivered } = await startBus({
      invoke: async (consumer) => {
        if (consumer === 'notify' && notifyDown) throw new Error('notify is down');
      },
    });
    const id = eventIdOf((await put(client, [entry()])).Entries?.[0]);
    await settle(bus);
    expect(bus.deadLetters()).toHaveLength(1);

    notifyDown = false;
    expect(await bus.redrive(id, 'index')).toBe(false);
    expect(await bus.redrive('no-such-event', 'notify')).toBe(false);
    expect(await bus.redrive(id, 'notify')).toBe(true);
    await settle(bus);

    expect(bus.deadLetters()).toEqual([]);
    expect(consumersOf(delivered, id)).toEqual(approvedTargets);
    expect(delivered.find((d) => d.consumer === 'notify')?.event.id).toBe(id);
    expect(await bus.redrive(id, 'notify')).toBe(false);
  });

  it('a redrive of every dead letter through the ops API redrives each once, also those that die again meanwhile', async () => {
    // notify gives up on its first failure, and fails each event 20 times before it works: every
    // letter a redrive puts back dies again at once, a new letter of the same event.
    const failures = new Map<string, number>();
    const { bus, client } = await startBus({
      retry: (consumer) => (consumer === 'notify' ? { ...tinyRetry, maxAttempts: 1 } : tinyRetry),
      invoke: async (consumer, event) => {
        if (consumer !== 'notify') return;
        const n = (failures.get(event.id) ?? 0) + 1;
        failures.set(event.id, n);
        if (n <= 20) throw new Error(`notify failed (${n})`);
      },
    });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(eventIdOf((await put(client, [entry()])).Entries?.[0]));
    await settle(bus);
    expect(bus.deadLetters()).toHaveLength(5);
    const unused = () => {
      throw new Error('not used by a dead-letter redrive');
    };
    const api = createOpsApi({
      topology,
      db: { query: unused, transaction: unused, close: async () => {} },
      inbox: {} as InboxOps,
      inboxStore: { markDead: unused },
      deadLetters: new BusDeadLetters(bus),
      redelivery: new BusRedelivery(bus),
      health: { alarms: async () => ({}), relay: async () => ({ lastRunAt: null, errors: 0 }) },
      nudger: { nudge: async () => {} },
      logger: { error: () => {}, warn: () => {} },
    });

    const result = await api(
      toProxyEvent(
        {
          method: 'POST',
          url: '/ops/dead-letters/redrive',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ all: true }),
        },
        opsApiResources,
      ),
      localLambdaContext('ops-api-test', 15_000),
    );
    await settle(bus);

    expect(JSON.parse(result.body)).toEqual({ redriven: 5, complete: true });
    // Each event failed once on its way in and once more after its one redrive.
    expect(ids.map((id) => failures.get(id))).toEqual([2, 2, 2, 2, 2]);
    expect(bus.deadLetters()).toHaveLength(5);
  });

  it('redeliver sends a stored event to one consumer again', async () => {
    const { bus, client, delivered } = await startBus();
    const id = eventIdOf((await put(client, [entry()])).Entries?.[0]);
    await settle(bus);
    const event = delivered.find((d) => d.consumer === 'archive')?.event;
    if (!event) throw new Error('archive got nothing');

    await bus.redeliver('archive', event);
    await settle(bus);

    expect(consumersOf(delivered, id)).toEqual([...approvedTargets, 'archive'].sort());
  });

  it('keeps at most `concurrency` invocations in flight per consumer', async () => {
    let inFlight = 0;
    let peak = 0;
    // Each index invocation runs until the test lets it end.
    const running: ReturnType<typeof deferred<() => void>>[] = Array.from({ length: 5 }, () => deferred());
    let started = 0;
    const { bus, client, delivered } = await startBus({
      concurrency: 1,
      invoke: async (consumer) => {
        if (consumer !== 'index') return;
        inFlight++;
        peak = Math.max(peak, inFlight);
        const end = deferred();
        running[started++]?.resolve(end.resolve);
        await end.promise;
        inFlight--;
      },
    });

    // Every delivery is scheduled before PutEvents answers: one over the limit would start now.
    await put(
      client,
      Array.from({ length: 5 }, () => entry({ DetailType: topology.eventTypes.withdrawn })),
    );
    for (const invocation of running) {
      const end = await invocation.promise;
      expect(inFlight).toBe(1);
      end();
    }
    await settle(bus);

    expect(delivered).toHaveLength(5);
    expect(peak).toBe(1);
  });
});

describe('LocalBus journal', () => {
  /**
   * Puts one content.approved event with notify blocked, waits until index and archive are
   * done and notify is in flight, then stops the bus: notify is left pending in the journal.
   */
  async function stopWithNotifyPending(dir: string) {
    const notify = deferred();
    cleanups.push(() => notify.resolve());
    const subscribers = subscriberNames(topology.eventTypes.approved);
    const started = new Map(subscribers.map((c) => [c, deferred()]));
    const { bus, client, delivered } = await startBus({
      dir,
      invoke: async (consumer) => {
        started.get(consumer)?.resolve();
        if (consumer === 'notify') await notify.promise;
      },
    });
    const id = eventIdOf((await put(client, [entry()])).Entries?.[0]);
    await Promise.all([...started.values()].map((s) => s.promise));
    // The others returned at once: once the microtasks after them have run, their deliveries
    // are recorded and their `done` lines queued for the journal.
    await new Promise((resolve) => setImmediate(resolve));
    expect(consumersOf(delivered)).toEqual(subscribers.filter((c) => c !== 'notify').sort());
    await bus.stop(20);
    return id;
  }

  it('re-delivers after a restart what was pending at stop, and not what was done', async () => {
    const dir = tempDir();
    const id = await stopWithNotifyPending(dir);

    const { bus, delivered } = await startBus({ dir });
    await settle(bus);

    expect(delivered.map((d) => [d.consumer, d.event.id])).toEqual([['notify', id]]);
    expect(delivered[0]?.event).toMatchObject({ id, source: topology.source, time: '2026-11-30T10:20:30Z' });
  });

  it('does not re-deliver again once the re-delivery is done', async () => {
    const dir = tempDir();
    await stopWithNotifyPending(dir);
    const second = await startBus({ dir });
    await settle(second.bus);
    await second.bus.stop(50);

    const third = await startBus({ dir });
    await settle(third.bus);

    expect(second.delivered).toHaveLength(1);
    expect(third.delivered).toEqual([]);
  });

  it('ignores a torn last journal line from a crash mid-append', async () => {
    const dir = tempDir();
    const id = await stopWithNotifyPending(dir);
    // Half of the line that would have marked notify done: it never completed, so it must not count.
    appendFileSync(join(dir, 'journal.jsonl'), `{"t":"done","id":"${id}","consumer":"notify","rul`);

    const { bus, delivered } = await startBus({ dir });
    await settle(bus);

    expect(delivered.map((d) => [d.consumer, d.event.id])).toEqual([['notify', id]]);
    // Recovery rewrote the journal, so later appends do not land glued to the torn fragment.
    const lines = readFileSync(join(dir, 'journal.jsonl'), 'utf8').split('\n').filter(Boolean);
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
  });

  it('drops a torn dead-letter line at start, so the next letter is not glued to it and lost', async () => {
    const dir = tempDir();
    const letter = {
      id: 'e-1',
      consumer: 'notify',
      rule: 'content-approved',
      attempts: 3,
      error: 'Error: x',
      deadAt: '2026-11-30T00:00:00.000Z',
      event: {
        version: '0',
        id: 'e-1',
        'detail-type': 'content.approved',
        source: topology.source,
        account: '0',
        time: '2026-11-30T00:00:00Z',
        region: 'us-east-1',
        resources: [],
        detail: {},
      },
    };
    writeFileSync(join(dir, 'dead-letters.jsonl'), `${JSON.stringify(letter)}\n{"id":"e-2","consu`);

    const { bus } = await startBus({ dir });

    expect(bus.deadLetters().map((d) => d.id)).toEqual(['e-1']);
    const text = readFileSync(join(dir, 'dead-letters.jsonl'), 'utf8');
    expect(text.endsWith('\n')).toBe(true);
    for (const line of text.split('\n').filter(Boolean)) expect(() => JSON.parse(line)).not.toThrow();
  });

  it('keeps dead letters across a restart, and the new bus can redrive them', async () => {
    const dir = tempDir();
    const first = await startBus({
      dir,
      invoke: async (consumer) => {
        if (consumer === 'notify') throw new Error('notify is down');
      },
    });
    const id = eventIdOf((await put(first.client, [entry()])).Entries?.[0]);
    await settle(first.bus);
    await first.bus.stop(50);

    const second = await startBus({ dir });
    await settle(second.bus);
    expect(second.delivered).toEqual([]);
    expect(second.bus.deadLetters().map((d) => [d.id, d.consumer])).toEqual([[id, 'notify']]);

    expect(await second.bus.redrive(id, 'notify')).toBe(true);
    await settle(second.bus);
    expect(second.delivered.map((d) => [d.consumer, d.event.id])).toEqual([['notify', id]]);
    await second.bus.stop(50);

    const third = await startBus({ dir });
    await settle(third.bus);
    expect(third.bus.deadLetters()).toEqual([]);
    expect(third.delivered).toEqual([]);
  });
});

describe('LocalBus fault injection', () => {
  const faults = (rates: Partial<FaultRates>) => new FaultInjector({ ...noFaults, ...rates }, 7);

  it('busReject answers InternalFailure and delivers nothing', async () => {
    const { bus, client, delivered } = await startBus({ faults: faults({ busReject: 1 }) });

    const res = await put(client, [entry()]);
    await settle(bus);

    expect(res.FailedEntryCount).toBe(1);
    expect(res.Entries?.[0]).toMatchObject({ ErrorCode: 'InternalFailure' });
    expect(res.Entries?.[0]?.EventId).toBeUndefined();
    expect(delivered).toEqual([]);
  });

  it('busAckLoss answers InternalFailure but delivers the event to every target', async () => {
    const { bus, client, delivered } = await startBus({ faults: faults({ busAckLoss: 1 }) });

    const res = await put(client, [entry()]);
    await settle(bus);

    expect(res.FailedEntryCount).toBe(1);
    expect(res.Entries?.[0]).toMatchObject({ ErrorCode: 'InternalFailure' });
    expect(consumersOf(delivered)).toEqual(approvedTargets);
  });

  it('busDuplicate delivers the same event twice to each target', async () => {
    const { bus, client, delivered } = await startBus({ faults: faults({ busDuplicate: 1 }) });

    const res = await put(client, [entry()]);
    await settle(bus);

    expect(res.FailedEntryCount).toBe(0);
    const id = eventIdOf(res.Entries?.[0]);
    expect(consumersOf(delivered, id)).toEqual(approvedTargets.flatMap((c) => [c, c]));
    expect(delivered).toHaveLength(2 * approvedTargets.length);
  });
});
