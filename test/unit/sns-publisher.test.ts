import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { messageFor, type Notification, notificationFor } from '../../functions/consumers/notify/effect';
import { SnsPublisher } from '../../shared/consumers/adapters/aws/sns-publisher';
import { pipelineCloudEvent } from '../../shared/events/schemas';
import { approvedRow, busEvent, rejectedRow, withdrawnRow } from '../support/dynamo-consumer-fixtures';

const sns = mockClient(SNSClient);
const topic = 'arn:aws:sns:us-east-1:123456789012:content-approvals';

function notification(overrides: Partial<Notification> = {}): Notification {
  const event = pipelineCloudEvent.parse(busEvent(approvedRow({ assignee: 'ana' })).detail);
  return { ...notificationFor(event), ...overrides } as Notification;
}

// The SNS adapter of a topic resource, with the notify consumer's messages (messageFor).
describe('SNS publisher', () => {
  beforeEach(() => sns.reset());

  const client = () => new SNSClient({ region: 'us-east-1', maxAttempts: 1 });
  const publish = (n: Notification, arn = topic) => new SnsPublisher(client(), arn).publish(messageFor(n));

  it('publishes the notification with event id and task id attributes for subscribers to dedupe on', async () => {
    sns.on(PublishCommand).resolves({ MessageId: 'm-1' });
    const n = notification();
    expect(await publish(n)).toBe('sent');
    const input = sns.commandCalls(PublishCommand)[0]?.args[0].input;
    expect(input).toMatchObject({
      TopicArn: topic,
      Subject: 'Approved: Spring launch copy',
      MessageAttributes: {
        eventId: { DataType: 'String', StringValue: n.eventId },
        taskId: { DataType: 'String', StringValue: n.taskId },
        assignee: { DataType: 'String', StringValue: 'ana' },
      },
    });
    expect(JSON.parse(input?.Message ?? '{}')).toEqual(n);
    // A standard topic has no dedupe id.
    expect(input?.MessageDeduplicationId).toBeUndefined();
  });

  it('publishes a subject SNS accepts for a title with line breaks, controls and a lone surrogate', async () => {
    sns.on(PublishCommand).resolves({ MessageId: 'm-1' });
    const title = `Spring\r\n\tlaunch\u0007 copy \ud800${'😀'.repeat(240)}`;
    await publish(notification({ title }));
    const input = sns.commandCalls(PublishCommand)[0]?.args[0].input;
    // 'Approved: Spring launch copy \uFFFD' is 30 code units; 34 emoji fill the 98 before the ellipsis.
    expect(input?.Subject).toBe(`Approved: Spring launch copy \uFFFD${'😀'.repeat(34)}…`);
    // The message keeps the title as it came.
    expect(JSON.parse(input?.Message ?? '{}').title).toBe(title);
  });

  it('on a FIFO topic, dedupes by event id and keeps one task in order', async () => {
    sns.on(PublishCommand).resolves({ MessageId: 'm-1' });
    const n = notification();
    await publish(n, `${topic}.fifo`);
    expect(sns.commandCalls(PublishCommand)[0]?.args[0].input).toMatchObject({
      MessageDeduplicationId: n.eventId,
      MessageGroupId: n.taskId,
    });
  });

  it('leaves out an empty assignee attribute (SNS refuses empty values)', async () => {
    sns.on(PublishCommand).resolves({});
    await publish(notification({ assignee: null }));
    expect(sns.commandCalls(PublishCommand)[0]?.args[0].input.MessageAttributes).not.toHaveProperty(
      'assignee',
    );
  });

  it('rethrows a failed publish with the cause', async () => {
    const throttled = Object.assign(new Error('Rate exceeded'), { name: 'ThrottledException' });
    sns.on(PublishCommand).rejects(throttled);
    const err = await publish(notification()).catch((e: unknown) => e);
    expect((err as Error).cause).toBe(throttled);
  });

  it('tells the assignee of a rejection, with who rejected it and why, under a "Rejected:" subject', async () => {
    sns.on(PublishCommand).resolves({ MessageId: 'm-2' });
    const row = rejectedRow({ reason: 'Off brand: see the style guide' });
    const n = notificationFor(pipelineCloudEvent.parse(busEvent(row).detail));

    expect(await publish(n)).toBe('sent');

    expect(n).toMatchObject({
      eventId: row.eventId,
      eventType: 'content.rejected',
      assignee: 'ana',
      reviewer: 'rita',
      reason: 'Off brand: see the style guide',
      rejectedAt: '2026-11-30T02:00:00.000Z',
    });
    expect(n.message).toBe(
      '"Spring launch copy" was rejected by rita: Off brand: see the style guide; assigned to ana',
    );
    const input = sns.commandCalls(PublishCommand)[0]?.args[0].input;
    expect(input?.Subject).toBe('Rejected: Spring launch copy');
    expect(input?.MessageAttributes?.eventType).toEqual({
      DataType: 'String',
      StringValue: 'content.rejected',
    });
  });

  it('has no notification for a withdrawal (not routed to notify)', () => {
    expect(() => notificationFor(pipelineCloudEvent.parse(busEvent(withdrawnRow()).detail))).toThrow(
      TypeError,
    );
  });
});
