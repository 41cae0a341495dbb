import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { RelayWakeups, WakeReason } from './relay-invocation';

/**
 * SQS's longest delivery delay, in seconds: a wake-up further out is sent for then, and the run
 * it starts finds nothing due yet and sends the next one.
 * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html
 */
export const maxWakeDelaySeconds = 900;

/**
 * The relay's wake-ups on AWS: a message on the relay's wake queue, delayed until the rows are
 * due (`DelaySeconds`), which the queue's event source mapping hands to the relay function.
 * SendMessage is a data-plane call (thousands a second per queue) where the busy sweep it
 * replaces switched an EventBridge rule on and off with control-plane calls on every run.
 */
export class SqsRelayWakeups implements RelayWakeups {
  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
  ) {}

  async wakeAfter(ms: number, reason: WakeReason): Promise<void> {
    const delay = Math.min(maxWakeDelaySeconds, Math.max(0, Math.ceil(ms / 1_000)));
    await this.sqs.send(
      new SendMessageCommand({
        QueueUrl: this.queueUrl,
        MessageBody: JSON.stringify({ wake: reason }),
        DelaySeconds: delay,
      }),
    );
  }
}
