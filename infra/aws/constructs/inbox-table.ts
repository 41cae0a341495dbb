import type { RemovalPolicy } from 'aws-cdk-lib';
import { AttributeType, BillingMode, ProjectionType, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { type IGrantable, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { inboxTableSchema } from '../../../shared/inbox/dynamo-inbox-store';

export interface InboxTableProps {
  readonly removalPolicy: RemovalPolicy;
  readonly deletionProtection: boolean;
}

/**
 * The item operations a consumer's inbox uses (begin, take over, read, renew, complete, fail).
 * Listing, counting and redriving belong to the ops API and the gauges, through the sparse index.
 */
export const inboxActions = ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'] as const;

/**
 * The consumers' inbox, key `(consumer, eventId)`: each consumer dedupes only its own side
 * effects. Processed records expire through TTL `expiresAt`; point-in-time recovery is on
 * because a lost inbox means repeated effects. The sparse `open-records` index holds only the
 * records that are not PROCESSED, keyed `<consumer>#<status>`: what the ops API lists and the
 * gauges count without a scan. Key names come from the store (`inboxTableSchema`).
 */
export class InboxTable extends Construct {
  public readonly table: Table;

  constructor(scope: Construct, id: string, props: InboxTableProps) {
    super(scope, id);
    this.table = new Table(this, 'Table', {
      partitionKey: { name: inboxTableSchema.partitionKey, type: AttributeType.STRING },
      sortKey: { name: inboxTableSchema.sortKey, type: AttributeType.STRING },
      timeToLiveAttribute: inboxTableSchema.ttlAttribute,
      billingMode: BillingMode.PAY_PER_REQUEST,
      // Encrypted at rest with the AWS-owned key (DynamoDB always encrypts; no KMS request charges).
      encryption: TableEncryption.DEFAULT,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: props.deletionProtection,
      removalPolicy: props.removalPolicy,
    });
    this.table.addGlobalSecondaryIndex({
      indexName: inboxTableSchema.openIndex.name,
      partitionKey: { name: inboxTableSchema.openIndex.partitionKey, type: AttributeType.STRING },
      sortKey: { name: inboxTableSchema.openIndex.sortKey, type: AttributeType.STRING },
      // The dead lists show the stored event, so the index keeps whole records (open ones only).
      projectionType: ProjectionType.ALL,
    });
  }

  /** The sparse index's ARN. */
  get openIndexArn(): string {
    return `${this.table.tableArn}/index/${inboxTableSchema.openIndex.name}`;
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

  /** Counting from the sparse index: what the inbox gauges do, nothing more. */
  grantCountOpen(grantee: IGrantable): void {
    grantee.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({ actions: ['dynamodb:Query'], resources: [this.openIndexArn] }),
    );
  }

  /** The ops API: lists and counts through the index, reads a record, redrives it (an update). */
  grantOps(grantee: IGrantable): void {
    this.grantCountOpen(grantee);
    grantee.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
        resources: [this.table.tableArn],
      }),
    );
  }
}
