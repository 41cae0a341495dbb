import { CfnResource, type RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { type IGrantable, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import {
  BlockPublicAccess,
  Bucket,
  BucketEncryption,
  type CfnBucket,
  ObjectOwnership,
} from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';

export interface ArchiveBucketProps {
  readonly removalPolicy: RemovalPolicy;
  /** Empty the bucket on stack deletion (sandbox), so `cdk destroy` does not stop at a versioned bucket. */
  readonly autoDeleteObjects: boolean;
  /** Retention of the log group of CDK's auto-delete handler (when `autoDeleteObjects`). */
  readonly logRetention: RetentionDays;
}

/**
 * Immutable snapshots of each approved version, written by the `archive` consumer at a key
 * made of task id, version and event id. Encrypted, versioned, never public, TLS only.
 */
export class ArchiveBucket extends Construct {
  public readonly bucket: Bucket;

  constructor(scope: Construct, id: string, props: ArchiveBucketProps) {
    super(scope, id);
    this.bucket = new Bucket(this, 'Bucket', {
      encryption: BucketEncryption.S3_MANAGED,
      versioned: true,
      blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
      objectOwnership: ObjectOwnership.BUCKET_OWNER_ENFORCED,
      enforceSSL: true,
      removalPolicy: props.removalPolicy,
      autoDeleteObjects: props.autoDeleteObjects,
    });
    Validations.of(this.bucket).acknowledge({
      id: 'AwsSolutions-S1',
      reason:
        'Only the archive consumer writes here (PutObject with If-None-Match, under its own role). CloudTrail records bucket-level calls by default; object-level calls (PutObject, GetObject) need CloudTrail data events, which are off by default and billed per event: turn them on for this bucket if object access must be audited. A separate access-log bucket would need a retention and a lifecycle of its own.',
    });
    if (props.autoDeleteObjects) this.logAutoDeletes(props.logRetention, props.removalPolicy);
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
    const logs = new LogGroup(this, 'AutoDeleteLogs', { retention, removalPolicy });
    handler.addPropertyOverride('LoggingConfig', { LogGroup: logs.logGroupName });
  }

  /**
   * Write snapshots: `s3:PutObject` only. The consumer writes with `If-None-Match: *`, so S3
   * itself refuses a second write to a key, and nothing needs to read or overwrite.
   */
  grantSnapshots(grantee: IGrantable): void {
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
          'Snapshot keys are made of task id, version and event id at run time; the grant is limited to PutObject on this one bucket.',
      });
    }
  }
}
