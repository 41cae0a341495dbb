import type { RemovalPolicy } from 'aws-cdk-lib';
import { AttributeType, BillingMode, ProjectionType, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { type IGrantable, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { inboxTableSchema } from '../../../shared/inbox/dynamo-inbox-table';

export interface InboxTableProps {
  readonly removalPolicy: RemovalPolicy;
  readonly deletionProtection: boolean;
}

/**
 * The item operations a consumer's inbox uses (begin, take over, read, renew, complete, fail).
 * Listing, counting and redriving belong to the ops API and the gauges, through the operator's index.
 */
export const inboxActions = ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'] as const;

/**
 * The id of the table within this construct. It names the table's logical id, and with it the
 * physical name: a key schema cannot change in place, so the table keyed `<consumer>#<eventId>`
 * has an id of its own, and a stack that had the one keyed `(consumer, eventId)` (id `Table`)
 * creates it anew on update and then removes the old one (docs/aws.md, "Deploy to a sandbox account").
 */
export const inboxTableId = 'EventKeyedTable';

/**
 * The consumers' inbox: one item per (consumer, event), partition key `<consumer>#<eventId>`,
 * so each consumer dedupes only its own side effects and no consumer's records share a
 * partition. Processed records expire through TTL `expiresAt`; point-in-time recovery is on
 * because a lost inbox means repeated effects. The sparse `open-records` index holds only the
 * records that are not PROCESSED, keys only, under `<consumer>#<status>#<shard>` sorted by time:
 * what the ops API lists and the gauges count without a scan. Key names come from the store
 * (`inboxTableSchema`); the shard count from the topology (`topology.inbox.openIndexShards`).
 */
export class InboxTable extends Construct {
  public readonly table: Table;

  constructor(scope: Construct, id: string, props: InboxTableProps) {
    super(scope, id);
    this.table = new Table(this, inboxTableId, {
      partitionKey: { name: inboxTableSchema.partitionKey, type: AttributeType.STRING },
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
      // Keys only: an entry under 1 KB costs one write unit; the dead lists read the stored
      // events from the table by key.
      projectionType: ProjectionType.KEYS_ONLY,
    });
  }

  /** The operator's index's ARN. */
  get openIndexArn(): string {
    return `${this.table.tableArn}/index/${inboxTableSchema.openIndex.name}`;
  }

  /**
   * Lets one consumer read and write its own inbox records only: every partition key a request
   * names must be like `<consumer>#*` (consumer names hold no `#`, `*` or `?`), so a bug in
   * `index` cannot touch `archive`'s records
   * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html).
   * `ForAllValues` also holds for a request that names no key at all (a Scan or a Query on an
   * index), which is why the grant has item actions only.
   */
  grantConsumer(grantee: IGrantable, consumer: string): void {
    if (!/^[^#*?]+$/.test(consumer)) throw new Error(`invalid consumer name "${consumer}"`);
    grantee.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({
        actions: [...inboxActions],
        resources: [this.table.tableArn],
        conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [`${consumer}#*`] } },
      }),
    );
  }

  /** Counting from the operator's index: what the inbox gauges do, nothing more. */
  grantCountOpen(grantee: IGrantable): void {
    grantee.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({ actions: ['dynamodb:Query'], resources: [this.openIndexArn] }),
    );
  }

  /**
   * The delivery audit: which records exist, asked by exact key (BatchGetItem) for every
   * consumer's events, so no leading-keys condition narrows it; no write, no index, no scan.
   */
  grantPresence(grantee: IGrantable): void {
    grantee.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({ actions: ['dynamodb:BatchGetItem'], resources: [this.table.tableArn] }),
    );
  }

  /**
   * The ops API: lists and counts through the index, reads the records it lists (BatchGetItem)
   * or one record, redrives it (an update).
   */
  grantOps(grantee: IGrantable): void {
    this.grantCountOpen(grantee);
    grantee.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({
        actions: ['dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:UpdateItem'],
        resources: [this.table.tableArn],
      }),
    );
  }
}
