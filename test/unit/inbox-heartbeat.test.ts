import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { InboxKey, InboxStore, NewInboxRecord } from '../../shared/inbox/inbox-store';
import { processOnce } from '../../shared/inbox/process-once';
import { inboxEvent, testInboxSettings } from '../support/dynamo-consumer-fixtures';

/** One lease as the store saw it: granted at `at`, running until `until`. */
interface Grant {
  readonly at: number;
  readonly until: number;
}

/**
 * The part of the inbox a single uncontended attempt uses (begin, renew, complete), in memory,
 * recording every lease it grants: the heartbeat's timing runs on fake timers here, while the
 * DynamoDB engines prove the writes themselves (inbox-process-once.test.ts).
 */
function leaseRecorder(): { inbox: InboxStore; grants: Grant[]; completedAt: () => number | undefined } {
  const grants: Grant[] = [];
  let completedAt: number | undefined;
  const inbox = {
    async begin(record: NewInboxRecord) {
      grants.push({ at: record.now, until: record.leaseUntil });
      return { created: true, record: { ...record, status: 'PROCESSING', attempts: 1 } };
    },
    async renew(_key: InboxKey, _owner: string, leaseUntil: number, now: number) {
      grants.push({ at: now, until: leaseUntil });
    },
    async complete(_key: InboxKey, _owner: string, at: { now: number }) {
      completedAt = at.now;
    },
  } as unknown as InboxStore;
  return { inbox, grants, completedAt: () => completedAt };
}

describe('inbox heartbeat', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: Date.parse('2026-11-30T12:00:00.000Z') });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('renews each lease before it lapses, also when later leases are shorter than the first', async () => {
    // A 10 s invocation: leases shrink to the time left plus the grace, then to the grace
    // alone once the deadline has passed (locally nothing stops the work there).
    const settings = testInboxSettings({ leaseMs: 30_000, leaseGraceMs: 2_000 });
    const recorder = leaseRecorder();
    const start = Date.now();
    const outcome = processOnce(
      inboxEvent('index'),
      () => new Promise<string>((resolve) => setTimeout(() => resolve('slow'), 20_000)),
      { inbox: recorder.inbox, settings, owner: 'a', deadline: start + 10_000 },
    );

    await vi.advanceTimersByTimeAsync(20_000);
    expect(await outcome).toMatchObject({ kind: 'processed', result: 'slow' });

    const { grants } = recorder;
    expect(grants.length).toBeGreaterThan(3);
    for (let i = 1; i < grants.length; i++) {
      const previous = grants[i - 1] as Grant;
      const renewal = grants[i] as Grant;
      // Each renewal lands while the lease before it still runs.
      expect(renewal.at, `renewal ${i} at +${renewal.at - start} ms`).toBeLessThan(previous.until);
    }
    const last = grants.at(-1) as Grant;
    expect(recorder.completedAt()).toBeLessThanOrEqual(last.until);
  });

  it('beats at a third of the lease just granted', async () => {
    const settings = testInboxSettings({ leaseMs: 9_000, leaseGraceMs: 0 });
    const recorder = leaseRecorder();
    const start = Date.now();
    const outcome = processOnce(
      inboxEvent('index'),
      () => new Promise<string>((resolve) => setTimeout(() => resolve('done'), 10_000)),
      { inbox: recorder.inbox, settings, owner: 'a' },
    );
    await vi.advanceTimersByTimeAsync(10_000);
    await outcome;
    expect(recorder.grants.map((g) => g.at - start)).toEqual([0, 3_000, 6_000, 9_000]);
  });
});
