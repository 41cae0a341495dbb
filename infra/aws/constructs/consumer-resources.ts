import { CfnResource, type RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { AttributeType, BillingMode, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { type IGrantable, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { Alias } from 'aws-cdk-lib/aws-kms';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import {
  BlockPublicAccess,
  Bucket,
  BucketEncryption,
  type CfnBucket,
  ObjectOwnership,
} from 'aws-cdk-lib/aws-s3';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import {
  type BucketResource,
  type ResourceSpec,
  resourceEnvName,
  type TableResource,
  type TopicResource,
} from '../../../shared/consumers/resources';
import { warm } from './inbox-table';

/**
 * A table, topic or bucket a consumer declares (`shared/consumers/resources.ts`), as the stack
 * makes it: what its consumer's function is told of it and may do with it, and what the stack
 * may export of it.
 */
export interface ConsumerResource {
  /** Its declaration. */
  readonly spec: Exclude<ResourceSpec, { kind: 'database' }>;
  /** The variable that names it to its consumer's function (`resourceEnvName`), with its value. */
  readonly environment: Readonly<Record<string, string>>;
  /** What its kind lets the consumer's function do, and nothing more. */
  grant(grantee: IGrantable): void;
  /** Its name or ARN, and what a stack output of it ends in (`<construct id><suffix>`). */
  readonly output: { readonly suffix: 'TableName' | 'TopicArn' | 'BucketName'; readonly value: string };
}

/** What every resource of the pipeline's stage shares. */
export interface ConsumerResourceProps {
  /** The resource's key in its consumer's declaration: it names the variable. */
  readonly key: string;
  readonly removalPolicy: RemovalPolicy;
  /** Deletion protection on tables; objects of a bucket kept on stack deletion (prod). */
  readonly retain: boolean;
  /** Retention of the log group of CDK's auto-delete handler (a bucket when not `retain`). */
  readonly logRetention: RetentionDays;
  /**
   * A table's warm write throughput (`InboxTable`'s `warmWrites` says why); other kinds ignore it.
   * @default none: what a new on-demand table serves
   */
  readonly warmWrites?: number;
}

/** A declared resource made in `scope` under `id` (construct kinds: ConsumerTable, ConsumerTopic, ConsumerBucket). */
export function consumerResource(
  scope: Construct,
  id: string,
  spec: ConsumerResource['spec'],
  props: ConsumerResourceProps,
): ConsumerResource {
  switch (spec.kind) {
    case 'table':
      return new ConsumerTable(scope, id, { ...props, spec });
    case 'topic':
      return new ConsumerTopic(scope, id, { ...props, spec });
    case 'bucket':
      return new ConsumerBucket(scope, id, { ...props, spec });
  }
}

/**
 * A declared table: on demand, point-in-time recovery on, keyed by the declaration's partition
 * key. Its function may read items and put them (conditionally or not), nothing else.
 */
export class ConsumerTable extends Construct implements ConsumerResource {
  public readonly spec: TableResource;
  public readonly table: Table;
  public readonly environment: Readonly<Record<string, string>>;
  public readonly output: ConsumerResource['output'];

  constructor(scope: Construct, id: string, props: ConsumerResourceProps & { readonly spec: TableResource }) {
    super(scope, id);
    this.spec = props.spec;
    this.table = new Table(this, 'Table', {
      partitionKey: { name: props.spec.partitionKey, type: AttributeType.STRING },
      billingMode: BillingMode.PAY_PER_REQUEST,
      // Encrypted at rest with the AWS-owned key (DynamoDB always encrypts; no KMS request charges).
      encryption: TableEncryption.DEFAULT,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: props.retain,
      removalPolicy: props.removalPolicy,
      warmThroughput: warm(props.warmWrites),
    });
    this.environment = { [resourceEnvName(props.key, 'table')]: this.table.tableName };
    this.output = { suffix: 'TableName', value: this.table.tableName };
  }

  /** `dynamodb:GetItem` and `dynamodb:PutItem` on this table only. */
  grant(grantee: IGrantable): void {
    grantee.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem'],
        resources: [this.table.tableArn],
      }),
    );
  }
}

/**
 * A declared topic, encrypted with the AWS managed SNS key (publishers in this account need no
 * key grant), TLS only. Subscribers (email, chat, another queue) are added outside this stack.
 */
export class ConsumerTopic extends Construct implements ConsumerResource {
  public readonly spec: TopicResource;
  public readonly topic: Topic;
  public readonly environment: Readonly<Record<string, string>>;
  public readonly output: ConsumerResource['output'];

  constructor(scope: Construct, id: string, props: ConsumerResourceProps & { readonly spec: TopicResource }) {
    super(scope, id);
    this.spec = props.spec;
    this.topic = new Topic(this, 'Topic', {
      displayName: props.spec.displayName,
      enforceSSL: true,
      masterKey: Alias.fromAliasName(this, 'SnsKey', 'alias/aws/sns'),
    });
    this.environment = { [resourceEnvName(props.key, 'topic')]: this.topic.topicArn };
    this.output = { suffix: 'TopicArn', value: this.topic.topicArn };
  }

  /**
   * `sns:Publish` on this topic only. No KMS statement: the AWS managed SNS key's policy lets
   * any principal of the account use it through SNS (`Topic.grantPublish` would add a
   * region-wide `key/*` grant meant for customer keys).
   */
  grant(grantee: IGrantable): void {
    grantee.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({ actions: ['sns:Publish'], resources: [this.topic.topicArn] }),
    );
  }
}

/**
 * CDK's auto-delete handler is one per stack: the log group the first auto-deleting bucket
 * gave it, so a second one does not point it elsewhere.
 */
const autoDeleteLogs = new WeakMap<CfnResource, LogGroup>();

/**
 * A declared bucket of write-once objects: encrypted, versioned, never public, TLS only. Its
 * function may put objects and nothing else. Emptied on stack deletion unless retained, so
 * `cdk destroy` does not stop at a versioned bucket.
 */
export class ConsumerBucket extends Construct implements ConsumerResource {
  public readonly spec: BucketResource;
  public readonly bucket: Bucket;
  public readonly environment: Readonly<Record<string, string>>;
  public readonly output: ConsumerResource['output'];

  constructor(
    scope: Construct,
    id: string,
    props: ConsumerResourceProps & { readonly spec: BucketResource },
  ) {
    super(scope, id);
    this.spec = props.spec;
    this.bucket = new Bucket(this, 'Bucket', {
      encryption: BucketEncryption.S3_MANAGED,
      versioned: true,
      blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
      objectOwnership: ObjectOwnership.BUCKET_OWNER_ENFORCED,
      enforceSSL: true,
      removalPolicy: props.removalPolicy,
      autoDeleteObjects: !props.retain,
    });
    Validations.of(this.bucket).acknowledge({
      id: 'AwsSolutions-S1',
      reason:
        'Only its consumer writes here (PutObject with If-None-Match, under its own role). CloudTrail records bucket-level calls by default; object-level calls (PutObject, GetObject) need CloudTrail data events, which are off by default and billed per event: turn them on for this bucket if object access must be audited. A separate access-log bucket would need a retention and a lifecycle of its own.',
    });
    if (!props.retain) this.logAutoDeletes(props.logRetention, props.removalPolicy);
    this.environment = { [resourceEnvName(props.key, 'bucket')]: this.bucket.bucketName };
    this.output = { suffix: 'BucketName', value: this.bucket.bucketName };
  }

  /**
   * CDK's auto-delete handler (one provider function per stack) would log to a group Lambda
   * creates on its first run, kept for ever: point it at a group of ours with the stack's
   * retention instead (`LoggingConfig.LogGroup`, so no race with Lambda creating its own).
   */
  private logAutoDeletes(retention: RetentionDays, removalPolicy: RemovalPolicy): void {
    const stack = Stack.of(this);
    const provider = stack.node.tryFindChild('Custom::S3AutoDeleteObjectsCustomResourceProvider');
    const handler = provider?.node.tryFindChild('Handler');
    if (!(handler instanceof CfnResource)) {
      throw new Error('CDK no longer creates its auto-delete handler where this expects it');
    }
    if (autoDeleteLogs.has(handler)) return;
    const logs = new LogGroup(this, 'AutoDeleteLogs', { retention, removalPolicy });
    handler.addPropertyOverride('LoggingConfig', { LogGroup: logs.logGroupName });
    autoDeleteLogs.set(handler, logs);
  }

  /**
   * `s3:PutObject` on this bucket's objects only. The function writes with `If-None-Match: *`,
   * so S3 itself refuses a second write to a key, and nothing needs to read or overwrite.
   */
  grant(grantee: IGrantable): void {
    grantee.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({
        actions: ['s3:PutObject'],
        resources: [this.bucket.arnForObjects('*')],
      }),
    );
    // The finding is on the grantee's role policy, so the acknowledgement goes on the role.
    const principal = grantee.grantPrincipal;
    if (principal instanceof Construct) {
      Validations.of(principal).acknowledge({
        id: `AwsSolutions-IAM5[Resource::<${Stack.of(this).getLogicalId(this.bucket.node.defaultChild as CfnBucket)}.Arn>/*]`,
        reason:
          'Object keys are chosen by the effect at run time; the grant is limited to PutObject on this one bucket.',
      });
    }
  }
}
