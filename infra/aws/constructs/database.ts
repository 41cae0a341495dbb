import { Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { FlowLogDestination, SubnetType, Vpc } from 'aws-cdk-lib/aws-ec2';
import { type IGrantable, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import {
  AuroraPostgresEngineVersion,
  ClusterInstance,
  Credentials,
  DatabaseCluster,
  DatabaseClusterEngine,
  DatabaseSecret,
} from 'aws-cdk-lib/aws-rds';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { allFunctionRoles, type FunctionRole, roleName } from '../../../shared/db/roles';

/** How one function reaches PostgreSQL: the environment `shared/config.ts` reads, and its grant. */
export interface DatabaseAccess {
  /** `DB_CLUSTER_ARN` + `DB_SECRET_ARN` + `DB_NAME` (Data API) or `DATABASE_URL` (pg). */
  readonly environment: Readonly<Record<string, string>>;
  /** Lets `grantee` run SQL as this login (Data API calls and reading its secret only); nothing for a URL. */
  grant(grantee: IGrantable): void;
}

/**
 * The database, whichever backs it: one login per function role (`shared/db/roles.ts`) and the
 * owner's, which migrates the schema and sets the roles' passwords.
 */
export interface PipelineDatabase {
  /** The login of one function's own database role. */
  access(role: FunctionRole): DatabaseAccess;
  /** The schema owner: `DB_ROLE_SECRETS` names every role's secret, whose passwords it sets. */
  readonly owner: DatabaseAccess;
}

/**
 * The rds-data actions our Data API client calls (`shared/db/data-api-client.ts`: one statement
 * per call, in or out of a transaction): not BatchExecuteStatement, which nothing sends.
 * docs.aws.amazon.com/rdsdataservice/latest/APIReference
 */
export const dataApiActions = [
  'rds-data:BeginTransaction',
  'rds-data:CommitTransaction',
  'rds-data:ExecuteStatement',
  'rds-data:RollbackTransaction',
];

/**
 * The Data API reads the caller's secret with the caller's own permissions: the caller needs
 * the rds-data actions on the cluster and GetSecretValue on that secret, nothing else
 * (docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/data-api.access.html).
 */
function grantDataApi(grantee: IGrantable, cluster: DatabaseCluster, secrets: readonly ISecret[]): void {
  grantee.grantPrincipal.addToPrincipalPolicy(
    new PolicyStatement({ actions: dataApiActions, resources: [cluster.clusterArn] }),
  );
  grantee.grantPrincipal.addToPrincipalPolicy(
    new PolicyStatement({
      // The Data API and the migrate function read the value; nothing describes a secret.
      actions: ['secretsmanager:GetSecretValue'],
      resources: secrets.map((s) => s.secretArn),
    }),
  );
}

export interface AuroraDatabaseProps {
  /** Aurora Serverless v2 minimum ACUs; 0 enables auto-pause after `autoPauseAfter`. */
  readonly minCapacity: number;
  readonly maxCapacity: number;
  /**
   * Prod: deletion protection on, and a final snapshot when the stack is deleted (the cluster,
   * its writer, network and secrets then go, so `cdk destroy` finishes and nothing is left
   * referring to what it deleted); sandbox: destroyed with the stack, no snapshot.
   */
  readonly retain: boolean;
  readonly backupRetention: Duration;
  readonly logRetention: RetentionDays;
  /** @default 'pipeline' */
  readonly databaseName?: string;
  /**
   * Idle time before the instance pauses (only used when minCapacity is 0). The shortest AWS
   * allows, so that between the relay's hourly safety sweeps the cluster is paused most of the time.
   * @default 5 minutes
   */
  readonly autoPauseAfter?: Duration;
  /**
   * A Serverless v2 reader in the VPC's second Availability Zone, the writer pinned to the first.
   * In promotion tier 1 it scales with the writer (Aurora keeps a tier 0 or 1 reader at least at the
   * writer's capacity, https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/aurora-serverless-v2.how-it-works.html),
   * so on a failover Aurora promotes a reader already sized for the load
   * (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/Concepts.AuroraHighAvailability.html);
   * both read 2026-12-05. Nothing reads from it: the Data API runs every statement on the writer.
   * @default false
   */
  readonly reader?: boolean;
}

/**
 * Aurora PostgreSQL 17 Serverless v2 in isolated subnets (no NAT, no route out), reached only
 * through the RDS Data API: functions stay outside the VPC and authenticate with IAM plus the
 * generated Secrets Manager credentials. Storage encrypted, IAM database auth on, backups kept.
 */
export class AuroraDatabase extends Construct implements PipelineDatabase {
  public readonly vpc: Vpc;
  public readonly cluster: DatabaseCluster;
  /** The master user's generated credentials: the migrate function's login only. */
  public readonly secret: ISecret;
  /** One generated login per function role; the migrate function sets each password in PostgreSQL. */
  public readonly roleSecrets: ReadonlyMap<FunctionRole, ISecret>;
  public readonly databaseName: string;
  public readonly owner: DatabaseAccess;

  constructor(scope: Construct, id: string, props: AuroraDatabaseProps) {
    super(scope, id);
    this.databaseName = props.databaseName ?? 'pipeline';
    // Prod keeps its data as a final snapshot rather than a retained cluster: a retained cluster
    // keeps needing its VPC, subnets, security group, subnet group and master secret, which a
    // stack deletion would otherwise delete under it (DELETE_FAILED on the network, orphaned
    // credentials). A snapshot needs none of them; restore it into a new stack
    // (docs/aws.md, "Destroy"). Everything else of the database goes with the stack.
    const removalPolicy = RemovalPolicy.DESTROY;
    const clusterRemovalPolicy = props.retain ? RemovalPolicy.SNAPSHOT : RemovalPolicy.DESTROY;

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
        // Logs follow the stage's log policy (prod keeps them); a log group refers to nothing.
        new LogGroup(this, 'FlowLogs', {
          retention: props.logRetention,
          removalPolicy: props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
        }),
      ),
    });

    // The VPC's two AZs, as its isolated subnets have them (CloudFormation's Fn::GetAZs when the
    // stack names no environment, as ours does not).
    const azs = this.vpc.isolatedSubnets.map((subnet) => subnet.availabilityZone);
    this.cluster = new DatabaseCluster(this, 'Cluster', {
      engine: DatabaseClusterEngine.auroraPostgres({ version: AuroraPostgresEngineVersion.VER_17_9 }),
      writer: ClusterInstance.serverlessV2('Writer', {
        autoMinorVersionUpgrade: true,
        // Pinned only with a reader, whose AZ must differ: a sandbox's writer keeps what it had.
        availabilityZone: props.reader ? azs[0] : undefined,
      }),
      readers: props.reader
        ? [
            ClusterInstance.serverlessV2('Reader', {
              autoMinorVersionUpgrade: true,
              availabilityZone: azs[1],
              // Promotion tier 1: scales with the writer and is the first to be promoted.
              scaleWithWriter: true,
            }),
          ]
        : [],
      serverlessV2MinCapacity: props.minCapacity,
      serverlessV2MaxCapacity: props.maxCapacity,
      serverlessV2AutoPauseDuration:
        props.minCapacity === 0 ? (props.autoPauseAfter ?? Duration.minutes(5)) : undefined,
      vpc: this.vpc,
      vpcSubnets: { subnetType: SubnetType.PRIVATE_ISOLATED },
      credentials: Credentials.fromGeneratedSecret('pipeline_admin'),
      defaultDatabaseName: this.databaseName,
      enableDataApi: true,
      iamAuthentication: true,
      storageEncrypted: true,
      backup: { retention: props.backupRetention },
      deletionProtection: props.retain,
      removalPolicy: clusterRemovalPolicy,
    });

    const secret = this.cluster.secret;
    if (!secret) throw new Error('the cluster was created without a secret');
    this.secret = secret;
    const roleSecrets = new Map<FunctionRole, ISecret>();
    for (const role of allFunctionRoles) {
      // DatabaseSecret's password is printable ASCII without spaces, which setRolePasswords needs.
      const roleSecret = new DatabaseSecret(this, secretId(role), { username: roleName(role) });
      roleSecret.applyRemovalPolicy(removalPolicy);
      roleSecrets.set(role, roleSecret);
      Validations.of(roleSecret).acknowledge({
        id: 'AwsSolutions-SMG4',
        reason:
          'Rotation needs a rotation Lambda inside the VPC plus a Secrets Manager endpoint or NAT (cost) in a VPC that is otherwise closed; rotate by putting a new value in the secret and deploying with -c roleCredentialsVersion=<new> (the migrate custom resource then runs and sets every role password from its secret).',
      });
    }
    this.roleSecrets = roleSecrets;
    const environment = (login: ISecret) => ({
      DB_CLUSTER_ARN: this.cluster.clusterArn,
      DB_SECRET_ARN: login.secretArn,
      DB_NAME: this.databaseName,
    });
    this.owner = {
      environment: {
        ...environment(secret),
        DB_ROLE_SECRETS: Stack.of(this).toJsonString(
          Object.fromEntries([...roleSecrets].map(([role, s]) => [role, s.secretArn])),
        ),
      },
      grant: (grantee) => grantDataApi(grantee, this.cluster, [secret, ...roleSecrets.values()]),
    };
    this.accessFor = (role) => {
      const login = roleSecrets.get(role) as ISecret;
      return {
        environment: environment(login),
        grant: (grantee) => grantDataApi(grantee, this.cluster, [login]),
      };
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
          'Rotation needs a rotation Lambda inside the VPC plus a Secrets Manager endpoint or NAT (cost) in a VPC that is otherwise closed; rotate by hand: change the master password (aws rds modify-db-cluster --master-user-password) and put the same value in this secret; the Data API reads the secret on each call.',
      },
    );
    if (!props.retain) {
      Validations.of(this.cluster).acknowledge({
        id: 'AwsSolutions-RDS10',
        reason: 'Sandbox stage: `cdk destroy` must remove the cluster; prod turns deletion protection on.',
      });
    }
  }

  private readonly accessFor: (role: FunctionRole) => DatabaseAccess;

  access(role: FunctionRole): DatabaseAccess {
    return this.accessFor(role);
  }
}

/**
 * LocalStack's free tier has no RDS: the functions get a PostgreSQL URL (the pg adapter) and
 * there is nothing to grant. The URL's password sits in the function environment, which is
 * acceptable only for a local emulator, and every function logs in with it: per-function roles
 * are enforced on AWS, in the local runtime and in the tests, not on LocalStack.
 */
export class UrlDatabase implements PipelineDatabase {
  public readonly owner: DatabaseAccess;

  constructor(databaseUrl: string) {
    this.owner = { environment: { DATABASE_URL: databaseUrl }, grant: () => {} };
  }

  access(_role: FunctionRole): DatabaseAccess {
    return this.owner;
  }
}

/**
 * The construct id of a role's secret: `Secret-<role>`, except the task reader's, which kept the
 * id it had before the role's key was renamed (a new id would replace the deployed secret).
 */
const secretId = (role: FunctionRole): string =>
  role === 'taskReader' ? 'Secret-archive' : `Secret-${role}`;
