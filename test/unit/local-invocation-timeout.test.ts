import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { InvocationTimeoutError, withInvocationTimeout } from '../../infra/local/local-consumers';
import { deferred } from '../support/gates';

/**
 * The local runtime ends a consumer invocation at its timeout as Lambda does, so a hung effect
 * becomes a failed attempt the bus retries instead of a delivery in flight for good (with the
 * heartbeat stopping at the same deadline: test/unit/inbox-heartbeat.test.ts). Fake time: the
 * timeout fires at the millisecond the test says.
 */
describe('withInvocationTimeout', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('fails an invocation that has not ended by its timeout, as Lambda reports it', async () => {
    let giveUp!: (err: Error) => void;
    const hung = new Promise<never>((_, reject) => {
      giveUp = reject;
    });
    const invocation = withInvocationTimeout(hung, 'archive', 10_000).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(9_999);
    let settled = false;
    void invocation.then(() => {
      settled = true;
    });
    await Promise.resolve();
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const err = await invocation;
    expect(err).toBeInstanceOf(InvocationTimeoutError);
    expect((err as Error).message).toBe('archive: Task timed out after 10.00 seconds');
    // The abandoned work failing later is nobody's unhandled rejection.
    giveUp(new Error('the hung call gave up at last'));
    await vi.advanceTimersByTimeAsync(0);
  });

  it('passes an invocation that ends in time through, and leaves no timer behind', async () => {
    const work = deferred<string>();
    const invocation = withInvocationTimeout(work.promise, 'index', 10_000);
    await vi.advanceTimersByTimeAsync(5_000);
    work.resolve('processed');
    expect(await invocation).toBe('processed');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('passes a failure in time through as it is', async () => {
    const failure = new Error('effect failed');
    await expect(withInvocationTimeout(Promise.reject(failure), 'notify', 10_000)).rejects.toBe(failure);
    expect(vi.getTimerCount()).toBe(0);
  });
});
