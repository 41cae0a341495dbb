import { ChangeMessageVisibilityCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { SqsQueueReceipts } from '../../shared/consumers/adapters/aws/sqs-queue-receipts';
import type { ConsumerFunction } from '../../shared/consumers/consumer';
import {
  type ConsumerPolicy,
  defaultConsumerPolicy,
  queuePolicyProblems,
} from '../../shared/consumers/define-consumer';
import {
  createQueueConsumer,
  type QueueReceipts,
  queueBackoffMaxSeconds,
  queueFailureDelaySeconds,
  queueMaxReceiveCount,
  visibilityTimeoutPerFunctionTimeout,
} from '../../shared/consumers/queue-delivery';
import { consumerFunctionTimeoutSeconds } from '../../shared/consumers/queue-timing';
import { InboxBackoffError } from '../../shared/inbox/errors';
import { consumerPolicyOf } from '../../shared/topology';
import { RecordingLogger } from '../support/dynamo-consumer-fixtures';

const policy = { ...defaultConsumerPolicy, description: 'test' };
const queueArn = 'arn:aws:sqs:us-east-1:123456789012:index-queue';
const context = { awsRequestId: 'r', functionName: 'consumer-index', getRemainingTimeInMillis: () => 60_000 };

const record = (id: string, body: unknown, receives = 1, arn = queueArn): SQSEvent['Records'][number] => ({
  messageId: id,
  receiptHandle: `handle-${id}`,
  body: JSON.stringify(body),
  attributes: {
    ApproximateReceiveCount: String(receives),
    SentTimestamp: '0',
    SenderId: 'events',
    ApproximateFirstReceiveTimestamp: '0',
  },
  messageAttributes: {},
  md5OfBody: '',
  eventSource: 'aws:sqs',
  eventSourceARN: arn,
  awsRegion: 'us-east-1',
});

/** Receipts SQS knows (the handles given), recording each hide. */
function receiptsOf(known: readonly string[], hideFails = false) {
  const hides: [string, number][] = [];
  const receipts: QueueReceipts = {
    confirm: async (handle) => known.includes(handle),
    hide: async (handle, seconds) => {
      if (hideFails) throw new Error('SQS unavailable');
      hides.push([handle, seconds]);
    },
  };
  return { receipts, hides };
}

describe('queueFailureDelaySeconds', () => {
  it('doubles per receive from the base backoff, jittered upwards by at most half, capped at ten minutes', () => {
    const at = (receives: number, r: number) =>
      queueFailureDelaySeconds(policy, receives, undefined, () => r);
    expect([1, 2, 3, 4, 5].map((n) => at(n, 0))).toEqual([1, 2, 4, 8, 16]);
    expect(at(4, 0.999)).toBe(Math.ceil(8 * 1.4995));
    for (let n = 1; n < 40; n++) {
      expect(at(n, 0)).toBeLessThanOrEqual(at(n + 1, 0));
      expect(at(n, 0.999)).toBeLessThanOrEqual(queueBackoffMaxSeconds);
    }
    expect(at(40, 0)).toBe(queueBackoffMaxSeconds);
  });

  it('never brings a message back before the inbox takes its event again', () => {
    // The inbox's full-jitter ceiling for an attempt: the message waits at least that long.
    const long = { backoff: { baseMs: 1_000, maxMs: 900_000 } };
    expect(queueFailureDelaySeconds(long, 11, undefined, () => 0)).toBe(900);
    // The inbox said when: the later of the two.
    expect(queueFailureDelaySeconds(policy, 1, 42_500, () => 0)).toBe(43);
    expect(queueFailureDelaySeconds(policy, 1, 0, () => 0)).toBe(1);
  });
});

describe('queueMaxReceiveCount', () => {
  it('lets a message be received over its whole retry budget before the DLQ takes it, within SQS’s 1,000', () => {
    for (const p of [
      policy,
      { ...policy, maxEventAgeSeconds: 3_600 },
      { ...policy, maxEventAgeSeconds: 14 * 86_400 },
    ]) {
      const count = queueMaxReceiveCount(p);
      expect(count).toBeLessThanOrEqual(1_000);
      // The shortest the waits can add up to over `count` receives (no jitter).
      let waited = 0;
      for (let n = 1; n < count; n++) waited += queueFailureDelaySeconds(p, n, undefined, () => 0);
      const budget = p.maxEventAgeSeconds + p.backoff.maxMs / 1_000;
      if (count < 1_000) expect(waited).toBeGreaterThanOrEqual(budget);
    }
  });
});

describe('a message the function fails on at every receive (it never reaches the inbox)', () => {
  /**
   * The longest it can be in its queue before the queue moves it to the DLQ: at each of its
   * receives the function runs up to its timeout and then hides the message for the longest
   * backoff (upper jitter, the inbox's longest say); or it never finishes, and the queue's
   * visibility timeout hands the message over again.
   */
  function longestToDeadLetter(p: ConsumerPolicy, functionTimeoutSeconds: number): number {
    const visibility = functionTimeoutSeconds * visibilityTimeoutPerFunctionTimeout;
    let seconds = 0;
    for (let n = 1; n <= queueMaxReceiveCount(p); n++) {
      const hidden = queueFailureDelaySeconds(p, n, p.backoff.maxMs, () => 0.999_999);
      seconds += Math.max(functionTimeoutSeconds + hidden, visibility);
    }
    return seconds;
  }

  it('reaches its DLQ before its queue forgets it, and the DLQ keeps it longer than the queue would have', () => {
    for (const [name, p] of [
      ['the default', policy] as const,
      ...topology.consumerNames.map((n) => [n, consumerPolicyOf(topology, n)] as const),
    ]) {
      const toDeadLetter = longestToDeadLetter(p, consumerFunctionTimeoutSeconds);
      expect(
        p.queue.retentionSeconds,
        `${name}: retention vs ${toDeadLetter} s to the DLQ`,
      ).toBeGreaterThanOrEqual(toDeadLetter);
      // SQS counts a dead letter's retention from its first enqueue: the DLQ's must be longer.
      expect(p.deadLetterRetentionSeconds, name).toBeGreaterThan(p.queue.retentionSeconds);
      expect(queuePolicyProblems(p), name).toEqual([]);
    }
  });

  it('is a problem in a policy whose queue forgets first, or whose DLQ keeps no longer than the queue', () => {
    const toDeadLetter = longestToDeadLetter(policy, consumerFunctionTimeoutSeconds);
    const short = { ...policy, queue: { ...policy.queue, retentionSeconds: toDeadLetter - 60 } };
    expect(queuePolicyProblems(short)).toEqual([expect.stringContaining(`${toDeadLetter - 60}`)]);
    const fit = { ...policy, queue: { ...policy.queue, retentionSeconds: toDeadLetter } };
    expect(queuePolicyProblems(fit)).toEqual([]);
    expect(queuePolicyProblems({ ...fit, deadLetterRetentionSeconds: toDeadLetter })).toEqual([
      expect.stringContaining('deadLetterRetentionSeconds'),
    ]);
  });
});

describe('queuePolicyProblems', () => {
  it('refuses what SQS and Lambda would refuse at deploy, and a queue that forgets before the retries end', () => {
    expect(queuePolicyProblems(policy)).toEqual([]);
    const bad = { ...policy, queue: { batchSize: 11, maxConcurrency: 1, retentionSeconds: 3_600 } };
    // Past what 1,000 receives at the capped wait can hold: the queue would give up first.
    const long = {
      ...policy,
      maxEventAgeSeconds: 7 * 86_400,
      queue: { ...policy.queue, retentionSeconds: 10 * 86_400 },
    };
    expect(queuePolicyProblems(long)).toEqual([
      expect.stringContaining('outlast the 1000 receives SQS allows'),
    ]);
    expect(queuePolicyProblems({ ...long, maxEventAgeSeconds: 6 * 86_400 })).toEqual([]);
    expect(queuePolicyProblems(bad)).toEqual([
      expect.stringContaining('batchSize 11'),
      expect.stringContaining('maxConcurrency 1'),
      expect.stringContaining('retentionSeconds 3600'),
    ]);
  });
});

describe('createQueueConsumer', () => {
  function handlerWith(consumer: ConsumerFunction, receipts: QueueReceipts) {
    const logger = new RecordingLogger();
    const handler = createQueueConsumer({ consumer, queueArn, receipts, policy, logger, random: () => 0 });
    return { handler, logger };
  }

  it('runs each message’s event and reports nothing failed when all succeed', async () => {
    const seen: unknown[] = [];
    const { receipts, hides } = receiptsOf(['handle-a', 'handle-b']);
    const { handler } = handlerWith(async (event) => {
      seen.push(event);
      return { status: 'processed' } as never;
    }, receipts);
    const answer = await handler(
      { Records: [record('a', { id: 'e1' }), record('b', { id: 'e2' })] },
      context,
    );
    expect(answer).toEqual({ batchItemFailures: [] });
    expect(seen).toEqual([{ id: 'e1' }, { id: 'e2' }]);
    expect(hides).toEqual([]);
  });

  it('hides a failed message for its backoff and reports only it, the rest of the batch acknowledged', async () => {
    const { receipts, hides } = receiptsOf(['handle-a', 'handle-b', 'handle-c']);
    const { handler } = handlerWith(async (event) => {
      if ((event as { id: string }).id === 'e2') throw new Error('SNS unavailable');
      return { status: 'processed' } as never;
    }, receipts);
    const answer = await handler(
      { Records: [record('a', { id: 'e1' }), record('b', { id: 'e2' }, 3), record('c', { id: 'e3' })] },
      context,
    );
    expect(answer).toEqual({ batchItemFailures: [{ itemIdentifier: 'b' }] });
    expect(hides).toEqual([['handle-b', 4]]);
  });

  it('waits as long as the inbox says when it refuses an early attempt', async () => {
    const { receipts, hides } = receiptsOf(['handle-a']);
    const { handler } = handlerWith(async () => {
      throw new InboxBackoffError({ consumer: 'index', eventId: 'e1' }, 30_000);
    }, receipts);
    await handler({ Records: [record('a', { id: 'e1' })] }, context);
    expect(hides).toEqual([['handle-a', 30]]);
  });

  it('still reports a failed message whose hide fails (it comes back after the queue’s own timeout)', async () => {
    const { receipts } = receiptsOf(['handle-a'], true);
    const { handler, logger } = handlerWith(async () => {
      throw new Error('boom');
    }, receipts);
    const answer = await handler({ Records: [record('a', { id: 'e1' })] }, context);
    expect(answer).toEqual({ batchItemFailures: [{ itemIdentifier: 'a' }] });
    expect(JSON.stringify(logger.lines)).toContain('could not set a failed message’s backoff');
  });

  it('refuses an invocation that is no batch of its queue (an event sent straight to the function)', async () => {
    let ran = 0;
    const { receipts } = receiptsOf([]);
    const { handler, logger } = handlerWith(async () => {
      ran++;
      return { status: 'processed' } as never;
    }, receipts);
    await expect(handler({ id: 'e1', 'detail-type': 'content.approved' } as never, context)).rejects.toThrow(
      /not a batch of the consumer’s queue/,
    );
    expect(ran).toBe(0);
    expect(JSON.stringify(logger.lines)).toContain('no batch of this consumer’s queue');
  });

  it('acts on nothing a forged invoke hands it: a receipt SQS does not know, or a record of another queue', async () => {
    let ran = 0;
    const { receipts, hides } = receiptsOf(['handle-real']);
    const { handler } = handlerWith(async () => {
      ran++;
      return { status: 'processed' } as never;
    }, receipts);
    const forged = record('forged', { id: 'e1', 'detail-type': 'content.approved' });
    const otherQueue = record('real', { id: 'e2' }, 1, 'arn:aws:sqs:us-east-1:123456789012:someone-elses');
    const answer = await handler({ Records: [forged, otherQueue] }, context);
    expect(ran).toBe(0);
    expect(hides).toEqual([]);
    expect(answer.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(['forged', 'real']);
  });
});

describe('SqsQueueReceipts', () => {
  const sqs = mockClient(SQSClient);
  beforeEach(() => sqs.reset());
  const receipts = new SqsQueueReceipts(new SQSClient({}), {
    url: 'https://q',
    visibilityTimeoutSeconds: 360,
  });

  it('confirms a receipt by setting the visibility the message already has', async () => {
    sqs.on(ChangeMessageVisibilityCommand).resolves({});
    expect(await receipts.confirm('h')).toBe(true);
    expect(sqs.commandCalls(ChangeMessageVisibilityCommand)[0]?.args[0].input).toEqual({
      QueueUrl: 'https://q',
      ReceiptHandle: 'h',
      VisibilityTimeout: 360,
    });
  });

  it('answers false for a receipt SQS does not know, and rethrows anything else', async () => {
    for (const name of ['ReceiptHandleIsInvalid', 'MessageNotInflight', 'InvalidParameterValue']) {
      sqs.reset();
      sqs.on(ChangeMessageVisibilityCommand).rejects(Object.assign(new Error(name), { name }));
      expect(await receipts.confirm('h'), name).toBe(false);
    }
    sqs.reset();
    sqs
      .on(ChangeMessageVisibilityCommand)
      .rejects(Object.assign(new Error('slow'), { name: 'RequestThrottled' }));
    await expect(receipts.confirm('h')).rejects.toThrow('slow');
  });

  it('hides a message for the seconds given', async () => {
    sqs.on(ChangeMessageVisibilityCommand).resolves({});
    await receipts.hide('h', 17);
    expect(sqs.commandCalls(ChangeMessageVisibilityCommand)[0]?.args[0].input.VisibilityTimeout).toBe(17);
    expect(sqs.commandCalls(SendMessageCommand)).toEqual([]);
  });
});
