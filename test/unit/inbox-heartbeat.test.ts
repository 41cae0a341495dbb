import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  InboxError,
  InboxFencedOutError,
  InboxInProgressError,
  isInboxError,
} from '../../shared/inbox/errors';
import { type InboxEvent, type ProcessOnceDeps, processOnce } from '../../shared/inbox/process-once';
import type { InboxSettings } from '../../shared/inbox/settings';
import {
  deferred,
  inboxEvent,
  RecordingLogger,
  testInboxSettings,
} from '../support/dynamo-consumer-fixtures';
import { elapse, type FakeTime, useFakeTime } from '../support/fake-time';
import { MemoryInboxStore } from '../support/memory-inbox-store';

/** One lease as the store saw it: granted at `at`, running until `until`. */
interface Grant {
  readonly at: number;
  readonly until: number;
}

/**
 * The heartbeat's timing on fake time and the in-memory store (held to the same contract as
 * the DynamoDB engines): every beat, lease and refusal happens at the fake millisecond the test
 * says, however slow the machine. The engines prove the writes themselves.
 */
describe('inbox heartbeat', () => {
  let time: FakeTime;
  let inbox: MemoryInboxStore;
  let event: InboxEvent;

  beforeEach(() => {
    time = useFakeTime();
    inbox = new MemoryInboxStore();
    event = inboxEvent('index');
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const deps = (owner: string, settings: InboxSettings, more: Partial<ProcessOnceDeps> = {}) => ({
    inbox,
    settings,
    clock: time.now,
    owner,
    ...more,
  });

  /** Every lease the store grants from now on: begin's and each renewal's. */
  function recordGrants(): Grant[] {
    const grants: Grant[] = [];
    const begin = inbox.begin.bind(inbox);
    const renew = inbox.renew.bind(inbox);
    vi.spyOn(inbox, 'begin').mockImplementation(async (record) => {
      grants.push({ at: record.now, until: record.leaseUntil });
      return begin(record);
    });
    vi.spyOn(inbox, 'renew').mockImplementation(async (key, owner, leaseUntil, now) => {
      await renew(key, owner, leaseUntil, now);
      grants.push({ at: now, until: leaseUntil });
    });
    return grants;
  }

  it('renews each lease before it lapses until the deadline, also when later leases are shorter than the first', async () => {
    // A 10 s invocation: leases shrink to the time left plus the grace as the deadline nears.
    const settings = testInboxSettings({ leaseMs: 30_000, leaseGraceMs: 2_000 });
    const grants = recordGrants();
    const start = time.now();
    const outcome = processOnce(
      event,
      () => elapse(9_000, 'in time'),
      deps('a', settings, { deadline: start + 10_000 }),
    );

    await time.advance(9_000);
    expect(await outcome).toMatchObject({ kind: 'processed', result: 'in time' });
    expect(grants.length).toBeGreaterThan(3);
    for (let i = 1; i < grants.length; i++) {
      const previous = grants[i - 1] as Grant;
      const renewal = grants[i] as Grant;
      // Each renewal lands while the lease before it still runs.
      expect(renewal.at, `renewal ${i} at +${renewal.at - start} ms`).toBeLessThan(previous.until);
    }
  });

  it('stops renewing at the invocation deadline: work still running past it loses its lease by the grace, and a retry takes the record over', async () => {
    // Lambda stops an invocation at its timeout; locally a hung effect may run on. Renewing
    // past the deadline (as before) kept such a record PROCESSING for as long as the hang lasted.
    const settings = testInboxSettings({ leaseMs: 30_000, leaseGraceMs: 2_000 });
    const grants = recordGrants();
    const start = time.now();
    const hung = deferred();
    const first = processOnce(
      event,
      async () => {
        await hung.promise;
        return 'late';
      },
      deps('a', settings, { deadline: start + 10_000 }),
    ).catch((e: unknown) => e);

    // Well past the deadline and its grace, inside the event's maximum age (60 s here).
    await time.advance(20_000);
    expect(grants.length).toBeGreaterThan(1);
    for (const g of grants) expect(g.at - start).toBeLessThan(10_000);
    expect(Math.max(...grants.map((g) => g.until)) - start).toBeLessThanOrEqual(12_000);

    // The retry (another invocation, its own deadline) takes the lapsed record over and finishes.
    const retry = await processOnce(
      event,
      async () => 'retried',
      deps('b', settings, { deadline: time.now() + 10_000 }),
    );
    expect(retry).toMatchObject({ kind: 'processed', result: 'retried' });
    // The abandoned attempt ends at last: its completion is fenced, the record stays the retry's.
    hung.resolve();
    expect(isInboxError(await first, 'FENCED_OUT')).toBe(true);
    expect(await inbox.get(event)).toMatchObject({ status: 'PROCESSED', leaseOwner: 'b' });
  });

  it('beats at a third of the lease just granted', async () => {
    const settings = testInboxSettings({ leaseMs: 9_000, leaseGraceMs: 0 });
    const grants = recordGrants();
    const start = time.now();
    const outcome = processOnce(event, () => elapse(10_000, 'done'), deps('a', settings));
    await time.advance(10_000);
    await outcome;
    expect(grants.map((g) => g.at - start)).toEqual([0, 3_000, 6_000, 9_000]);
  });

  it('renews the lease while long work runs, so a concurrent delivery still sees it live', async () => {
    const settings = testInboxSettings({ leaseMs: 1_000, leaseGraceMs: 0 });
    const started = time.now();
    let concurrent: unknown;
    let leaseDuringWork = 0;
    let secondRan = false;
    const outcome = processOnce(
      event,
      async () => {
        // Well past the first lease: only renewals keep it live.
        await elapse(2_500, undefined);
        leaseDuringWork = (await inbox.get(event))?.leaseUntil ?? 0;
        concurrent = await processOnce(
          event,
          async () => {
            secondRan = true;
          },
          deps('b', settings),
        ).catch((e: unknown) => e);
        return 'long';
      },
      deps('a', settings),
    );
    await time.advance(2_500);
    expect(await outcome).toMatchObject({ kind: 'processed', result: 'long' });
    expect(leaseDuringWork).toBeGreaterThan(started + 2_500);
    expect(concurrent).toBeInstanceOf(InboxInProgressError);
    expect(secondRan).toBe(false);
  });

  it('aborts the work signal at the first beat after the lease was taken over', async () => {
    const settings = testInboxSettings({ leaseMs: 150, leaseGraceMs: 0 });
    let aborted: unknown;
    const outcome = processOnce(
      event,
      async (ctx) => {
        // Another attempt takes the record over behind this one's back.
        await inbox.takeOver(
          event,
          { status: 'PROCESSING', leaseOwner: 'a' },
          { owner: 'thief', leaseUntil: time.now() + 60_000, now: time.now() + 1_000 },
        );
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
        aborted = ctx.signal.reason;
        return 'stopped';
      },
      deps('a', settings),
    ).catch((e: unknown) => e);
    await time.advance(50);
    expect(isInboxError(aborted, 'FENCED_OUT')).toBe(true);
    expect(await outcome).toBeInstanceOf(InboxFencedOutError);
    expect(await inbox.get(event)).toMatchObject({ status: 'PROCESSING', leaseOwner: 'thief' });
  });

  it('logs a renewal that fails for another reason and renews on the next beat, while the lease still runs', async () => {
    const settings = testInboxSettings({ leaseMs: 9_000, leaseGraceMs: 0 });
    const grants = recordGrants();
    const renew = inbox.renew as unknown as ReturnType<typeof vi.fn>;
    renew.mockRejectedValueOnce(new InboxError('STORE_ERROR', 'throttled'));
    const logger = new RecordingLogger();
    const start = time.now();
    const outcome = processOnce(event, () => elapse(10_000, 'done'), deps('a', settings, { logger }));
    await time.advance(10_000);
    expect(await outcome).toMatchObject({ kind: 'processed' });
    expect(logger.lines).toEqual([
      expect.objectContaining({
        level: 'warn',
        message: 'inbox heartbeat failed; retrying on the next beat',
      }),
    ]);
    // The beat at +3 s failed; the one at +6 s renewed the first lease (until +9 s) in time.
    expect(grants.map((g) => [g.at - start, g.until - start])).toEqual([
      [0, 9_000],
      [6_000, 15_000],
      [9_000, 18_000],
    ]);
  });

  it('stops beating when the work ends: no renewal after the record is complete', async () => {
    const settings = testInboxSettings({ leaseMs: 9_000, leaseGraceMs: 0 });
    const renew = vi.spyOn(inbox, 'renew');
    const outcome = processOnce(event, () => elapse(4_000, 'done'), deps('a', settings));
    await time.advance(4_000);
    expect(await outcome).toMatchObject({ kind: 'processed' });
    await time.advance(60_000);
    expect(renew).toHaveBeenCalledTimes(1);
    expect(await inbox.get(event)).toMatchObject({ status: 'PROCESSED', updatedAt: time.now() - 60_000 });
  });

  it('completes only after a renewal in flight has landed, so the renewal cannot land on the finished record', async () => {
    const settings = testInboxSettings({ leaseMs: 9_000, leaseGraceMs: 0 });
    const held = deferred();
    const renew = inbox.renew.bind(inbox);
    vi.spyOn(inbox, 'renew').mockImplementation(async (...args) => {
      await held.promise;
      await renew(...args);
    });
    const complete = vi.spyOn(inbox, 'complete');
    // The work ends at the very millisecond of the first beat, whose renewal is slow.
    const outcome = processOnce(event, () => elapse(3_000, 'done'), deps('a', settings));
    await time.advance(3_000);
    expect(inbox.renew).toHaveBeenCalledTimes(1);
    expect(complete).not.toHaveBeenCalled();
    held.resolve();
    expect(await outcome).toMatchObject({ kind: 'processed' });
    expect(complete).toHaveBeenCalledTimes(1);
    expect(await inbox.get(event)).toMatchObject({ status: 'PROCESSED', leaseOwner: 'a' });
  });
});
