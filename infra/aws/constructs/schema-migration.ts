import { createHash } from 'node:crypto';
import { CustomResource, Duration, type RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { CfnFunction, IFunction } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Provider } from 'aws-cdk-lib/custom-resources';
import { Construct, type IDependable } from 'constructs';
import { migrations } from '../../../shared/db/migrations/index';
import type { DatabaseAccess } from './database';
import { PipelineFunction } from './pipeline-function';

export interface SchemaMigrationProps {
  /** The schema owner's login: it migrates and sets every function role's password. */
  readonly database: DatabaseAccess;
  /** What must exist before migrating (the cluster and its writer instance). */
  readonly dependsOn?: IDependable;
  /**
   * Changing it makes the next deploy run the migrate function even when no migration changed,
   * so it sets every role's password from its secret again (after a rotation).
   * @default '1'
   */
  readonly credentialsVersion?: string;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/** The relay the migrate function runs once after migrating (`RELAY_FUNCTION_NAME`). */
export const firstRelayRunEnv = 'RELAY_FUNCTION_NAME';

/** A fingerprint of every migration: a changed or added migration makes CloudFormation update the resource. */
export function migrationsFingerprint(): string {
  return createHash('sha256').update(JSON.stringify(migrations)).digest('hex').slice(0, 16);
}

/**
 * Applies the SQL migrations on every deploy that changes them: a custom resource (Provider
 * framework) whose `onEvent` is `functions/migrate`, reaching the database the same way the
 * other functions do. The migrate code retries DatabaseResumingException itself, and its
 * timeout leaves room for an auto-paused cluster to resume.
 */
export class SchemaMigration extends Construct {
  public readonly function: PipelineFunction;
  public readonly provider: Provider;
  public readonly resource: CustomResource;
  /** The highest applied migration version, as the migrate function reports it. */
  public readonly schemaVersion: string;

  constructor(scope: Construct, id: string, props: SchemaMigrationProps) {
    super(scope, id);
    this.function = new PipelineFunction(this, 'Function', {
      entry: 'functions/migrate/handler.ts',
      serviceName: 'migrate',
      description: 'Applies the pipeline SQL migrations (CloudFormation custom resource)',
      environment: props.database.environment,
      memorySize: 256,
      timeout: Duration.minutes(5),
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    props.database.grant(this.function);

    this.provider = new Provider(this, 'Provider', {
      onEventHandler: this.function,
      logGroup: new LogGroup(this, 'ProviderLogs', {
        retention: props.logRetention,
        removalPolicy: props.removalPolicy,
      }),
    });

    this.resource = new CustomResource(this, 'Resource', {
      serviceToken: this.provider.serviceToken,
      resourceType: 'Custom::PipelineSchema',
      properties: {
        Fingerprint: migrationsFingerprint(),
        Migrations: migrations.length,
        CredentialsVersion: props.credentialsVersion ?? '1',
      },
    });
    if (props.dependsOn) this.resource.node.addDependency(props.dependsOn);
    this.schemaVersion = this.resource.getAttString('SchemaVersion');

    Validations.of(this.function).acknowledge(
      {
        id: 'Serverless-LambdaAsyncFailureDestination',
        reason: 'Invoked synchronously by the Provider framework only; a failure fails the deployment.',
      },
      {
        id: 'Serverless-LambdaDLQ',
        reason: 'Invoked synchronously by the Provider framework only; a failure fails the deployment.',
      },
    );
    acknowledgeProviderFramework(this.provider, this.function);
  }

  /**
   * Makes each migration end with one run of `relay`, waited for: a new stack's relay reports
   * at once instead of at its first sweep, so `relay-silent` (missing data breaching) has data
   * from the start, and anything committed before the deploy goes out.
   */
  runAfterMigrating(relay: IFunction): void {
    this.function.addEnvironment(firstRelayRunEnv, relay.functionName);
    this.function.addToRolePolicy(
      new PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [relay.functionArn] }),
    );
  }
}

/** The Provider framework's own Lambda is CDK's code: its runtime, role and settings are not ours to pick. */
function acknowledgeProviderFramework(provider: Provider, onEvent: PipelineFunction): void {
  const framework = provider.node.findChild('framework-onEvent');
  const onEventId = Stack.of(provider).getLogicalId(onEvent.node.defaultChild as CfnFunction);
  const reason = (what: string) => `CDK Provider framework function (CDK-managed code): ${what}.`;
  Validations.of(framework).acknowledge(
    {
      id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
      reason: reason('CDK attaches AWSLambdaBasicExecutionRole to its framework role'),
    },
    {
      id: `AwsSolutions-IAM5[Resource::<${onEventId}.Arn>:*]`,
      reason: reason('it may invoke any version of our onEvent function, and only that function'),
    },
    { id: 'AwsSolutions-L1', reason: reason('CDK pins the runtime of its framework') },
    { id: 'Serverless-LambdaLatestVersion', reason: reason('CDK pins the runtime of its framework') },
    { id: 'Serverless-LambdaTracing', reason: reason('tracing is not configurable') },
    { id: 'Serverless-LambdaDLQ', reason: reason('invoked synchronously by CloudFormation') },
    {
      id: 'Serverless-LambdaAsyncFailureDestination',
      reason: reason('invoked by CloudFormation, which reports failures itself'),
    },
    { id: 'Serverless-LambdaDefaultMemorySize', reason: reason('memory is not configurable') },
  );
}
