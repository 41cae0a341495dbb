import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createRelayInvocation } from '../../shared/outbox/relay-invocation';
import { RecordingPublisher, testSettings } from '../support/outbox-fixtures';

describe('a relay run holds its run lease only until its deadline', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('renews its slot while it has time left and stops once its time is up, so a run stuck past it lets the slot lapse', async () => {
    const settings = testSettings({ runLeaseSeconds: 15 });
    const renew = vi.fn(async () => true);
    const never = () => new Promise<never>(() => {});
    const relay = createRelayInvocation({
      // Every outbox statement waits for ever, as one sent to a stopped backend with no deadline.
      outbox: {
        claim: never,
        markDelivered: never,
        markFailed: never,
        purgeDelivered: never,
        release: never,
        stats: never,
      },
      circuit: {
        read: never,
        open: never,
        takeProbe: never,
        probeFailed: never,
        probeNow: never,
        close: never,
      },
      publisher: new RecordingPublisher(),
      lease: {
        acquire: async () => 0,
        renew,
        release: async () => {},
        writersInFlight: async () => ({ since: '', open: 0 }),
      },
      wakeups: { wakeAfter: async () => {} },
      settings,
      logger: new Logger({ serviceName: 'relay-test', logLevel: 'SILENT' }),
      metrics: new Metrics({ namespace: 'test', serviceName: 'relay-test' }),
    });
    const deadline = Date.now() + 60_000;

    void relay({ nudge: true }, { awsRequestId: 'r', getRemainingTimeInMillis: () => deadline - Date.now() });
    await vi.advanceTimersByTimeAsync(60_000);
    const withinTime = renew.mock.calls.length;
    await vi.advanceTimersByTimeAsync(10 * 60_000);

    // Every third of the lease, at 5 s to 55 s: at 60 s its time is up.
    expect(withinTime).toBe(11);
    expect(renew).toHaveBeenCalledTimes(withinTime);
  });
});
