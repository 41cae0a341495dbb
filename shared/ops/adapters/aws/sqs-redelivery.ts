import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { ConsumerName } from '../../../topology';
import type { ConsumerRedelivery } from '../../ops-ports';

/**
 * Re-sends a stored event to a consumer as its rules do: the EventBridge event as the body of a
 * message on the consumer's queue, so the queue's retries and dead letters apply as to any
 * delivery. The queue's policy lets this function's role send (and no one else but the rules).
 */
export class SqsRedelivery implements ConsumerRedelivery {
  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrls: Readonly<Record<ConsumerName, string>>,
  ) {}

  async redeliver(consumer: ConsumerName, event: unknown): Promise<void> {
    const queueUrl = this.queueUrls[consumer];
    if (!queueUrl) throw new Error(`no queue for consumer ${consumer}`);
    await this.sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify(event) }));
  }
}
