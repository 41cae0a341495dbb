import { beforeEach, describe, expect, it } from 'vitest';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { InboxBackoffError, InboxFencedOutError, InboxInProgressError } from '../../shared/inbox/errors';
import { TransientError } from '../../shared/inbox/failure-kind';
import type { InboxStore } from '../../shared/inbox/inbox-store';
import { payloadHash } from '../../shared/inbox/payload-hash';
import { type InboxEvent, poisonKey, processOnce, type WorkContext } from '../../shared/inbox/process-once';
import type { InboxSettings } from '../../shared/inbox/settings';
import { describeEachEngine, dynamoClient } from '../support/dynamo';
import {
  approvedRow,
  busEvent,
  deferred,
  inboxEvent,
  TestClock,
  testInboxSettings,
} from '../support/dynamo-consumer-fixtures';

describeEachEngine('processOnce state machine', (fixture) => {
  let inbox: DynamoInboxStore;
  let inboxOps: DynamoInboxOps;
  let clock: TestClock;
  let settings: InboxSettings;
  /** The side effect the work performs: how many times it ran, per event id. */
  let runs: Map<string, number>;

  beforeEach(() => {
    inbox = new DynamoInboxStore(fixture().client, fixture().inbox);
    inboxOps = new DynamoInboxOps(fixture().client, fixture().inbox);
    clock = new TestClock();
    settings = testInboxSettings();
    runs = new Map();
  });

  const deps = (owner: string, overrides: Partial<Parameters<typeof processOnce>[2]> = {}) => ({
    inbox,
    settings,
    clock: clock.read,
    owner,
    random: () => 0.999,
    ...overrides,
  });

  const effect = (event: InboxEvent) => async (_ctx: WorkContext) => {
    runs.set(event.eventId, (runs.get(event.eventId) ?? 0) + 1);
    return 'done';
  };

  it('a duplicate delivery is acknowledged without running the work again', async () => {
    const event = inboxEvent('index');
    const first = await processOnce(event, effect(event), deps('a'));
    const second = await processOnce(event, effect(event), deps('b'));
    expect(first).toMatchObject({ kind: 'processed', attempt: 1, takenOver: false, result: 'done' });
    expect(second).toEqual({ kind: 'duplicate', status: 'PROCESSED' });
    expect(runs.get(event.eventId)).toBe(1);
    expect(await inboxOps.get(event)).toMatchObject({ status: 'PROCESSED', leaseOwner: 'a' });
  });

  it('costs two writes for a first delivery and one call for a duplicate (two on dynalite)', async () => {
    const calls: string[] = [];
    const client = dynamoClient(fixture().endpoint);
    client.middlewareStack.add(
      (next) => async (args) => {
        const target = (args.request as { headers?: Record<string, string> }).headers?.['x-amz-target'];
        calls.push(String(target).replace('DynamoDB_20120810.', ''));
        return next(args);
      },
      { step: 'build', name: 'callRecorder' },
    );
    const counted = new DynamoInboxStore(client, fixture().inbox);
    const event = inboxEvent('index');
    await processOnce(event, effect(event), deps('a', { inbox: counted }));
    expect(calls).toEqual(['UpdateItem', 'UpdateItem']);
    calls.length = 0;
    await processOnce(event, effect(event), deps('b', { inbox: counted }));
    // The refused begin returns the record (ReturnValuesOnConditionCheckFailure) on AWS and
    // DynamoDB Local; dynalite ignores that parameter, so the store reads the record back.
    expect(calls).toEqual(fixture().engine === 'dynalite' ? ['UpdateItem', 'GetItem'] : ['UpdateItem']);
    client.destroy();
  });

  it('a re-publish of the same outbox row (new EventBridge id, same CloudEvent) is a duplicate', async () => {
    const row = approvedRow();
    const first = inboxEvent('index', row);
    const republished = inboxEvent('index', row);
    expect((republished.event as { id: string }).id).not.toBe((first.event as { id: string }).id);
    await processOnce(first, effect(first), deps('a'));
    expect(await processOnce(republished, effect(republished), deps('b'))).toMatchObject({
      kind: 'duplicate',
    });
    expect(runs.get(row.eventId)).toBe(1);
  });

  it('of two concurrent deliveries one runs and the other gets InboxInProgressError', async () => {
    const event = inboxEvent('index');
    const gate = deferred();
    const started = deferred();
    const running = processOnce(
      event,
      async (ctx) => {
        started.resolve();
        await gate.promise;
        return effect(event)(ctx);
      },
      deps('a'),
    );
    // The work starts only once the first delivery's begin has landed: the second arrives then.
    await started.promise;
    const concurrent = await processOnce(event, effect(event), deps('b')).catch((e: unknown) => e);
    expect(concurrent).toBeInstanceOf(InboxInProgressError);
    expect((concurrent as InboxInProgressError).retryAfterMs).toBeGreaterThan(0);
    gate.resolve();
    expect(await running).toMatchObject({ kind: 'processed' });
    expect(runs.get(event.eventId)).toBe(1);
  });

  it('a crash after the effect but before completion is retried once the lease runs out', async () => {
    const event = inboxEvent('index');
    // The process dies between the effect and the completion write: complete never lands.
    const crashing: InboxStore = Object.assign(Object.create(inbox) as InboxStore, {
      complete: async () => {
        throw new Error('process died');
      },
    });
    await expect(processOnce(event, effect(event), deps('a', { inbox: crashing }))).rejects.toThrow(
      'process died',
    );
    expect(await inboxOps.get(event)).toMatchObject({ status: 'PROCESSING', leaseOwner: 'a' });

    // Redelivered while the dead attempt's lease still runs: not yet.
    await expect(processOnce(event, effect(event), deps('b'))).rejects.toBeInstanceOf(InboxInProgressError);
    clock.advance(settings.leaseMs + 1);
    const retried = await processOnce(event, effect(event), deps('c'));
    expect(retried).toMatchObject({ kind: 'processed', attempt: 2, takenOver: true });
    // The inbox does not hide a crash: the work ran twice, which is why effects are idempotent too.
    expect(runs.get(event.eventId)).toBe(2);
    expect(await inboxOps.get(event)).toMatchObject({ status: 'PROCESSED', attempts: 2, leaseOwner: 'c' });
  });

  it('an attempt whose lease was taken over cannot complete the record', async () => {
    const event = inboxEvent('index');
    const gate = deferred();
    const started = deferred();
    const stale = processOnce(
      event,
      async () => {
        started.resolve();
        await gate.promise;
        return 'late';
      },
      deps('a'),
    );
    await started.promise;
    clock.advance(settings.leaseMs + 1);
    expect(await processOnce(event, effect(event), deps('b'))).toMatchObject({
      kind: 'processed',
      takenOver: true,
    });
    gate.resolve();
    const err = await stale.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InboxFencedOutError);
    expect(await inboxOps.get(event)).toMatchObject({ status: 'PROCESSED', leaseOwner: 'b' });
  });

  it('a failed attempt is recorded FAILED with backoff and rethrown; no retry before the backoff', async () => {
    const event = inboxEvent('index');
    const failing = async () => {
      throw new Error('index unavailable');
    };
    await expect(processOnce(event, failing, deps('a'))).rejects.toThrow('index unavailable');
    const failed = await inboxOps.get(event);
    // random 0.999 of a 1 s base for attempt 1.
    expect(failed).toMatchObject({ status: 'FAILED', attempts: 1, lastError: 'Error: index unavailable' });
    expect(failed?.nextAttemptAt).toBe(clock.now + 999);

    const early = await processOnce(event, effect(event), deps('b')).catch((e: unknown) => e);
    expect(early).toBeInstanceOf(InboxBackoffError);
    expect(runs.get(event.eventId)).toBeUndefined();

    clock.advance(999);
    expect(await processOnce(event, effect(event), deps('c'))).toMatchObject({
      kind: 'processed',
      attempt: 2,
    });
    expect(runs.get(event.eventId)).toBe(1);
  });

  it('backoff doubles per attempt up to its cap', async () => {
    const event = inboxEvent('index');
    settings = testInboxSettings({ backoff: { baseMs: 1_000, maxMs: 2_500 } });
    const delays: number[] = [];
    for (let i = 0; i < 4; i++) {
      await processOnce(
        event,
        async () => {
          throw new TransientError('down');
        },
        deps(`o${i}`, { random: () => 1 }),
      ).catch(() => undefined);
      const record = await inboxOps.get(event);
      delays.push((record?.nextAttemptAt ?? 0) - clock.now);
      clock.advance(10_000);
    }
    expect(delays).toEqual([1_000, 2_000, 2_500, 2_500]);
  });

  it('a transient failure 20 times in a row still ends PROCESSED, never DEAD', async () => {
    const event = inboxEvent('index');
    settings = testInboxSettings({ maxEventAgeMs: 24 * 3600_000 });
    let failures = 0;
    const flaky = async () => {
      if (failures < 20) {
        failures++;
        throw Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
      }
      runs.set(event.eventId, (runs.get(event.eventId) ?? 0) + 1);
      return 'done';
    };
    for (let i = 1; i <= 20; i++) {
      await expect(processOnce(event, flaky, deps(`o${i}`))).rejects.toThrow('Rate exceeded');
      const failed = await inboxOps.get(event);
      expect(failed).toMatchObject({
        status: 'FAILED',
        attempts: i,
        lastFailure: 'transient',
        permanentFailures: 0,
      });
      clock.now = failed?.nextAttemptAt ?? clock.now;
    }
    expect(await processOnce(event, flaky, deps('last'))).toMatchObject({ kind: 'processed', attempt: 21 });
    expect(runs.get(event.eventId)).toBe(1);
    expect(await inboxOps.get(event)).toMatchObject({ status: 'PROCESSED', attempts: 21 });
  });

  it('a transient failure once the first attempt is the maximum event age old makes the record DEAD', async () => {
    const event = inboxEvent('index');
    const down = async () => {
      throw Object.assign(new Error('Service Unavailable'), { $metadata: { httpStatusCode: 503 } });
    };
    await expect(processOnce(event, down, deps('a'))).rejects.toThrow('Service Unavailable');
    clock.advance(settings.maxEventAgeMs - 1);
    await expect(processOnce(event, down, deps('b'))).rejects.toThrow('Service Unavailable');
    clock.advance(settings.backoff.maxMs);
    const outcome = await processOnce(event, down, deps('c'));
    expect(outcome).toMatchObject({ kind: 'dead', attempt: 3 });
    expect(outcome.kind === 'dead' && outcome.reason).toMatch(
      /^failing transiently for 6\d s since the first attempt \(max event age 60 s\)/,
    );
    expect(await inboxOps.get(event)).toMatchObject({ status: 'DEAD', attempts: 3 });
  });

  it('a permanent failure spends the small budget, whatever transient failures came before', async () => {
    const event = inboxEvent('index');
    let attempt = 0;
    const failing = async () => {
      attempt++;
      if (attempt <= 5) throw new TransientError(`blip ${attempt}`);
      throw Object.assign(new Error(`invalid item ${attempt}`), {
        name: 'ValidationException',
        $metadata: { httpStatusCode: 400 },
      });
    };
    for (let i = 1; i < 5 + settings.maxPermanentAttempts; i++) {
      await expect(processOnce(event, failing, deps(`o${i}`))).rejects.toThrow();
      clock.advance(settings.backoff.maxMs);
    }
    expect(await inboxOps.get(event)).toMatchObject({
      status: 'FAILED',
      permanentFailures: 2,
      lastFailure: 'permanent',
    });
    const outcome = await processOnce(event, failing, deps('last'));
    expect(outcome).toEqual({
      kind: 'dead',
      attempt: 8,
      reason: 'permanent failure 3 of at most 3; last error ValidationException: invalid item 8',
    });
  });

  it('the last allowed permanent failure makes the record DEAD, acknowledged, and it stays dead', async () => {
    const event = inboxEvent('index');
    let calls = 0;
    const failing = async () => {
      calls++;
      throw new Error(`failure ${calls}`);
    };
    await expect(processOnce(event, failing, deps('a'))).rejects.toThrow('failure 1');
    clock.advance(10_000);
    await expect(processOnce(event, failing, deps('b'))).rejects.toThrow('failure 2');
    clock.advance(10_000);
    const third = await processOnce(event, failing, deps('c'));
    expect(third).toEqual({
      kind: 'dead',
      attempt: 3,
      reason: 'permanent failure 3 of at most 3; last error Error: failure 3',
    });
    clock.advance(10_000);
    expect(await processOnce(event, failing, deps('d'))).toEqual({ kind: 'duplicate', status: 'DEAD' });
    expect(calls).toBe(3);
    expect(await inboxOps.get(event)).toMatchObject({
      status: 'DEAD',
      attempts: 3,
      lastError: third.kind === 'dead' ? third.reason : '',
    });
  });

  it('attempts that keep crashing are retried until the maximum event age, then DEAD without running again', async () => {
    const event = inboxEvent('index');
    const crashing: InboxStore = Object.assign(Object.create(inbox) as InboxStore, {
      complete: async () => {
        throw new Error('killed');
      },
    });
    const firstAttemptAt = clock.now;
    let crashes = 0;
    while (clock.now - firstAttemptAt < settings.maxEventAgeMs) {
      await processOnce(event, effect(event), deps(`o${crashes}`, { inbox: crashing })).catch(
        () => undefined,
      );
      crashes++;
      clock.advance(settings.leaseMs + 1);
    }
    // More than a permanent budget's worth: a crash is no proof the event is bad.
    expect(crashes).toBeGreaterThan(settings.maxPermanentAttempts);
    expect(runs.get(event.eventId)).toBe(crashes);
    const outcome = await processOnce(event, effect(event), deps('last'));
    expect(outcome).toMatchObject({ kind: 'dead', attempt: crashes });
    expect(outcome.kind === 'dead' && outcome.reason).toContain('kept losing their lease');
    expect(runs.get(event.eventId)).toBe(crashes);
  });

  it('a different payload under a known id is poison: recorded DEAD apart, the original untouched', async () => {
    const row = approvedRow();
    const original = inboxEvent('index', row);
    await processOnce(original, effect(original), deps('a'));
    const tampered = inboxEvent('index', {
      ...row,
      payload: { ...(row.payload as object), title: 'Changed' },
    });
    expect(tampered.payloadHash).not.toBe(original.payloadHash);

    const outcome = await processOnce(tampered, effect(tampered), deps('b'));
    const key = poisonKey(row.eventId, tampered.payloadHash);
    expect(outcome).toMatchObject({ kind: 'poison', poisonKey: key });
    expect(outcome.kind === 'poison' && outcome.reason).toContain('payload differs');
    expect(await inboxOps.get({ consumer: 'index', eventId: key })).toMatchObject({
      status: 'DEAD',
      poison: true,
      cloudEventId: row.eventId,
    });
    expect(await inboxOps.get(original)).toMatchObject({
      status: 'PROCESSED',
      payloadHash: original.payloadHash,
    });
    // Delivered again: the same poison is already recorded, so it is a duplicate, never a retry.
    expect(await processOnce(tampered, effect(tampered), deps('c'))).toEqual({
      kind: 'duplicate',
      status: 'DEAD',
    });
    expect(runs.get(row.eventId)).toBe(1);
  });

  it('the lease is sized from the invocation deadline when that comes first', async () => {
    const event = inboxEvent('index');
    await processOnce(
      event,
      async () => {
        const record = await inboxOps.get(event);
        // 2 s left in the invocation + 1 s grace, not the 10 s maximum lease.
        expect(record?.leaseUntil).toBe(clock.now + 3_000);
        return 'ok';
      },
      deps('a', { deadline: clock.now + 2_000 }),
    );
    expect(await inboxOps.get(event)).toMatchObject({ status: 'PROCESSED' });
  });

  it('a redriven DEAD record runs again on its next delivery', async () => {
    const event = inboxEvent('index');
    settings = testInboxSettings({ maxPermanentAttempts: 1 });
    const dead = await processOnce(
      event,
      async () => {
        throw new Error('bad day');
      },
      deps('a'),
    );
    expect(dead.kind).toBe('dead');
    const redriven = await inboxOps.redrive(event, clock.now);
    expect(await processOnce({ ...event, event: redriven.event }, effect(event), deps('b'))).toMatchObject({
      kind: 'processed',
      attempt: 1,
      takenOver: true,
    });
  });
  // The heartbeat's timing (renewals, aborts, stalls) runs on fake time and the in-memory store,
  // held to the same store contract: test/unit/inbox-heartbeat.test.ts, inbox-leases-and-backoff.test.ts.
});

// Keeps the imports honest: the fixtures hash the CloudEvent, which is what the inbox compares.
describe('inbox event fixture', () => {
  it('hashes the CloudEvent, not the EventBridge envelope', () => {
    const row = approvedRow();
    expect(inboxEvent('index', row).payloadHash).toBe(payloadHash(busEvent(row).detail));
  });
});
