import { randomUUID } from 'node:crypto';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { EventBridgeEvent } from 'aws-lambda';
import { beforeEach, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { type ConsumerContext, createConsumer } from '../../shared/consumers/consumer';
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

// The retry budget (issue 31): a consumer retries a transient failure until its maximum event age
// has passed since the event's first attempt at this consumer, as its inbox record counts it
// (firstAttemptAt), and an inbox redrive of a DEAD record starts a new budget. Not since the
// event's commit or its EventBridge `time`: before the consumers read their own queues,
// shared/consumers/retries.ts judged the age by the event's `time`, so an event older than a day
// (a redriven letter, an archive replay, a delivery that waited in a rule's DLQ) was dead-lettered
// at its first transient failure, with none of its budget spent.

const policy = consumerPolicyOf(topology, 'notify');
const day = 24 * 3_600_000;

describeEachEngine(
  'the retry budget counts from the first attempt at the consumer, not the event’s time',
  (fixture) => {
    let inboxOps: DynamoInboxOps;
    let clock: TestClock;
    let failing: boolean;
    let calls: number;
    let queue: FakeConsumerQueue;
    let handler: ReturnType<typeof createQueueConsumer<ConsumerContext>>;

    beforeEach(() => {
      const inbox = new DynamoInboxStore(fixture().client, fixture().inbox);
      inboxOps = new DynamoInboxOps(fixture().client, fixture().inbox);
      clock = new TestClock();
      failing = true;
      calls = 0;
      const effect: ConsumerEffect = async () => {
        calls++;
        if (failing) {
          throw Object.assign(new Error('Service Unavailable'), {
            name: 'ServiceUnavailable',
            $metadata: { httpStatusCode: 503 },
          });
        }
        return { sent: true };
      };
      queue = new FakeConsumerQueue(consumerQueueArn('notify'));
      handler = createQueueConsumer({
        consumer: createConsumer({
          routes: topology,
          name: 'notify',
          effect,
          inbox,
          logger: new RecordingLogger(),
          metrics: new Metrics({ namespace: metricsNamespace, serviceName: 'consumer-notify' }),
          settings: inboxSettingsFor(topology, 'notify'),
          clock: clock.read,
        }),
        queueArn: queue.arn,
        receipts: queue,
        policy,
        logger: new RecordingLogger(),
      });
    });

    /** An approval whose EventBridge `time` is `ageMs` before the test's clock. */
    function eventAged(ageMs: number) {
      const row = approvedRow();
      const event: EventBridgeEvent<string, unknown> = {
        ...busEvent(row),
        time: new Date(clock.now - ageMs).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      };
      return { row, event, key: { consumer: 'notify', eventId: row.eventId } };
    }

    /** One receive of message `messageId` carrying `event`: the messages the batch answer names. */
    async function receive(event: unknown, messageId: string): Promise<string[]> {
      const { batchItemFailures } = await handler(
        sqsEvent(queue.receive(event, { messageId })),
        lambdaContext(),
      );
      return batchItemFailures.map((f) => f.itemIdentifier);
    }

    it('an event 48 h old that fails transiently at its first attempt is retried: FAILED, the message back in its queue', async () => {
      const { event, key } = eventAged(2 * day);
      const messageId = randomUUID();

      expect(await receive(event, messageId)).toEqual([messageId]);

      expect(calls).toBe(1);
      expect(await inboxOps.get(key)).toMatchObject({
        status: 'FAILED',
        attempts: 1,
        lastFailure: 'transient',
        firstAttemptAt: clock.now,
      });
      // Hidden for a backoff, to be handed over again: not acknowledged, not dead-lettered.
      expect(queue.hides).toHaveLength(1);
      expect(queue.hides[0]?.seconds).toBeLessThanOrEqual(policy.backoff.maxMs / 1_000);

      // Half a day of failures later, with the event 2.5 days old, still retried.
      clock.advance(day / 2);
      expect(await receive(event, messageId)).toEqual([messageId]);
      expect(await inboxOps.get(key)).toMatchObject({ status: 'FAILED', attempts: 2 });
    });

    it('an inbox redrive of a DEAD record gives the next attempt a fresh budget', async () => {
      const { event, key } = eventAged(2 * day);
      const first = randomUUID();
      expect(await receive(event, first)).toEqual([first]);
      // A day of failures spends the budget: the next failure is DEAD and acknowledged.
      clock.advance(policy.maxEventAgeSeconds * 1_000);
      expect(await receive(event, first)).toEqual([]);
      expect(await inboxOps.get(key)).toMatchObject({ status: 'DEAD', attempts: 2 });

      // A person fixes the cause in part and redrives it a day later; the ops redrive re-sends the
      // event to the consumer's queue (SqsRedelivery): a new message, received for the first time.
      clock.advance(day);
      const redrivenAt = clock.now;
      await inboxOps.redrive(key, redrivenAt);
      const again = randomUUID();
      clock.advance(1_000);
      expect(await receive(event, again)).toEqual([again]);
      expect(await inboxOps.get(key)).toMatchObject({
        status: 'FAILED',
        attempts: 1,
        firstAttemptAt: redrivenAt,
      });

      // Most of a new day later (the event now four days old), still FAILED and retried...
      clock.advance(policy.maxEventAgeSeconds * 1_000 - 60_000);
      expect(await receive(event, again)).toEqual([again]);
      expect(await inboxOps.get(key)).toMatchObject({ status: 'FAILED', attempts: 2 });
      // ...and once the downstream is back, processed.
      failing = false;
      clock.advance(policy.backoff.maxMs);
      expect(await receive(event, again)).toEqual([]);
      expect(await inboxOps.get(key)).toMatchObject({ status: 'PROCESSED', attempts: 3 });
    });
  },
);
