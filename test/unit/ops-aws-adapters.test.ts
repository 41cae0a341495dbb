import { CloudWatchClient, DescribeAlarmsCommand, GetMetricDataCommand } from '@aws-sdk/client-cloudwatch';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { CloudWatchHealth } from '../../shared/ops/adapters/aws/cloudwatch-health';
import { LambdaRedelivery } from '../../shared/ops/adapters/aws/lambda-redelivery';
import {
  onFailureRule,
  retryGaveUpAttribute,
  SqsDeadLetters,
} from '../../shared/ops/adapters/aws/sqs-dead-letters';

const sqs = mockClient(SQSClient);
const lambda = mockClient(LambdaClient);
const cloudwatch = mockClient(CloudWatchClient);

beforeEach(() => {
  sqs.reset();
  lambda.reset();
  cloudwatch.reset();
});

const event = (id: string) => ({
  version: '0',
  id,
  'detail-type': 'content.approved',
  source: 'content.pipeline',
  detail: {},
});
const dlq = {
  url: 'https://sqs.us-east-1.amazonaws.com/123/dlq',
  consumer: 'index' as const,
  rule: 'content-approved',
};
const onFailure = {
  url: 'https://sqs.us-east-1.amazonaws.com/123/of',
  consumer: 'notify' as const,
  rule: onFailureRule,
};

// A rule target DLQ message is the event, the error in attributes (eb-rule-dlq.html).
const dlqMessage = (id: string, receipt: string) => ({
  MessageId: `m-${receipt}`,
  ReceiptHandle: receipt,
  Body: JSON.stringify(event(id)),
  Attributes: { SentTimestamp: '1764547200000' },
  MessageAttributes: {
    ERROR_CODE: { DataType: 'String', StringValue: 'SDK_CLIENT_ERROR' },
    ERROR_MESSAGE: { DataType: 'String', StringValue: 'Rate exceeded' },
    RETRY_ATTEMPTS: { DataType: 'Number', StringValue: '185' },
  },
});
// An on-failure record is Lambda's invocation record, the event in requestPayload.
const onFailureMessage = (id: string, receipt: string) => ({
  MessageId: `m-${receipt}`,
  ReceiptHandle: receipt,
  Body: JSON.stringify({
    version: '1.0',
    timestamp: '2026-11-30T12:00:00.000Z',
    requestContext: {
      requestId: 'r',
      functionArn: 'arn',
      condition: 'RetriesExhausted',
      approximateInvokeCount: 3,
    },
    requestPayload: event(id),
    responseContext: { statusCode: 200, executedVersion: '$LATEST', functionError: 'Unhandled' },
    responsePayload: { errorType: 'InboxInProgressError', errorMessage: 'another attempt holds the lease' },
  }),
  Attributes: { SentTimestamp: '1764547200000' },
});

describe('SqsDeadLetters', () => {
  const redelivery = new LambdaRedelivery(new LambdaClient({}), {
    index: 'fn-index',
    notify: 'fn-notify',
    archive: 'fn-archive',
  });

  it("a consumer's queue is shared by its rules: each message is listed under the rule its RULE_ARN names", async () => {
    const withdrawn = dlqMessage('e3', 'c');
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: dlq.url })
      .resolvesOnce({
        Messages: [
          {
            ...withdrawn,
            MessageAttributes: {
              ...withdrawn.MessageAttributes,
              RULE_ARN: {
                DataType: 'String',
                StringValue: 'arn:aws:events:us-east-1:123:rule/content-bus/stack-sandbox-content-withdrawn',
              },
            },
          },
          dlqMessage('e4', 'd'),
        ],
      })
      .resolves({});
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    const letters = await new SqsDeadLetters(new SQSClient({}), [dlq], redelivery).list(10);
    // The first names the withdrawn rule; the second names none, so it is the queue's (its first rule).
    expect(letters.map((l) => [l.id, l.rule])).toEqual([
      ['e3', 'content-withdrawn'],
      ['e4', 'content-approved'],
    ]);
  });

  it('lists both kinds of message and makes each visible again right after', async () => {
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: dlq.url })
      .resolvesOnce({ Messages: [dlqMessage('e1', 'a')] })
      .resolves({});
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: onFailure.url })
      .resolvesOnce({ Messages: [onFailureMessage('e2', 'b')] })
      .resolves({});
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    const letters = await new SqsDeadLetters(new SQSClient({}), [dlq, onFailure], redelivery).list(10);
    expect(letters).toEqual([
      {
        id: 'e1',
        consumer: 'index',
        rule: 'content-approved',
        attempts: 185,
        error: 'SDK_CLIENT_ERROR: Rate exceeded',
        deadAt: '2025-12-01T00:00:00.000Z',
        event: event('e1'),
      },
      {
        id: 'e2',
        consumer: 'notify',
        rule: onFailureRule,
        attempts: 3,
        error: 'InboxInProgressError: another attempt holds the lease',
        deadAt: '2026-11-30T12:00:00.000Z',
        event: event('e2'),
      },
    ]);
    const released = sqs
      .commandCalls(ChangeMessageVisibilityBatchCommand)
      .flatMap((c) => c.args[0].input.Entries);
    expect(released.map((e) => [e?.ReceiptHandle, e?.VisibilityTimeout])).toEqual([
      ['a', 0],
      ['b', 0],
    ]);
  });

  it('reads the consumers’ shared dead letters: each message’s consumer from its function, the retries’ reason first', async () => {
    const shared = {
      url: 'https://sqs.us-east-1.amazonaws.com/123/consumer-dead-letters',
      rule: onFailureRule,
    };
    const fromFunction = (id: string, receipt: string, fn: string) => {
      const m = onFailureMessage(id, receipt);
      const body = JSON.parse(m.Body);
      body.requestContext.functionArn = `arn:aws:lambda:us-east-1:123:function:${fn}:$LATEST`;
      return {
        ...m,
        Body: JSON.stringify(body),
        MessageAttributes: {
          [retryGaveUpAttribute]: { DataType: 'String', StringValue: 'retried for 1441 min' },
        },
      };
    };
    const page = {
      Messages: [
        fromFunction('e1', 'a', 'fn-notify'),
        fromFunction('e1', 'b', 'fn-archive'),
        fromFunction('e2', 'c', 'fn-unknown'),
      ],
    };
    // Read twice: once by the list, once by the redrive.
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: shared.url })
      .resolvesOnce(page)
      .resolvesOnce({})
      .resolvesOnce(page)
      .resolves({});
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    sqs.on(DeleteMessageCommand).resolves({});
    lambda.on(InvokeCommand).resolves({ StatusCode: 202 });
    const store = new SqsDeadLetters(new SQSClient({}), [shared], redelivery, {
      consumerFunctions: { index: 'fn-index', notify: 'fn-notify', archive: 'fn-archive' },
    });

    const letters = await store.list(10);
    expect(letters.map((l) => [l.id, l.consumer, l.error])).toEqual([
      [
        'e1',
        'notify',
        'retried for 1441 min; last error InboxInProgressError: another attempt holds the lease',
      ],
      [
        'e1',
        'archive',
        'retried for 1441 min; last error InboxInProgressError: another attempt holds the lease',
      ],
    ]);
    // A redrive of one consumer's copy re-invokes that consumer and deletes only its message.
    expect(await store.redrive({ id: 'e1', consumer: 'archive' })).toBe(1);
    expect(lambda.commandCalls(InvokeCommand).map((c) => c.args[0].input.FunctionName)).toEqual([
      'fn-archive',
    ]);
    expect(sqs.commandCalls(DeleteMessageCommand).map((c) => c.args[0].input.ReceiptHandle)).toEqual(['b']);
  });

  it('redrives a letter by re-invoking its consumer, and deletes it only after Lambda accepted', async () => {
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: dlq.url })
      .resolvesOnce({ Messages: [dlqMessage('e1', 'a'), dlqMessage('other', 'b')] })
      .resolves({});
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    sqs.on(DeleteMessageCommand).resolves({});
    lambda.on(InvokeCommand).resolves({ StatusCode: 202 });
    const redriven = await new SqsDeadLetters(new SQSClient({}), [dlq], redelivery).redrive({ id: 'e1' });
    expect(redriven).toBe(1);
    const invoke = lambda.commandCalls(InvokeCommand)[0]?.args[0].input;
    expect(invoke).toMatchObject({ FunctionName: 'fn-index', InvocationType: 'Event' });
    expect(JSON.parse(new TextDecoder().decode(invoke?.Payload as Uint8Array))).toEqual(event('e1'));
    expect(sqs.commandCalls(DeleteMessageCommand).map((c) => c.args[0].input.ReceiptHandle)).toEqual(['a']);
    // The letter that was not asked for is released at once.
    const released = sqs
      .commandCalls(ChangeMessageVisibilityBatchCommand)
      .flatMap((c) => c.args[0].input.Entries);
    expect(released.map((e) => e?.ReceiptHandle)).toEqual(['b']);
  });

  it('keeps the message when the invoke is refused, and fails the redrive', async () => {
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: onFailure.url })
      .resolvesOnce({ Messages: [onFailureMessage('e2', 'b')] })
      .resolves({});
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    lambda.on(InvokeCommand).resolves({ StatusCode: 500 });
    await expect(
      new SqsDeadLetters(new SQSClient({}), [onFailure], redelivery).redrive({ id: 'e2' }),
    ).rejects.toThrow(/answered status 500/);
    expect(sqs.commandCalls(DeleteMessageCommand)).toHaveLength(0);
  });

  it('redrives every letter of a queue in one pass (receive, invoke, delete) when asked for all', async () => {
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: dlq.url })
      .resolvesOnce({ Messages: [dlqMessage('e1', 'a'), dlqMessage('e3', 'c')] })
      .resolves({});
    sqs.on(ReceiveMessageCommand, { QueueUrl: onFailure.url }).resolves({});
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    sqs.on(DeleteMessageCommand).resolves({});
    lambda.on(InvokeCommand).resolves({ StatusCode: 202 });
    expect(await new SqsDeadLetters(new SQSClient({}), [dlq, onFailure], redelivery).redrive('all')).toBe(2);
    expect(sqs.commandCalls(DeleteMessageCommand).map((c) => c.args[0].input.ReceiptHandle)).toEqual([
      'a',
      'c',
    ]);
    // One long poll per queue, then short ones: a list or redrive stays within API Gateway's 29 s.
    expect(sqs.commandCalls(ReceiveMessageCommand).map((c) => c.args[0].input.WaitTimeSeconds)).toEqual([
      1, 0, 1,
    ]);
  });

  it('leaves, in a redrive of all, a letter that arrived after deadBefore (one it redrove that died again)', async () => {
    const again = { ...dlqMessage('e1', 'c'), Attributes: { SentTimestamp: '1764547300000' } };
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: dlq.url })
      .resolvesOnce({ Messages: [dlqMessage('e1', 'a'), again] })
      .resolves({});
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    sqs.on(DeleteMessageCommand).resolves({});
    lambda.on(InvokeCommand).resolves({ StatusCode: 202 });
    const store = new SqsDeadLetters(new SQSClient({}), [dlq], redelivery);
    expect(await store.redrive('all', Number.POSITIVE_INFINITY, 1764547250000)).toBe(1);
    expect(sqs.commandCalls(DeleteMessageCommand).map((c) => c.args[0].input.ReceiptHandle)).toEqual(['a']);
    const released = sqs
      .commandCalls(ChangeMessageVisibilityBatchCommand)
      .flatMap((c) => c.args[0].input.Entries);
    expect(released.map((e) => e?.ReceiptHandle)).toEqual(['c']);
  });

  it('stops a redrive of all at its deadline and makes the rest visible again', async () => {
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: dlq.url })
      .resolvesOnce({ Messages: [dlqMessage('e1', 'a'), dlqMessage('e3', 'c')] })
      .resolves({});
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    sqs.on(DeleteMessageCommand).resolves({});
    let now = 1_000;
    lambda.on(InvokeCommand).callsFake(async () => {
      now += 10_000;
      return { StatusCode: 202 };
    });
    const spy = vi.spyOn(Date, 'now').mockImplementation(() => now);
    try {
      expect(await new SqsDeadLetters(new SQSClient({}), [dlq], redelivery).redrive('all', 5_000)).toBe(1);
    } finally {
      spy.mockRestore();
    }
    const released = sqs
      .commandCalls(ChangeMessageVisibilityBatchCommand)
      .flatMap((c) => c.args[0].input.Entries);
    expect(released.map((e) => e?.ReceiptHandle)).toEqual(['c']);
  });

  it('redrives only the named consumer’s letters, and counts visible and in-flight messages', async () => {
    sqs.on(ReceiveMessageCommand).resolves({});
    sqs.on(GetQueueAttributesCommand).resolves({
      Attributes: { ApproximateNumberOfMessages: '2', ApproximateNumberOfMessagesNotVisible: '1' },
    });
    const store = new SqsDeadLetters(new SQSClient({}), [dlq, onFailure], redelivery);
    expect(await store.redrive({ id: 'e1', consumer: 'archive' })).toBe(0);
    expect(sqs.commandCalls(ReceiveMessageCommand)).toHaveLength(0);
    expect(await store.count()).toBe(6);
  });
});

describe('CloudWatchHealth', () => {
  it('reads the stack’s alarms by name (what its grant allows) and keys them without the stack prefix', async () => {
    cloudwatch
      .on(DescribeAlarmsCommand)
      .resolvesOnce({
        MetricAlarms: [{ AlarmName: 'ContentPipeline-sandbox-relay-silent', StateValue: 'ALARM' }],
        NextToken: 't',
      })
      .resolvesOnce({
        MetricAlarms: [{ AlarmName: 'ContentPipeline-sandbox-outbox-dead', StateValue: 'OK' }],
      });
    const names = ['ContentPipeline-sandbox-relay-silent', 'ContentPipeline-sandbox-outbox-dead'];
    const health = new CloudWatchHealth(new CloudWatchClient({}), {
      alarmPrefix: 'ContentPipeline-sandbox-',
      alarmNames: names,
      relayFunctionName: 'relay',
    });
    expect(await health.alarms()).toEqual({ 'relay-silent': 'ALARM', 'outbox-dead': 'OK' });
    const input = cloudwatch.commandCalls(DescribeAlarmsCommand)[0]?.args[0].input;
    // By prefix, IAM would check alarm:* — more than the ops function is granted.
    expect(input?.AlarmNames).toEqual(names);
    expect(input?.AlarmNamePrefix).toBeUndefined();
  });

  it('reads the relay’s last run and errors from its Lambda metrics', async () => {
    const at = (m: number) => new Date(Date.UTC(2026, 11, 1, 10, m));
    cloudwatch.on(GetMetricDataCommand).resolves({
      MetricDataResults: [
        { Id: 'invocations', Timestamps: [at(30), at(20), at(10)], Values: [0, 2, 1] },
        { Id: 'errors', Timestamps: [at(20)], Values: [1] },
      ],
    });
    const health = new CloudWatchHealth(new CloudWatchClient({}), {
      alarmPrefix: 'p-',
      alarmNames: [],
      relayFunctionName: 'relay-fn',
      clock: () => at(40).getTime(),
    });
    expect(await health.relay()).toEqual({ lastRunAt: at(20).toISOString(), errors: 1 });
    const query = cloudwatch.commandCalls(GetMetricDataCommand)[0]?.args[0].input;
    expect(query?.MetricDataQueries?.[0]?.MetricStat?.Metric?.Dimensions).toEqual([
      { Name: 'FunctionName', Value: 'relay-fn' },
    ]);
  });
});
