import { CloudWatchClient, DescribeAlarmsCommand, GetMetricDataCommand } from '@aws-sdk/client-cloudwatch';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { CloudWatchHealth } from '../../shared/ops/adapters/aws/cloudwatch-health';
import { consumerQueueRule, SqsDeadLetters } from '../../shared/ops/adapters/aws/sqs-dead-letters';
import { SqsRedelivery } from '../../shared/ops/adapters/aws/sqs-redelivery';

const sqs = mockClient(SQSClient);
const cloudwatch = mockClient(CloudWatchClient);

beforeEach(() => {
  sqs.reset();
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
const queueDlq = {
  url: 'https://sqs.us-east-1.amazonaws.com/123/notify-dead-letters',
  consumer: 'notify' as const,
  rule: consumerQueueRule,
};
const queueUrls = {
  index: 'https://sqs.us-east-1.amazonaws.com/123/index',
  notify: 'https://sqs.us-east-1.amazonaws.com/123/notify',
  archive: 'https://sqs.us-east-1.amazonaws.com/123/archive',
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
// A consumer queue's DLQ message is the message its queue received: the event, as its rule sent it.
const queueDlqMessage = (id: string, receipt: string) => ({
  MessageId: `m-${receipt}`,
  ReceiptHandle: receipt,
  Body: JSON.stringify(event(id)),
  Attributes: { SentTimestamp: '1764547200000', ApproximateReceiveCount: '40' },
});

describe('SqsRedelivery', () => {
  it('sends the event, as its rule does, to the consumer’s queue', async () => {
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm' });
    await new SqsRedelivery(new SQSClient({}), queueUrls).redeliver('archive', event('e1'));
    const sent = sqs.commandCalls(SendMessageCommand).map((c) => c.args[0].input);
    expect(sent).toEqual([{ QueueUrl: queueUrls.archive, MessageBody: JSON.stringify(event('e1')) }]);
  });

  it('fails on a consumer it has no queue for, and when SQS refuses', async () => {
    const redelivery = new SqsRedelivery(new SQSClient({}), { ...queueUrls, archive: '' });
    await expect(redelivery.redeliver('archive', event('e1'))).rejects.toThrow(
      /no queue for consumer archive/,
    );
    sqs.on(SendMessageCommand).rejects(Object.assign(new Error('denied'), { name: 'AccessDenied' }));
    await expect(redelivery.redeliver('index', event('e1'))).rejects.toThrow('denied');
  });
});

describe('SqsDeadLetters', () => {
  const redelivery = new SqsRedelivery(new SQSClient({}), queueUrls);

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

  it('lists both kinds of dead letter and makes each visible again right after', async () => {
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: dlq.url })
      .resolvesOnce({ Messages: [dlqMessage('e1', 'a')] })
      .resolves({});
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: queueDlq.url })
      .resolvesOnce({ Messages: [queueDlqMessage('e2', 'b')] })
      .resolves({});
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    const letters = await new SqsDeadLetters(new SQSClient({}), [dlq, queueDlq], redelivery).list(10);
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
        rule: consumerQueueRule,
        attempts: 0,
        error: expect.stringMatching(/^received as often as its queue’s redrive policy allows/),
        deadAt: '2025-12-01T00:00:00.000Z',
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

  it('skips a message whose body is no event', async () => {
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: queueDlq.url })
      .resolvesOnce({
        Messages: [
          { ...queueDlqMessage('e1', 'a'), Body: 'not json' },
          { ...queueDlqMessage('e2', 'b'), Body: '{"no":"id"}' },
          queueDlqMessage('e3', 'c'),
        ],
      })
      .resolves({});
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    const letters = await new SqsDeadLetters(new SQSClient({}), [queueDlq], redelivery).list(10);
    expect(letters.map((l) => l.id)).toEqual(['e3']);
  });

  it('redrives a letter by sending it to its consumer’s queue, and deletes it only after SQS took it', async () => {
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: dlq.url })
      .resolvesOnce({ Messages: [dlqMessage('e1', 'a'), dlqMessage('other', 'b')] })
      .resolves({});
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    sqs.on(DeleteMessageCommand).resolves({});
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm' });
    const redriven = await new SqsDeadLetters(new SQSClient({}), [dlq], redelivery).redrive({ id: 'e1' });
    expect(redriven).toBe(1);
    const sent = sqs.commandCalls(SendMessageCommand)[0]?.args[0].input;
    expect(sent?.QueueUrl).toBe(queueUrls.index);
    expect(JSON.parse(sent?.MessageBody as string)).toEqual(event('e1'));
    expect(sqs.commandCalls(DeleteMessageCommand).map((c) => c.args[0].input.ReceiptHandle)).toEqual(['a']);
    // The letter that was not asked for is released at once.
    const released = sqs
      .commandCalls(ChangeMessageVisibilityBatchCommand)
      .flatMap((c) => c.args[0].input.Entries);
    expect(released.map((e) => e?.ReceiptHandle)).toEqual(['b']);
  });

  it('keeps the message when the send is refused, and fails the redrive', async () => {
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: queueDlq.url })
      .resolvesOnce({ Messages: [queueDlqMessage('e2', 'b')] })
      .resolves({});
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    sqs.on(SendMessageCommand).rejects(Object.assign(new Error('throttled'), { name: 'RequestThrottled' }));
    await expect(
      new SqsDeadLetters(new SQSClient({}), [queueDlq], redelivery).redrive({ id: 'e2' }),
    ).rejects.toThrow('throttled');
    expect(sqs.commandCalls(DeleteMessageCommand)).toHaveLength(0);
  });

  it('redrives every letter of a queue in one pass (receive, send, delete) when asked for all', async () => {
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: dlq.url })
      .resolvesOnce({ Messages: [dlqMessage('e1', 'a'), dlqMessage('e3', 'c')] })
      .resolves({});
    sqs.on(ReceiveMessageCommand, { QueueUrl: queueDlq.url }).resolves({});
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    sqs.on(DeleteMessageCommand).resolves({});
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm' });
    expect(await new SqsDeadLetters(new SQSClient({}), [dlq, queueDlq], redelivery).redrive('all')).toBe(2);
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
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm' });
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
    sqs.on(SendMessageCommand).callsFake(async () => {
      now += 10_000;
      return { MessageId: 'm' };
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
    const store = new SqsDeadLetters(new SQSClient({}), [dlq, queueDlq], redelivery);
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
