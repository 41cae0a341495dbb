import { ReceiveMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SqsQueueReceipts } from '../../shared/consumers/adapters/aws/sqs-queue-receipts';
import { CallRecorder } from '../support/aws/calls';
import { type SqsStandin, startSqsStandin } from '../support/aws/sqs';

// SqsQueueReceipts over the SQS stand-in, which answers ChangeMessageVisibility as SQS documents
// (ReceiptHandleIsInvalid for a handle never issued, InvalidParameterValue for one a later receive
// replaced, MessageNotInflight for a message visible again): what a consumer takes as proof that
// its queue handed a record over, and how it sets a failed message's backoff.

describe('SqsQueueReceipts on the SQS stand-in', () => {
  let clock = Date.parse('2026-12-01T00:00:00.000Z');
  let sqs: SqsStandin;
  let client: SQSClient;
  let queue = '';
  let queues = 0;
  const visibilityTimeoutSeconds = 360;

  beforeAll(async () => {
    sqs = await startSqsStandin({ recorder: new CallRecorder(), now: () => clock, sentClock: Date.now });
    client = new SQSClient({
      endpoint: sqs.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'consumer', secretAccessKey: 'local' },
    });
  });
  afterAll(async () => {
    client?.destroy();
    await sqs?.close();
  });
  beforeEach(() => {
    queue = `consumer-${++queues}`;
    sqs.createQueue({ name: queue, visibilityTimeoutSeconds });
  });

  const receipts = () => new SqsQueueReceipts(client, { url: sqs.queueUrl(queue), visibilityTimeoutSeconds });
  const send = () =>
    client.send(new SendMessageCommand({ QueueUrl: sqs.queueUrl(queue), MessageBody: '{}' }));
  /** One receive, hidden `seconds` (the mapping's receive uses the queue's timeout). */
  async function receive(seconds?: number): Promise<string | undefined> {
    const out = await client.send(
      new ReceiveMessageCommand({ QueueUrl: sqs.queueUrl(queue), VisibilityTimeout: seconds }),
    );
    return out.Messages?.[0]?.ReceiptHandle;
  }

  it('confirms a handle its queue issued, setting the message’s visibility back to the queue’s timeout', async () => {
    await send();
    const handle = await receive(30);
    clock += 20_000;
    expect(await receipts().confirm(handle as string)).toBe(true);
    // Past the receive's 30 s, within the queue's 360 s from the confirm: still in flight.
    clock += 300_000;
    expect(sqs.messages(queue)[0]).toMatchObject({ inFlight: true, receiveCount: 1 });
    expect(await receive()).toBeUndefined();
  });

  it('does not confirm a handle SQS never issued (a forged invoke)', async () => {
    await send();
    await receive();
    expect(await receipts().confirm('AQEBforgedReceiptHandle')).toBe(false);
  });

  it('does not confirm a handle a later receive replaced, and confirms the new one', async () => {
    await send();
    const first = await receive(10);
    clock += 11_000;
    const second = await receive();
    expect(second).toBeDefined();
    expect(await receipts().confirm(first as string)).toBe(false);
    expect(await receipts().confirm(second as string)).toBe(true);
  });

  it('does not confirm a message that is visible again (its visibility ran out)', async () => {
    await send();
    const handle = await receive(10);
    clock += 11_000;
    expect(await receipts().confirm(handle as string)).toBe(false);
  });

  it('hides a failed message for its backoff: received again only after it', async () => {
    await send();
    const handle = await receive();
    await receipts().hide(handle as string, 45);
    clock += 44_000;
    expect(await receive()).toBeUndefined();
    clock += 2_000;
    expect(await receive()).toBeDefined();
    expect(sqs.messages(queue)[0]?.receiveCount).toBe(2);
  });

  it('rethrows what is not about the receipt (a queue that does not exist)', async () => {
    await send();
    const handle = await receive();
    const elsewhere = new SqsQueueReceipts(client, {
      url: sqs.queueUrl('no-such-queue'),
      visibilityTimeoutSeconds,
    });
    await expect(elsewhere.confirm(handle as string)).rejects.toMatchObject({
      name: expect.stringMatching(/NonExistentQueue|QueueDoesNotExist/),
    });
  });
});
