import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import { FlowLogDestination, SubnetType, Vpc } from 'aws-cdk-lib/aws-ec2';
import type { IGrantable } from 'aws-cdk-lib/aws-iam';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import {
  AuroraPostgresEngineVersion,
  ClusterInstance,
  Credentials,
  DatabaseCluster,
  DatabaseClusterEngine,
} from 'aws-cdk-lib/aws-rds';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';

/**
 * How functions reach PostgreSQL, whichever database backs it: the environment
 * `shared/config.ts` reads, and the grant that goes with it.
 */
export interface PipelineDatabase {
  /** `DB_CLUSTER_ARN` + `DB_SECRET_ARN` + `DB_NAME` (Data API) or `DATABASE_URL` (pg). */
  readonly environment: Readonly<Record<string, string>>;
  /** Lets `grantee` run SQL (Data API calls and reading the secret); nothing for a URL. */
  grantAccess(grantee: IGrantable): void;
}

export interface AuroraDatabaseProps {
  /** Aurora Serverless v2 minimum ACUs; 0 enables auto-pause after `autoPauseAfter`. */
  readonly minCapacity: number;
  readonly maxCapacity: number;
  /** Prod: retain on stack deletion and turn deletion protection on; sandbox: destroy. */
  readonly retain: boolean;
  readonly backupRetention: Duration;
  readonly logRetention: RetentionDays;
  /** @default 'pipeline' */
  readonly databaseName?: string;
  /** @default 10 minutes (only used when minCapacity is 0) */
  readonly autoPauseAfter?: Duration;
}

/**
 * Aurora PostgreSQL 17 Serverless v2 in isolated subnets (no NAT, no route out), reached only
 * through the RDS Data API: functions stay outside the VPC and authenticate with IAM plus the
 * generated Secrets Manager credentials. Storage encrypted, IAM database auth on, backups kept.
 */
export class AuroraDatabase extends Construct implements PipelineDatabase {
  public readonly vpc: Vpc;
  public readonly cluster: DatabaseCluster;
  /** The generated credentials the Data API authenticates with. */
  public readonly secret: ISecret;
  public readonly databaseName: string;
  public readonly environment: Readonly<Record<string, string>>;

  constructor(scope: Construct, id: string, props: AuroraDatabaseProps) {
    super(scope, id);
    this.databaseName = props.databaseName ?? 'pipeline';
    const removalPolicy = props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;

    this.vpc = new Vpc(this, 'Vpc', {
      maxAzs: 2,
      natGateways: 0,
      subnetConfiguration: [{ name: 'isolated', subnetType: SubnetType.PRIVATE_ISOLATED, cidrMask: 24 }],
      // Nothing runs in this VPC but the cluster, whose own group has no ingress; restricting the
      // default group would add a custom-resource Lambda for no gain.
      restrictDefaultSecurityGroup: false,
    });
    this.vpc.addFlowLog('FlowLog', {
      destination: FlowLogDestination.toCloudWatchLogs(
        new LogGroup(this, 'FlowLogs', { retention: props.logRetention, removalPolicy }),
      ),
    });

    this.cluster = new DatabaseCluster(this, 'Cluster', {
      engine: DatabaseClusterEngine.auroraPostgres({ version: AuroraPostgresEngineVersion.VER_17_9 }),
      writer: ClusterInstance.serverlessV2('Writer', { autoMinorVersionUpgrade: true }),
      serverlessV2MinCapacity: props.minCapacity,
      serverlessV2MaxCapacity: props.maxCapacity,
      serverlessV2AutoPauseDuration:
        props.minCapacity === 0 ? (props.autoPauseAfter ?? Duration.minutes(10)) : undefined,
      vpc: this.vpc,
      vpcSubnets: { subnetType: SubnetType.PRIVATE_ISOLATED },
      credentials: Credentials.fromGeneratedSecret('pipeline_admin'),
      defaultDatabaseName: this.databaseName,
      enableDataApi: true,
      iamAuthentication: true,
      storageEncrypted: true,
      backup: { retention: props.backupRetention },
      deletionProtection: props.retain,
      removalPolicy,
    });

    const secret = this.cluster.secret;
    if (!secret) throw new Error('the cluster was created without a secret');
    this.secret = secret;
    this.environment = {
      DB_CLUSTER_ARN: this.cluster.clusterArn,
      DB_SECRET_ARN: secret.secretArn,
      DB_NAME: this.databaseName,
    };

    Validations.of(this.cluster).acknowledge(
      {
        id: 'AwsSolutions-RDS11',
        reason:
          'No network path reaches the port: isolated subnets, no ingress rule; every client uses the Data API over HTTPS.',
      },
      {
        id: 'AwsSolutions-SMG4',
        reason:
          'Rotation needs a rotation Lambda inside the VPC plus a Secrets Manager endpoint or NAT (cost) in a VPC that is otherwise closed; rotate by hand, the Data API reads the current version on each call.',
      },
    );
    if (!props.retain) {
      Validations.of(this.cluster).acknowledge({
        id: 'AwsSolutions-RDS10',
        reason: 'Sandbox stage: `cdk destroy` must remove the cluster; prod turns deletion protection on.',
      });
    }
  }

  grantAccess(grantee: IGrantable): void {
    // The five rds-data actions on this cluster, and GetSecretValue/DescribeSecret on its secret.
    this.cluster.grantDataApiAccess(grantee);
  }
}

/**
 * LocalStack's free tier has no RDS: the functions get a PostgreSQL URL (the pg adapter) and
 * there is nothing to grant. The URL's password sits in the function environment, which is
 * acceptable only for a local emulator.
 */
export class UrlDatabase implements PipelineDatabase {
  public readonly environment: Readonly<Record<string, string>>;

  constructor(databaseUrl: string) {
    this.environment = { DATABASE_URL: databaseUrl };
  }

  grantAccess(_grantee: IGrantable): void {}
}
