import { type IGrantable, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { Alias } from 'aws-cdk-lib/aws-kms';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';

/**
 * Where the `notify` consumer publishes "your content was approved". Subscribers (email,
 * chat, another queue) are added outside this stack. Encrypted with the AWS managed SNS key:
 * publishers in this account need no key grant.
 */
export class NotificationTopic extends Construct {
  public readonly topic: Topic;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    this.topic = new Topic(this, 'Topic', {
      displayName: 'Content pipeline notifications',
      enforceSSL: true,
      masterKey: Alias.fromAliasName(this, 'SnsKey', 'alias/aws/sns'),
    });
  }

  /**
   * `sns:Publish` on this topic only. No KMS statement: the AWS managed SNS key's policy lets
   * any principal of the account use it through SNS (`Topic.grantPublish` would add a
   * region-wide `key/*` grant meant for customer keys).
   */
  grantPublish(grantee: IGrantable): void {
    grantee.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({ actions: ['sns:Publish'], resources: [this.topic.topicArn] }),
    );
  }
}
