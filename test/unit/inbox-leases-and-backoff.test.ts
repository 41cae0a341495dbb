import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  InboxBackoffError,
  InboxFencedOutError,
  InboxInProgressError,
  isInboxError,
} from '../../shared/inbox/errors';
import { TransientError } from '../../shared/inbox/failure-kind';
import { type InboxEvent, type ProcessOnceDeps, processOnce } from '../../shared/inbox/process-once';
import type { InboxSettings } from '../../shared/inbox/settings';
import { inboxEvent, testInboxSettings } from '../support/dynamo-consumer-fixtures';
import { elapse, type FakeTime, useFakeTime } from '../support/fake-time';
import { MemoryInboxStore } from '../support/memory-inbox-store';

/**
 * When a redelivery may run an event again: lease expiry, take-over and backoff, on fake time
 * and the in-memory store (held to the same contract as the DynamoDB engines), so each refusal
 * and each retry hint is checked at the exact fake millisecond, and an event-loop stall is a
 * step of the test rather than bad luck.
 */
describe('inbox leases, take-over and backoff', () => {
  let time: FakeTime;
  let inbox: MemoryInboxStore;
  let settings: InboxSettings;
  let event: InboxEvent;
  /** How many times the side effect ran. */
  let runs: number;

  beforeEach(() => {
    time = useFakeTime();
    inbox = new MemoryInboxStore();
    settings = testInboxSettings();
    event = inboxEvent('index');
    runs = 0;
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const deps = (owner: string, more: Partial<ProcessOnceDeps> = {}) => ({
    inbox,
    settings,
    clock: time.now,
    owner,
    random: () => 0.999,
    ...more,
  });
  const effect = async () => {
    runs++;
    return 'done';
  };
  /** The error a delivery gets right now, or its outcome when it gets none. */
  const deliver = (owner: string) => processOnce(event, effect, deps(owner)).catch((e: unknown) => e);

  it('a crashed attempt holds its event until its lease ends, and the retry hint says exactly when', async () => {
    vi.spyOn(inbox, 'complete').mockRejectedValueOnce(new Error('process died'));
    await expect(processOnce(event, effect, deps('a'))).rejects.toThrow('process died');

    const early = await deliver('b');
    expect(early).toBeInstanceOf(InboxInProgressError);
    const hint = (early as InboxInProgressError).retryAfterMs;
    expect(hint).toBe(settings.leaseMs + 1);
    await time.advance(hint - 1);
    expect(await deliver('c')).toBeInstanceOf(InboxInProgressError);
    await time.advance(1);
    expect(await deliver('d')).toMatchObject({ kind: 'processed', attempt: 2, takenOver: true });
    // The inbox does not hide a crash: the work ran twice, which is why effects are idempotent too.
    expect(runs).toBe(2);
  });

  it('a failed attempt backs off: a delivery before the backoff ends gets the time left, the one at its end runs', async () => {
    const failing = async () => {
      throw new TransientError('index unavailable');
    };
    await expect(processOnce(event, failing, deps('a'))).rejects.toThrow('index unavailable');

    // random 0.999 of a 1 s base for attempt 1.
    const early = await deliver('b');
    expect(early).toBeInstanceOf(InboxBackoffError);
    expect((early as InboxBackoffError).retryAfterMs).toBe(999);
    await time.advance(998);
    expect(await deliver('c')).toMatchObject({ code: 'BACKOFF', retryAfterMs: 1 });
    expect(runs).toBe(0);
    await time.advance(1);
    expect(await deliver('d')).toMatchObject({ kind: 'processed', attempt: 2, takenOver: true });
    expect(runs).toBe(1);
  });

  it('backoff doubles per attempt up to its cap, in the time a redelivery must wait', async () => {
    settings = testInboxSettings({ backoff: { baseMs: 1_000, maxMs: 2_500 } });
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      await processOnce(
        event,
        async () => {
          throw new TransientError('down');
        },
        deps(`o${i}`, { random: () => 1 }),
      ).catch(() => undefined);
      const refused = await deliver(`early${i}`);
      expect(refused).toBeInstanceOf(InboxBackoffError);
      waits.push((refused as InboxBackoffError).retryAfterMs);
      await time.advance((refused as InboxBackoffError).retryAfterMs);
    }
    expect(waits).toEqual([1_000, 2_000, 2_500, 2_500]);
  });

  it('an attempt stalled past its lease is taken over; its next beat is fenced out, its work aborted, its completion refused', async () => {
    let abortedBy: unknown;
    const stale = processOnce(
      event,
      async (ctx) => {
        ctx.signal.addEventListener('abort', () => {
          abortedBy = ctx.signal.reason;
        });
        await elapse(5_000, undefined);
        return effect();
      },
      deps('a'),
    ).catch((e: unknown) => e);
    // The event loop stalls past the lease before the first beat: nothing renewed it.
    time.stall(settings.leaseMs + 1);
    expect(await deliver('b')).toMatchObject({ kind: 'processed', attempt: 2, takenOver: true });

    await time.advance(5_000);
    expect(isInboxError(abortedBy, 'FENCED_OUT')).toBe(true);
    expect(await stale).toBeInstanceOf(InboxFencedOutError);
    expect(await inbox.get(event)).toMatchObject({ status: 'PROCESSED', attempts: 2, leaseOwner: 'b' });
  });

  describe('a beat that lands after a redelivery read the lapsed lease keeps the attempt alive', () => {
    /**
     * Attempt `a` works while the event loop stalls `stallMs` past its lease; a redelivery reads
     * the lapsed lease, and `a`'s overdue beat lands between that read and the redelivery's write.
     */
    async function lateBeat(stallMs: number, write: 'takeOver' | 'markDead') {
      const slow = processOnce(event, () => elapse(settings.leaseMs, 'slow'), deps('a'));
      time.stall(stallMs);
      const real = inbox[write].bind(inbox) as (...args: unknown[]) => Promise<unknown>;
      // The spied method's own signature differs per write; this stand-in only passes its arguments on.
      const lateWrite = async (...args: unknown[]) => {
        await time.advance(settings.leaseMs / 3);
        return real(...args);
      };
      vi.spyOn(inbox, write).mockImplementationOnce(lateWrite as never);
      const redelivery = await deliver('b');
      await time.advance(settings.leaseMs);
      return { redelivery, slow: await slow };
    }

    it('the redelivery does not take it over', async () => {
      const { redelivery, slow } = await lateBeat(settings.leaseMs + 1, 'takeOver');
      expect(redelivery).toBeInstanceOf(InboxInProgressError);
      expect(slow).toMatchObject({ kind: 'processed', attempt: 1, result: 'slow' });
      expect(await inbox.get(event)).toMatchObject({ status: 'PROCESSED', attempts: 1, leaseOwner: 'a' });
    });

    it('past the maximum event age, the redelivery does not make it DEAD', async () => {
      const { redelivery, slow } = await lateBeat(settings.maxEventAgeMs + 1, 'markDead');
      expect(redelivery).toBeInstanceOf(InboxInProgressError);
      expect(slow).toMatchObject({ kind: 'processed', attempt: 1, result: 'slow' });
      expect(await inbox.get(event)).toMatchObject({ status: 'PROCESSED', leaseOwner: 'a' });
    });
  });
});
