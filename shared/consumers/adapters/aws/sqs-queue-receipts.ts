import { ChangeMessageVisibilityCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { QueueReceipts } from '../../queue-delivery';

/**
 * SQS's answers when it does not know a receipt handle for a message in flight: a handle never
 * issued, or one issued by an earlier receive of a message received again since
 * (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html).
 */
const unknownReceipt = new Set([
  'ReceiptHandleIsInvalid',
  'AWS.SimpleQueueService.ReceiptHandleIsInvalid',
  'MessageNotInflight',
  'AWS.SimpleQueueService.MessageNotInflight',
  'InvalidParameterValue',
]);

/** A consumer's queue receipts on AWS: ChangeMessageVisibility, a data-plane call on its own queue. */
export class SqsQueueReceipts implements QueueReceipts {
  constructor(
    private readonly sqs: SQSClient,
    private readonly queue: { readonly url: string; readonly visibilityTimeoutSeconds: number },
  ) {}

  async confirm(receiptHandle: string): Promise<boolean> {
    try {
      // To the visibility the message already has: the call proves the receipt, and changes nothing.
      await this.hide(receiptHandle, this.queue.visibilityTimeoutSeconds);
      return true;
    } catch (err) {
      if (unknownReceipt.has((err as { name?: string }).name ?? '')) return false;
      throw err;
    }
  }

  async hide(receiptHandle: string, seconds: number): Promise<void> {
    await this.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: this.queue.url,
        ReceiptHandle: receiptHandle,
        VisibilityTimeout: seconds,
      }),
    );
  }
}
