import { type Duration, Validations } from 'aws-cdk-lib';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';

export interface DeadLetterQueueProps {
  /** What ends up here, for the queue's readers (kept as a tag-free construct description). */
  readonly purpose: string;
  /**
   * How long a message stays for an operator to redrive: the consumer policy's
   * `deadLetterRetentionSeconds`, which the inbox retention is derived from too.
   */
  readonly retention: Duration;
}

/**
 * A queue that only receives what could not be delivered: SQS-managed encryption (an AWS
 * managed key, so EventBridge and Lambda can write without a key policy), TLS only, and the
 * topology's retention (the longest SQS allows) so an operator has two weeks to redrive.
 */
export class DeadLetterQueue extends Queue {
  public readonly purpose: string;

  constructor(scope: Construct, id: string, props: DeadLetterQueueProps) {
    super(scope, id, {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: props.retention,
    });
    this.purpose = props.purpose;
    const reason = `This queue is itself the end of the line (${props.purpose}); it is alarmed when not empty.`;
    Validations.of(this).acknowledge(
      { id: 'AwsSolutions-SQS3', reason },
      { id: 'Serverless-SQSRedrivePolicy', reason },
    );
  }
}
