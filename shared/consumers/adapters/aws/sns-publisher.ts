import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import { sdkClientConfig } from '../../../aws/sdk-client';
import type { Publisher, PublishOutcome, TopicMessage } from '../../resources';
import { snsSubject } from '../../topic-subject';

/**
 * A topic resource on SNS. A standard topic cannot dedupe, so the message's attributes (its id
 * among them, as the effect sets them) are there for subscribers to dedupe and filter on; a
 * FIFO topic (`.fifo`) also gets the id as MessageDeduplicationId, which SNS honours for 5
 * minutes, and the group as MessageGroupId, so one group's messages stay in order.
 * https://docs.aws.amazon.com/sns/latest/api/API_Publish.html
 */
export class SnsPublisher implements Publisher {
  private readonly fifo: boolean;

  constructor(
    private readonly sns: SNSClient,
    private readonly topicArn: string,
  ) {
    this.fifo = topicArn.endsWith('.fifo');
  }

  async publish(m: TopicMessage): Promise<PublishOutcome> {
    try {
      await this.sns.send(
        new PublishCommand({
          TopicArn: this.topicArn,
          Subject: snsSubject(m.subject, ''),
          Message: JSON.stringify(m.body),
          MessageAttributes: Object.fromEntries(
            Object.entries(m.attributes)
              // SNS rejects empty attribute values; subscription filters can still match on absence.
              .filter((entry): entry is [string, string] => typeof entry[1] === 'string' && entry[1] !== '')
              .map(([name, value]) => [name, { DataType: 'String', StringValue: value }]),
          ),
          ...(this.fifo ? { MessageDeduplicationId: m.id, MessageGroupId: m.group } : {}),
        }),
      );
      return 'sent';
    } catch (err) {
      throw new Error(`message ${m.id} to ${this.topicArn} failed`, { cause: err });
    }
  }
}

/** A topic resource's adapter for `lambdaConsumer`. */
export const snsTopic = (topicArn: string): SnsPublisher =>
  new SnsPublisher(new SNSClient(sdkClientConfig()), topicArn);
