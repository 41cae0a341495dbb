import type { RemovalPolicy } from 'aws-cdk-lib';
import { AttributeType, BillingMode, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { type IGrantable, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';

export interface InboxTableProps {
  readonly removalPolicy: RemovalPolicy;
  readonly deletionProtection: boolean;
}

/** The inbox record's key and TTL attribute names, as the consumers write them. */
export const inboxKeys = { partition: 'consumer', sort: 'eventId', ttl: 'expiresAt' } as const;

/**
 * The item operations a consumer's inbox uses (begin, take over, read, renew, complete, fail).
 * Listing, counting and redriving (Query) belong to the ops CLI, run with an operator's role.
 */
export const inboxActions = ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'] as const;

/**
 * The consumers' inbox, key `(consumer, eventId)`: each consumer dedupes only its own side
 * effects. Processed records expire through TTL `expiresAt`; point-in-time recovery is on
 * because a lost inbox means repeated effects.
 */
export class InboxTable extends Construct {
  public readonly table: Table;

  constructor(scope: Construct, id: string, props: InboxTableProps) {
    super(scope, id);
    this.table = new Table(this, 'Table', {
      partitionKey: { name: inboxKeys.partition, type: AttributeType.STRING },
      sortKey: { name: inboxKeys.sort, type: AttributeType.STRING },
      timeToLiveAttribute: inboxKeys.ttl,
      billingMode: BillingMode.PAY_PER_REQUEST,
      // Encrypted at rest with the AWS-owned key (DynamoDB always encrypts; no KMS request charges).
      encryption: TableEncryption.DEFAULT,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: props.deletionProtection,
      removalPolicy: props.removalPolicy,
    });
  }

  /**
   * Lets one consumer read and write its own inbox records only: the leading-keys condition
   * pins the partition key to the consumer's name, so a bug in `index` cannot touch
   * `archive`'s records.
   */
  grantConsumer(grantee: IGrantable, consumer: string): void {
    grantee.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({
        actions: [...inboxActions],
        resources: [this.table.tableArn],
        conditions: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [consumer] } },
      }),
    );
  }
}
