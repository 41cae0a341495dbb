import { type RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { type IGrantable, PolicyStatement } from 'aws-cdk-lib/aws-iam';
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
        'Only the archive consumer writes here, under its own role; CloudTrail records the API calls. A separate access-log bucket would need its own retention for no extra insight.',
    });
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
