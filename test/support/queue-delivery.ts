import { ReceiveMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { consumerQueueEnv } from '../../shared/consumers/contract';
import { CallRecorder } from './aws/calls';
import { type SqsStandin, startSqsStandin } from './aws/sqs';

/**
 * A consumer's queue as its function meets it on AWS: the SQS stand-in holding the queue, the
 * environment the stack gives the function, and `deliver`, which sends events to the queue as
 * its rule does and receives them as the event source mapping does, returning the SQS event
 * Lambda would invoke the function with (real receipt handles, so the handler's receipt check
 * passes).
 */
export interface ConsumerQueue {
  readonly sqs: SqsStandin;
  readonly name: string;
  readonly url: string;
  readonly arn: string;
  readonly visibilityTimeoutSeconds: number;
  /** `CONSUMER_QUEUE_*` and the SQS endpoint, for `vi.stubEnv`. */
  readonly env: Readonly<Record<string, string>>;
  deliver(events: readonly unknown[]): Promise<SQSEvent>;
  close(): Promise<void>;
}

export async function startConsumerQueue(
  name: string,
  visibilityTimeoutSeconds = 360,
): Promise<ConsumerQueue> {
  const sqs = await startSqsStandin({
    recorder: new CallRecorder(),
    queues: [{ name, visibilityTimeoutSeconds }],
  });
  const url = sqs.queueUrl(name);
  const arn = sqs.queueArn(name);
  const client = new SQSClient({
    endpoint: sqs.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'events', secretAccessKey: 'local' },
  });
  return {
    sqs,
    name,
    url,
    arn,
    visibilityTimeoutSeconds,
    env: {
      [consumerQueueEnv.url]: url,
      [consumerQueueEnv.arn]: arn,
      [consumerQueueEnv.visibilityTimeoutSeconds]: String(visibilityTimeoutSeconds),
      AWS_ENDPOINT_URL_SQS: sqs.endpoint,
    },
    async deliver(events) {
      for (const event of events)
        await client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: JSON.stringify(event) }));
      const received = await client.send(
        new ReceiveMessageCommand({
          QueueUrl: url,
          MaxNumberOfMessages: 10,
          MessageSystemAttributeNames: ['All'],
        }),
      );
      return {
        Records: (received.Messages ?? []).map((m) => ({
          messageId: m.MessageId ?? '',
          receiptHandle: m.ReceiptHandle ?? '',
          body: m.Body ?? '',
          attributes: {
            ApproximateReceiveCount: m.Attributes?.ApproximateReceiveCount ?? '1',
            SentTimestamp: m.Attributes?.SentTimestamp ?? '0',
            SenderId: m.Attributes?.SenderId ?? '',
            ApproximateFirstReceiveTimestamp: m.Attributes?.ApproximateFirstReceiveTimestamp ?? '0',
          },
          messageAttributes: {},
          md5OfBody: m.MD5OfBody ?? '',
          eventSource: 'aws:sqs',
          eventSourceARN: arn,
          awsRegion: 'us-east-1',
        })),
      };
    },
    async close() {
      client.destroy();
      await sqs.close();
    },
  };
}
