import { randomUUID } from 'node:crypto';
import { type Message, ReceiveMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import type { QueueReceipts } from '../../shared/consumers/queue-delivery';
import type { SqsStandin } from './aws/sqs';

/** The ARN of a consumer's queue in tests: the account and region the fixtures use. */
export const consumerQueueArn = (consumer: string): string =>
  `arn:aws:sqs:us-east-1:123456789012:content-pipeline-${consumer}`;

/** One receive's hide: a failed message's backoff, or a confirm's reset to the queue's timeout. */
export interface RecordedHide {
  readonly receiptHandle: string;
  readonly seconds: number;
}

/**
 * A consumer's queue as its event source mapping hands messages to the function, and as
 * ChangeMessageVisibility answers for them: each receive of a message issues a new receipt
 * handle and forgets the one before (SQS refuses a stale handle), `confirm` knows only the
 * current handles, and `hide` records the backoff a failed message is given. A handle SQS never
 * issued (a forged invoke) is unknown.
 */
export class FakeConsumerQueue implements QueueReceipts {
  /** Every `hide` call, in order (a `confirm` is not one). */
  readonly hides: RecordedHide[] = [];
  /** Every handle `confirm` was asked about, in order. */
  readonly confirmed: string[] = [];
  /** Set to make `hide` fail (SQS unreachable); `confirm` still answers. */
  hideFails: Error | undefined;
  private readonly current = new Map<string, string>();
  private readonly receives = new Map<string, number>();

  constructor(readonly arn: string) {}

  /**
   * One receive of a message whose body is `event` as JSON (or `body` as given): a record with a
   * fresh receipt handle and the message's receive count so far. Receiving `messageId` again
   * makes its earlier handles stale.
   */
  receive(event: unknown, options: { readonly messageId?: string; readonly body?: string } = {}): SQSRecord {
    const messageId = options.messageId ?? randomUUID();
    const receiveCount = (this.receives.get(messageId) ?? 0) + 1;
    this.receives.set(messageId, receiveCount);
    const receiptHandle = `receipt-${messageId}-${receiveCount}-${randomUUID()}`;
    this.current.set(messageId, receiptHandle);
    return sqsRecord({
      arn: this.arn,
      messageId,
      receiptHandle,
      receiveCount,
      body: options.body ?? JSON.stringify(event),
    });
  }

  async confirm(receiptHandle: string): Promise<boolean> {
    this.confirmed.push(receiptHandle);
    return [...this.current.values()].includes(receiptHandle);
  }

  async hide(receiptHandle: string, seconds: number): Promise<void> {
    if (this.hideFails) throw this.hideFails;
    this.hides.push({ receiptHandle, seconds });
  }
}

/** An SQS record as Lambda's event source mapping builds it from one received message. */
export function sqsRecord(fields: {
  readonly arn: string;
  readonly body: string;
  readonly messageId?: string;
  readonly receiptHandle?: string;
  readonly receiveCount?: number;
  readonly sentTimestamp?: number;
}): SQSRecord {
  const sent = String(fields.sentTimestamp ?? Date.now());
  return {
    messageId: fields.messageId ?? randomUUID(),
    receiptHandle: fields.receiptHandle ?? `receipt-${randomUUID()}`,
    body: fields.body,
    attributes: {
      ApproximateReceiveCount: String(fields.receiveCount ?? 1),
      SentTimestamp: sent,
      SenderId: 'AIDAEVENTBRIDGE',
      ApproximateFirstReceiveTimestamp: sent,
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: fields.arn,
    awsRegion: fields.arn.split(':')[3] ?? 'us-east-1',
  };
}

/** The record Lambda would build from a message a ReceiveMessage returned (the SQS stand-in's). */
export function recordOfMessage(message: Message, queueArn: string): SQSRecord {
  return sqsRecord({
    arn: queueArn,
    body: message.Body ?? '',
    messageId: message.MessageId,
    receiptHandle: message.ReceiptHandle,
    receiveCount: Number(message.Attributes?.ApproximateReceiveCount ?? 1),
    sentTimestamp: Number(message.Attributes?.SentTimestamp ?? Date.now()),
  });
}

/** A batch as the event source mapping invokes the function with. */
export const sqsEvent = (...records: SQSRecord[]): SQSEvent => ({ Records: records });

/**
 * Sends `event` to `queue` on the SQS stand-in as a rule target would (the event as JSON) and
 * receives it as the event source mapping would: the record the function gets, with a receipt
 * handle the stand-in issued (ChangeMessageVisibility takes it while the message is in flight).
 */
export async function sendAndReceive(sqs: SqsStandin, queue: string, event: unknown): Promise<SQSRecord> {
  const client = new SQSClient({
    endpoint: sqs.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'eventbridge', secretAccessKey: 'local' },
  });
  try {
    const QueueUrl = sqs.queueUrl(queue);
    await client.send(new SendMessageCommand({ QueueUrl, MessageBody: JSON.stringify(event) }));
    const { Messages } = await client.send(
      new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 1, MessageSystemAttributeNames: ['All'] }),
    );
    const message = Messages?.[0];
    if (!message) throw new Error(`the SQS stand-in returned no message from ${queue}`);
    return recordOfMessage(message, sqs.queueArn(queue));
  } finally {
    client.destroy();
  }
}
