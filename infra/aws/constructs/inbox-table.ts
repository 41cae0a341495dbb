import { type RemovalPolicy, Stack } from 'aws-cdk-lib';
import {
  AttributeType,
  BillingMode,
  CfnTable,
  type ITable,
  ProjectionType,
  Table,
  TableEncryption,
} from 'aws-cdk-lib/aws-dynamodb';
import { type IGrantable, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { inboxTableSchema } from '../../../shared/inbox/dynamo-inbox-table';

export interface InboxTableProps {
  readonly removalPolicy: RemovalPolicy;
  readonly deletionProtection: boolean;
  /**
   * A table of the user's to hold the inbox instead of one of ours: keyed, indexed and expiring
   * as `inboxTableShape` says (checked when the table is defined in this app; an imported one
   * is taken on trust), encrypted with a key DynamoDB holds (our grants name no KMS key).
   * `removalPolicy` and `deletionProtection` then do nothing.
   * @default a table of its own
   */
  readonly existingTable?: ITable;
  /**
   * Write units a second the table and its operator's index serve from their first moment
   * (DynamoDB warm throughput; https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html,
   * read 2026-12-05): a new on-demand table serves 4,000 at once and grows by doubling its peak,
   * so a launch at full rate throttles without it. Sized by the capacity model
   * (`warmWritesFor`); pre-warming is billed once, when the value is raised, and a value cannot be
   * lowered. Nothing on a table of the user's.
   * @default none: what a new on-demand table serves
   */
  readonly warmWrites?: { readonly table?: number; readonly index?: number };
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

/** A table's or an index's warm throughput of `writes` write units a second; reads keep their default. */
export const warm = (writes: number | undefined): { writeUnitsPerSecond: number } | undefined =>
  writes === undefined ? undefined : { writeUnitsPerSecond: writes };

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
  public readonly table: ITable;

  constructor(scope: Construct, id: string, props: InboxTableProps) {
    super(scope, id);
    if (props.existingTable) {
      const problems = inboxTableMismatches(props.existingTable);
      if (problems.length > 0) {
        throw new Error(
          `the existing inbox table ${props.existingTable.node.path} does not fit the inbox: ${problems.join('; ')}`,
        );
      }
      this.table = props.existingTable;
      return;
    }
    const table = new Table(this, inboxTableId, {
      partitionKey: { name: inboxTableSchema.partitionKey, type: AttributeType.STRING },
      timeToLiveAttribute: inboxTableSchema.ttlAttribute,
      billingMode: BillingMode.PAY_PER_REQUEST,
      // Encrypted at rest with the AWS-owned key (DynamoDB always encrypts; no KMS request charges).
      encryption: TableEncryption.DEFAULT,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: props.deletionProtection,
      removalPolicy: props.removalPolicy,
      warmThroughput: warm(props.warmWrites?.table),
    });
    table.addGlobalSecondaryIndex({
      indexName: inboxTableSchema.openIndex.name,
      partitionKey: { name: inboxTableSchema.openIndex.partitionKey, type: AttributeType.STRING },
      sortKey: { name: inboxTableSchema.openIndex.sortKey, type: AttributeType.STRING },
      // Keys only: an entry under 1 KB costs one write unit; the dead lists read the stored
      // events from the table by key.
      projectionType: ProjectionType.KEYS_ONLY,
      warmThroughput: warm(props.warmWrites?.index),
    });
    this.table = table;
  }

  /** The operator's index's ARN. */
  get openIndexArn(): string {
    return `${this.table.tableArn}/index/${inboxTableSchema.openIndex.name}`;
  }

  /**
   * Lets one consumer read and write its own inbox records only: every partition key a request
   * names must be like `<consumer>#*` (consumer names hold no `#`, `*` or `?`), so a bug in
   * one consumer cannot touch another's records
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

/**
 * What the inbox needs of its table, in words: the store's key names (`inboxTableSchema`), all strings.
 * The operator's index may project more than its keys; the dead lists read records by key anyway.
 */
export const inboxTableShape = [
  `partition key "${inboxTableSchema.partitionKey}" and no sort key`,
  `a global secondary index "${inboxTableSchema.openIndex.name}" with partition key "${inboxTableSchema.openIndex.partitionKey}" and sort key "${inboxTableSchema.openIndex.sortKey}"`,
  `time to live on "${inboxTableSchema.ttlAttribute}"`,
] as const;

/**
 * How `table` differs from `inboxTableShape`, as far as this app can tell: a table defined in it
 * (its `AWS::DynamoDB::Table`) is read; an imported one (`Table.fromTableName`) shows nothing.
 */
export function inboxTableMismatches(table: ITable): string[] {
  const problems: string[] = [];
  if (table.encryptionKey) {
    problems.push('it is encrypted with a customer managed KMS key, which the pipeline grants no use of');
  }
  const cfn = table.node.defaultChild;
  if (!(cfn instanceof CfnTable)) return problems;
  const resolve = <T>(value: unknown): T | undefined => Stack.of(cfn).resolve(value) as T | undefined;
  const attributes = resolve<CfnTable.AttributeDefinitionProperty[]>(cfn.attributeDefinitions) ?? [];
  const isString = (name: string) =>
    attributes.some((a) => a.attributeName === name && a.attributeType === 'S');
  const keyed = (keys: CfnTable.KeySchemaProperty[] | undefined, hash: string, range?: string) =>
    JSON.stringify((keys ?? []).map((k) => [k.keyType, k.attributeName])) ===
      JSON.stringify([['HASH', hash], ...(range ? [['RANGE', range]] : [])]) &&
    isString(hash) &&
    (range === undefined || isString(range));

  const { partitionKey, openIndex, ttlAttribute } = inboxTableSchema;
  if (!keyed(resolve(cfn.keySchema), partitionKey)) problems.push(`it must have ${inboxTableShape[0]}`);
  const index = (resolve<CfnTable.GlobalSecondaryIndexProperty[]>(cfn.globalSecondaryIndexes) ?? []).find(
    (i) => i.indexName === openIndex.name,
  );
  if (!index || !keyed(resolve(index.keySchema), openIndex.partitionKey, openIndex.sortKey)) {
    problems.push(`it must have ${inboxTableShape[1]}`);
  }
  const ttl = resolve<CfnTable.TimeToLiveSpecificationProperty>(cfn.timeToLiveSpecification);
  if (ttl?.attributeName !== ttlAttribute || ttl.enabled === false) {
    problems.push(`it must have ${inboxTableShape[2]}`);
  }
  return problems;
}
