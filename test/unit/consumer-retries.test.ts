import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { SqsRetryPorts } from '../../shared/consumers/adapters/aws/sqs-retry-ports';
import {
  assertRetryDelayFitsSqs,
  createConsumerRetries,
  type RetryPorts,
  retryAgeLimitMs,
  retryDelaySeconds,
  retryDueAttribute,
} from '../../shared/consumers/retries';
import { retryGaveUpAttribute } from '../../shared/ops/adapters/aws/sqs-dead-letters';
import { topology } from '../../shared/topology';

// The consumer retries on AWS (shared/consumers/retries.ts): Lambda's on-failure record of a
// consumer is delayed by the backoff cap, then the consumer is invoked again, until the event
// is its maximum age (plus a backoff) old; then, and only then, a person is needed.

const functions = { index: 'fn-index', notify: 'fn-notify', archive: 'fn-archive' } as const;
const now = Date.parse('2026-12-02T12:00:00Z');
const policy = topology.consumers.notify;

function onFailure(functionName: string, eventTime: string | undefined) {
  return JSON.stringify({
    version: '1.0',
    timestamp: new Date(now).toISOString(),
    requestContext: {
      requestId: 'r-1',
      functionArn: `arn:aws:lambda:us-east-1:123456789012:function:${functionName}:$LATEST`,
      condition: 'RetriesExhausted',
      approximateInvokeCount: 3,
    },
    requestPayload: { id: 'bus-1', source: 'content.pipeline', ...(eventTime ? { time: eventTime } : {}) },
    responseContext: { statusCode: 200, executedVersion: '$LATEST', functionError: 'Unhandled' },
    responsePayload: { errorType: 'ServiceUnavailable', errorMessage: 'SNS is down' },
  });
}

function sqsRecord(body: string, due = false, messageId = 'm-1'): SQSRecord {
  return {
    messageId,
    body,
    messageAttributes: due ? { [retryDueAttribute]: { stringValue: 'due', dataType: 'String' } } : {},
  } as unknown as SQSRecord;
}

function recordingPorts(fail: Partial<Record<keyof RetryPorts, boolean>> = {}) {
  const calls: { port: keyof RetryPorts; args: unknown[] }[] = [];
  const port =
    (name: keyof RetryPorts) =>
    async (...args: unknown[]) => {
      calls.push({ port: name, args });
      if (fail[name]) throw new Error(`${name} failed`);
    };
  const ports: RetryPorts = {
    requeue: port('requeue'),
    deadLetter: port('deadLetter'),
    invoke: port('invoke'),
  };
  return { ports, calls };
}

const quiet = { warn: () => {}, info: () => {} };

function retriesWith(ports: RetryPorts) {
  return createConsumerRetries({
    ports,
    consumerFunctions: functions,
    clock: () => now,
    random: () => 0.5,
    logger: quiet,
  });
}

const event = (...records: SQSRecord[]): SQSEvent => ({ Records: records });

describe('consumer retries', () => {
  it('delay a fresh on-failure record by the consumer’s backoff cap, marked due, instead of waiting for a person', async () => {
    const { ports, calls } = recordingPorts();
    const body = onFailure('fn-notify', new Date(now - 10 * 60_000).toISOString());

    const out = await retriesWith(ports)(event(sqsRecord(body)));

    expect(out.batchItemFailures).toEqual([]);
    expect(calls).toEqual([{ port: 'requeue', args: [body, 61] }]);
    expect(retryDelaySeconds(policy, () => 0.5)).toBe(Math.ceil((policy.backoff.maxMs + 500) / 1000));
  });

  it('invoke the consumer again with the original event once the delay is over', async () => {
    const { ports, calls } = recordingPorts();
    const body = onFailure('fn-archive', new Date(now - 10 * 60_000).toISOString());

    await retriesWith(ports)(event(sqsRecord(body, true)));

    expect(calls).toEqual([{ port: 'invoke', args: ['fn-archive', JSON.parse(body).requestPayload] }]);
  });

  it('give up, to the dead letters with the reason, once the event is its maximum age plus a backoff old', async () => {
    const { ports, calls } = recordingPorts();
    const young = onFailure('fn-index', new Date(now - retryAgeLimitMs(policy) + 1_000).toISOString());
    const old = onFailure('fn-index', new Date(now - retryAgeLimitMs(policy)).toISOString());

    await retriesWith(ports)(event(sqsRecord(young, false, 'young'), sqsRecord(old, false, 'old')));

    expect(calls.map((c) => c.port)).toEqual(['requeue', 'deadLetter']);
    expect(calls[1]?.args[0]).toBe(old);
    expect(String(calls[1]?.args[1])).toMatch(/retried for 1441 min .* the inbox could record none/);
    expect(retryAgeLimitMs(policy)).toBe(24 * 3600_000 + 60_000);
  });

  it('send what it cannot read, or a function no consumer has, to the dead letters', async () => {
    const { ports, calls } = recordingPorts();

    await retriesWith(ports)(
      event(
        sqsRecord('not json', false, 'a'),
        sqsRecord(JSON.stringify({ hello: 'world' }), false, 'b'),
        sqsRecord(onFailure('someone-else', new Date(now).toISOString()), true, 'c'),
        sqsRecord(onFailure('fn-notify', undefined), false, 'd'),
      ),
    );

    expect(calls.map((c) => c.port)).toEqual(['deadLetter', 'deadLetter', 'deadLetter', 'deadLetter']);
    expect(String(calls[2]?.args[1])).toContain('someone-else is no consumer');
    expect(String(calls[3]?.args[1])).toContain('no time');
  });

  it('report only the records it could not handle, so the queue hands just those over again', async () => {
    const { ports } = recordingPorts({ invoke: true });
    const fresh = onFailure('fn-notify', new Date(now).toISOString());

    const out = await retriesWith(ports)(
      event(sqsRecord(fresh, true, 'due'), sqsRecord(fresh, false, 'fresh')),
    );

    expect(out.batchItemFailures).toEqual([{ itemIdentifier: 'due' }]);
  });
});

describe('consumer retries on SQS and Lambda (SqsRetryPorts)', () => {
  const sqs = mockClient(SQSClient);
  const lambda = mockClient(LambdaClient);
  const queues = { retryQueueUrl: 'https://sqs/retry', deadLetterQueueUrl: 'https://sqs/dead' };
  beforeEach(() => {
    sqs.reset();
    lambda.reset();
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm' });
    lambda.on(InvokeCommand).resolves({ StatusCode: 202 });
  });

  it('requeues marked due with the delay, gives up with the reason, and invokes asynchronously', async () => {
    const ports = new SqsRetryPorts(new SQSClient({}), new LambdaClient({}), queues);

    await ports.requeue('{"a":1}', 61);
    await ports.deadLetter('{"b":2}', 'x'.repeat(2_000));
    await ports.invoke('fn-notify', { id: 'e1' });

    const [requeued, dead] = sqs.commandCalls(SendMessageCommand).map((c) => c.args[0].input);
    expect(requeued).toMatchObject({
      QueueUrl: queues.retryQueueUrl,
      MessageBody: '{"a":1}',
      DelaySeconds: 61,
    });
    expect(requeued?.MessageAttributes?.[retryDueAttribute]?.StringValue).toBe('due');
    expect(dead).toMatchObject({ QueueUrl: queues.deadLetterQueueUrl, MessageBody: '{"b":2}' });
    expect(dead?.MessageAttributes?.[retryGaveUpAttribute]?.StringValue).toHaveLength(1_000);
    const [invoked] = lambda.commandCalls(InvokeCommand).map((c) => c.args[0].input);
    expect(invoked).toMatchObject({ FunctionName: 'fn-notify', InvocationType: 'Event' });
  });

  it('refuses a consumer policy whose retry delay is longer than SQS delays a message (15 minutes)', () => {
    const fits = { ...policy, backoff: { baseMs: 1_000, maxMs: 899_000 } };
    const tooLong = { ...policy, backoff: { baseMs: 1_000, maxMs: 15 * 60_000 } };

    expect(() => assertRetryDelayFitsSqs('notify', fits)).not.toThrow();
    expect(() => assertRetryDelayFitsSqs('notify', tooLong)).toThrow(/up to 901 s .*\(900 s\)/);
    expect(() => assertRetryDelayFitsSqs('notify', policy)).not.toThrow();
  });
});
