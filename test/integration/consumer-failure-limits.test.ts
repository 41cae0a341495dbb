import { Metrics } from '@aws-lambda-powertools/metrics';
import { beforeEach, expect, it } from 'vitest';
import { InjectedFaultError } from '../../infra/local/faults';
import { createConsumer } from '../../shared/consumers/consumer';
import type { ConsumerEffect } from '../../shared/consumers/effect';
import { retryDelaySeconds } from '../../shared/consumers/retries';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { inboxSettingsFor } from '../../shared/inbox/settings';
import { metricsNamespace } from '../../shared/outbox/relay-metrics';
import { topology } from '../../shared/topology';
import { describeEachEngine } from '../support/dynamo';
import {
  approvedRow,
  busEvent,
  lambdaContext,
  RecordingLogger,
  TestClock,
} from '../support/dynamo-consumer-fixtures';

/** The transient failures an effect meets on AWS and locally, in turn. */
const transientFailures: (() => Error)[] = [
  () =>
    Object.assign(new Error('Rate exceeded'), {
      name: 'ThrottlingException',
      $metadata: { httpStatusCode: 400 },
    }),
  () =>
    Object.assign(new Error('Service Unavailable'), {
      name: 'ServiceUnavailable',
      $metadata: { httpStatusCode: 503 },
    }),
  () => Object.assign(new Error('socket timed out'), { name: 'TimeoutError' }),
  () =>
    new Error('snapshot put failed', {
      cause: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }),
    }),
  () => new InjectedFaultError('injected fault: effectFailBefore'),
];

/**
 * Lambda's asynchronous invocation of a function that returns an error: the first attempt, a
 * retry about a minute later, another about two minutes after that (`asyncInvoke.retryAttempts`
 * of them); then the event goes to the on-failure destination.
 * https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html
 */
const lambdaRetryDelaysMs = [60_000, 120_000].slice(0, topology.consumers.notify.asyncInvoke.retryAttempts);

describeEachEngine('consumer failure limits: DEAD only for what needs a person', (fixture) => {
  let inbox: DynamoInboxStore;
  let inboxOps: DynamoInboxOps;
  let clock: TestClock;
  let calls: number;

  beforeEach(() => {
    inbox = new DynamoInboxStore(fixture().client, { tableName: fixture().inboxTable });
    inboxOps = new DynamoInboxOps(fixture().client, { tableName: fixture().inboxTable });
    clock = new TestClock();
    calls = 0;
  });

  /** The notify consumer with the topology's own policy; `fail(call)` decides each effect call. */
  function build(fail: (call: number) => Error | undefined) {
    const effect: ConsumerEffect = async () => {
      calls++;
      const err = fail(calls);
      if (err) throw err;
      return { sent: true };
    };
    return createConsumer({
      name: 'notify',
      effect,
      inbox,
      logger: new RecordingLogger(),
      metrics: new Metrics({ namespace: metricsNamespace, serviceName: 'consumer-notify' }),
      settings: inboxSettingsFor('notify'),
      clock: clock.read,
      // Full jitter at its top: every backoff as long as the policy allows.
      random: () => 0.999,
    });
  }

  it('an effect that fails transiently 20 times in a row still ends PROCESSED, not DEAD', async () => {
    const run = build((call) =>
      call <= 20 ? transientFailures[call % transientFailures.length]?.() : undefined,
    );
    const row = approvedRow();
    for (let i = 1; i <= 20; i++) {
      await expect(run(busEvent(row), lambdaContext())).rejects.toThrow();
      const record = await inboxOps.get({ consumer: 'notify', eventId: row.eventId });
      expect(record, `failure ${i}`).toMatchObject({
        status: 'FAILED',
        attempts: i,
        lastFailure: 'transient',
      });
      clock.now = record?.nextAttemptAt ?? clock.now;
    }
    expect(await run(busEvent(row), lambdaContext())).toMatchObject({ status: 'processed', attempt: 21 });
    expect(await inboxOps.get({ consumer: 'notify', eventId: row.eventId })).toMatchObject({
      status: 'PROCESSED',
    });
    expect(calls).toBe(21);
  });

  it('a permanent failure ends DEAD after the small permanent budget, acknowledged', async () => {
    const run = build(() =>
      Object.assign(new Error('Invalid parameter: Message too long'), {
        name: 'InvalidParameterException',
        $metadata: { httpStatusCode: 400 },
      }),
    );
    const row = approvedRow();
    const budget = topology.consumers.notify.maxPermanentAttempts;
    for (let i = 1; i < budget; i++) {
      await expect(run(busEvent(row), lambdaContext())).rejects.toThrow('Message too long');
      clock.advance(topology.consumers.notify.backoff.maxMs);
    }
    const last = await run(busEvent(row), lambdaContext());
    expect(last).toMatchObject({ status: 'dead', attempt: budget });
    expect(last.reason).toContain('InvalidParameterException');
    expect(await inboxOps.get({ consumer: 'notify', eventId: row.eventId })).toMatchObject({
      status: 'DEAD',
    });
    // Within a single Lambda async delivery (1 + 2 attempts): never to the on-failure queue.
    expect(budget).toBeLessThanOrEqual(1 + topology.consumers.notify.asyncInvoke.retryAttempts);
  });

  it('on AWS: a transient failure outlasting the async retries waits FAILED, and each re-invoke of the consumer retries continues it', async () => {
    // Down for three whole deliveries (9 attempts, each one a real try of the effect).
    const run = build((call) =>
      call <= 9 ? transientFailures[call % transientFailures.length]?.() : undefined,
    );
    const row = approvedRow();
    const event = busEvent(row);
    /** One async invocation by Lambda: the attempts, then its on-failure record for the retry queue. */
    const lambdaDelivery = async () => {
      for (const delay of [0, ...lambdaRetryDelaysMs]) {
        clock.advance(delay);
        const outcome = await run(event, lambdaContext()).then(
          (result) => ({ result }),
          (error: unknown) => ({ error }),
        );
        if ('result' in outcome) return outcome.result;
      }
      return 'on-failure record';
    };

    for (let delivery = 1; delivery <= 3; delivery++) {
      expect(await lambdaDelivery()).toBe('on-failure record');
      expect(await inboxOps.get({ consumer: 'notify', eventId: row.eventId })).toMatchObject({
        status: 'FAILED',
        attempts: delivery * (1 + lambdaRetryDelaysMs.length),
      });
      // Every retry Lambda made ran the effect: the inbox backoff never outlasts Lambda's wait.
      expect(calls).toBe(delivery * (1 + lambdaRetryDelaysMs.length));
      // The consumer retries invoke it again after their delay (shared/consumers/retries.ts):
      // never before the inbox's backoff is over, so the next attempt runs the effect too.
      clock.advance(retryDelaySeconds(topology.consumers.notify, () => 0) * 1_000);
    }
    expect(await lambdaDelivery()).toMatchObject({ status: 'processed', attempt: 10 });
    expect(await inboxOps.get({ consumer: 'notify', eventId: row.eventId })).toMatchObject({
      status: 'PROCESSED',
    });
  });
});
