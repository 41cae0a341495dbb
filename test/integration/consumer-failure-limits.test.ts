import { Metrics } from '@aws-lambda-powertools/metrics';
import { beforeEach, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { InjectedFaultError } from '../../infra/local/faults';
import { createConsumer } from '../../shared/consumers/consumer';
import type { ConsumerEffect } from '../../shared/consumers/effect';
import { createQueueConsumer } from '../../shared/consumers/queue-delivery';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { inboxSettingsFor } from '../../shared/inbox/settings';
import { metricsNamespace } from '../../shared/outbox/relay-metrics';
import { consumerPolicyOf } from '../../shared/topology';
import { consumerQueueArn, FakeConsumerQueue, sqsEvent } from '../support/consumer-queue';
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

describeEachEngine('consumer failure limits: DEAD only for what needs a person', (fixture) => {
  let inbox: DynamoInboxStore;
  let inboxOps: DynamoInboxOps;
  let clock: TestClock;
  let calls: number;

  beforeEach(() => {
    inbox = new DynamoInboxStore(fixture().client, fixture().inbox);
    inboxOps = new DynamoInboxOps(fixture().client, fixture().inbox);
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
      routes: topology,
      name: 'notify',
      effect,
      inbox,
      logger: new RecordingLogger(),
      metrics: new Metrics({ namespace: metricsNamespace, serviceName: 'consumer-notify' }),
      settings: inboxSettingsFor(topology, 'notify'),
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
    const budget = consumerPolicyOf(topology, 'notify').maxPermanentAttempts;
    for (let i = 1; i < budget; i++) {
      await expect(run(busEvent(row), lambdaContext())).rejects.toThrow('Message too long');
      clock.advance(consumerPolicyOf(topology, 'notify').backoff.maxMs);
    }
    const last = await run(busEvent(row), lambdaContext());
    expect(last).toMatchObject({ status: 'dead', attempt: budget });
    expect(last.reason).toContain('InvalidParameterException');
    expect(await inboxOps.get({ consumer: 'notify', eventId: row.eventId })).toMatchObject({
      status: 'DEAD',
    });
  });

  /**
   * The consumer behind its queue on AWS: each receive runs one attempt; a failed message is
   * hidden for the delay the handler sets, and the queue hands it over again when that ends.
   */
  function queued(run: ReturnType<typeof build>) {
    const queue = new FakeConsumerQueue(consumerQueueArn('notify'));
    const handler = createQueueConsumer({
      consumer: run,
      queueArn: queue.arn,
      receipts: queue,
      policy: consumerPolicyOf(topology, 'notify'),
      logger: new RecordingLogger(),
      random: () => 0,
    });
    /** One receive of the one message: reported failed or not; when failed, the clock moves on by the hide. */
    const receive = async (event: unknown) => {
      const answer = await handler(sqsEvent(queue.receive(event, { messageId: 'm-1' })), lambdaContext());
      const failed = answer.batchItemFailures.length > 0;
      if (failed) clock.advance((queue.hides.at(-1)?.seconds ?? 0) * 1_000);
      return failed;
    };
    return { receive, hides: queue.hides };
  }

  it('on AWS: each time its queue hands a failed message over again, the attempt runs the effect, until it succeeds', async () => {
    // Down for nine receives, each one a real try of the effect.
    const run = build((call) =>
      call <= 9 ? transientFailures[call % transientFailures.length]?.() : undefined,
    );
    const row = approvedRow();
    const event = busEvent(row);
    const { receive, hides } = queued(run);
    for (let i = 1; i <= 9; i++) {
      expect(await receive(event), `receive ${i}`).toBe(true);
      expect(await inboxOps.get({ consumer: 'notify', eventId: row.eventId })).toMatchObject({
        status: 'FAILED',
        attempts: i,
      });
      // Never back before the inbox takes it again: an early receive would only be refused.
      expect(calls).toBe(i);
    }
    expect(await receive(event)).toBe(false);
    expect(await inboxOps.get({ consumer: 'notify', eventId: row.eventId })).toMatchObject({
      status: 'PROCESSED',
      attempts: 10,
    });
    expect(hides).toHaveLength(9);
  });

  it('on AWS: the retry budget counts from the consumer’s first attempt, not the event’s commit, and a redrive starts a new one', async () => {
    // Before the queues, the consumer retries (shared/consumers/retries.ts) judged age by the
    // event's `time`: an event replayed or redriven more than a day after its commit went to the
    // dead letters at its first transient failure.
    const budgetMs = consumerPolicyOf(topology, 'notify').maxEventAgeSeconds * 1_000;
    let down = true;
    const run = build(() => (down ? transientFailures[0]?.() : undefined));
    const row = approvedRow();
    const event = { ...busEvent(row), time: new Date(clock.now - 2 * budgetMs).toISOString() };
    const { receive } = queued(run);

    expect(await receive(event)).toBe(true);
    expect(await inboxOps.get({ consumer: 'notify', eventId: row.eventId })).toMatchObject({
      status: 'FAILED',
      attempts: 1,
    });
    // Down past the whole budget since that first attempt: DEAD, and the message acknowledged.
    clock.advance(budgetMs);
    expect(await receive(event)).toBe(false);
    expect(await inboxOps.get({ consumer: 'notify', eventId: row.eventId })).toMatchObject({
      status: 'DEAD',
    });
    // A person redrives it: a new budget, from the redrive's first attempt.
    await inboxOps.redrive({ consumer: 'notify', eventId: row.eventId }, clock.now);
    expect(await receive(event)).toBe(true);
    expect(await inboxOps.get({ consumer: 'notify', eventId: row.eventId })).toMatchObject({
      status: 'FAILED',
    });
    down = false;
    expect(await receive(event)).toBe(false);
    expect(await inboxOps.get({ consumer: 'notify', eventId: row.eventId })).toMatchObject({
      status: 'PROCESSED',
    });
  });
});
