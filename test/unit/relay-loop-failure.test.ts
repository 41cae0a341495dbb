import { afterEach, describe, expect, it, vi } from 'vitest';
import { runRelay } from '../../shared/outbox/relay';
import { elapse, useFakeTime } from '../support/fake-time';
import { claimedEvents, RecordingPublisher, stubOutbox, testSettings } from '../support/outbox-fixtures';

describe('a relay run whose round fails', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('stops its other loops before it reports the error: no loop outlives the run', async () => {
    const time = useFakeTime();
    let claims = 0;
    const settings = testSettings({ roundsInFlight: 2, pollIntervalMs: 5, claimBatchSize: 2 });
    // Full batches keep the sibling loop claiming: only the failure can stop it.
    const fullBatch = () => claimedEvents(settings.claimBatchSize);
    const outbox = stubOutbox(async () => {
      const call = ++claims;
      await elapse(10, undefined);
      if (call === 2) throw new Error('database went away');
      return { claimed: fullBatch(), wedged: [], more: true };
    });

    const run = runRelay(
      {
        outbox,
        publisher: new RecordingPublisher(),
        owner: 'r',
        settings,
      },
      { remainingMs: () => 60_000, sleep: (ms) => elapse(ms, undefined) },
    );
    let failure: unknown;
    run.catch((err: unknown) => {
      failure = err;
    });

    // The first claim answers a full batch at +10 ms, so the run widens to a second loop; at
    // +20 ms that loop's first claim fails while the first loop's next claim succeeds, and the run
    // reports the failure at once.
    await time.advance(20);
    expect(failure).toMatchObject({ message: 'database went away' });
    const atRejection = claims;
    // Time goes on: a loop that outlived the run would keep claiming full batches in it.
    await time.advance(1_000);
    expect(claims).toBe(atRejection);
  });
});
