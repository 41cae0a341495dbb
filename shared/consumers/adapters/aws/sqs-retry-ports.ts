import type { LambdaClient } from '@aws-sdk/client-lambda';
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { invokeAsync } from '../../../aws/invoke-async';
import { retryGaveUpAttribute } from '../../../ops/adapters/aws/sqs-dead-letters';
import { maxSqsDelaySeconds, type RetryPorts, retryDueAttribute } from '../../retries';

/**
 * The consumer retries' ports on AWS: the retry queue (SendMessage with `DelaySeconds`, a
 * data-plane call), the consumers' dead-letter queue, and Lambda's asynchronous invoke.
 */
export class SqsRetryPorts implements RetryPorts {
  constructor(
    private readonly sqs: SQSClient,
    private readonly lambda: LambdaClient,
    private readonly queues: { readonly retryQueueUrl: string; readonly deadLetterQueueUrl: string },
  ) {}

  async requeue(body: string, delaySeconds: number): Promise<void> {
    await this.sqs.send(
      new SendMessageCommand({
        QueueUrl: this.queues.retryQueueUrl,
        MessageBody: body,
        // The stack refuses a policy whose delay SQS cannot give (assertRetryDelayFitsSqs).
        DelaySeconds: Math.min(maxSqsDelaySeconds, Math.max(0, delaySeconds)),
        MessageAttributes: { [retryDueAttribute]: { DataType: 'String', StringValue: 'due' } },
      }),
    );
  }

  async deadLetter(body: string, reason: string): Promise<void> {
    await this.sqs.send(
      new SendMessageCommand({
        QueueUrl: this.queues.deadLetterQueueUrl,
        MessageBody: body,
        MessageAttributes: {
          [retryGaveUpAttribute]: { DataType: 'String', StringValue: reason.slice(0, 1_000) },
        },
      }),
    );
  }

  invoke(functionName: string, event: unknown): Promise<void> {
    return invokeAsync(this.lambda, functionName, event);
  }
}
