import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DockerImage, type Duration, type RemovalPolicy, Validations } from 'aws-cdk-lib';
import { Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Architecture, Runtime, Tracing } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import { metricsNamespace } from '../../../shared/outbox/relay-metrics';

/** The repository root: entries, the lockfile and node_modules are resolved from here. */
export const projectRoot = fileURLToPath(new URL('../../../', import.meta.url));

/**
 * ESM bundles still contain CommonJS dependencies that call `require` for Node built-ins;
 * esbuild cannot rewrite those, so the bundle defines `require` itself.
 */
export const esmRequireBanner =
  "import { createRequire as __cpCreateRequire } from 'node:module'; const require = __cpCreateRequire(import.meta.url);";

/**
 * Context key the stack sets to 'data-api' when every function reaches Aurora through the Data
 * API: bundles then leave node-postgres out (see `createSqlClient`, and `"sideEffects": false`
 * in package.json, which lets esbuild drop a module nothing uses).
 */
export const sqlAdapterContextKey = 'content-pipeline:sqlAdapter';

export interface PipelineFunctionProps {
  /** Entry file, absolute or relative to the repository root (`functions/outbox-relay/handler.ts`). */
  readonly entry: string;
  /** Powertools service name: the logs' `service` key and the metrics' `service` dimension. */
  readonly serviceName: string;
  readonly description: string;
  readonly environment?: Readonly<Record<string, string>>;
  readonly timeout: Duration;
  readonly memorySize: number;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
  readonly reservedConcurrentExecutions?: number;
}

let esbuildChecked = false;

/**
 * NodejsFunction falls back to building a Docker image when it cannot find esbuild, which
 * fails late and slowly on machines without Docker. Fail at once with the reason instead.
 */
function assertLocalEsbuild(): void {
  if (esbuildChecked) return;
  try {
    createRequire(join(projectRoot, 'package.json')).resolve('esbuild');
  } catch (cause) {
    throw new Error('esbuild is not installed in this project: run `npm ci` (bundling never uses Docker)', {
      cause,
    });
  }
  esbuildChecked = true;
}

/**
 * A pipeline Lambda: Node 22 on ARM64, an esbuild ESM bundle (AWS SDK included, so the
 * function runs the SDK versions the tests ran), X-Ray active tracing, its own log group with
 * retention, and the Powertools environment. The grants are the caller's business.
 */
export class PipelineFunction extends NodejsFunction {
  constructor(scope: Construct, id: string, props: PipelineFunctionProps) {
    assertLocalEsbuild();
    const sqlAdapter = scope.node.tryGetContext(sqlAdapterContextKey) as string | undefined;
    const logGroup = new LogGroup(scope, `${id}Logs`, {
      retention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    // A role of its own instead of AWSLambdaBasicExecutionRole: write to this log group only.
    const role = new Role(scope, `${id}Role`, {
      assumedBy: new ServicePrincipal('lambda.amazonaws.com'),
      description: `${props.serviceName} function`,
    });
    logGroup.grantWrite(role);
    super(scope, id, {
      entry: resolve(projectRoot, props.entry),
      projectRoot,
      depsLockFilePath: join(projectRoot, 'package-lock.json'),
      handler: 'handler',
      description: props.description,
      runtime: Runtime.NODEJS_22_X,
      architecture: Architecture.ARM_64,
      memorySize: props.memorySize,
      timeout: props.timeout,
      tracing: Tracing.ACTIVE,
      logGroup,
      role,
      reservedConcurrentExecutions: props.reservedConcurrentExecutions,
      environment: {
        POWERTOOLS_SERVICE_NAME: props.serviceName,
        POWERTOOLS_METRICS_NAMESPACE: metricsNamespace,
        POWERTOOLS_LOG_LEVEL: 'INFO',
        NODE_OPTIONS: '--enable-source-maps',
        ...props.environment,
      },
      bundling: {
        format: OutputFormat.ESM,
        target: 'node22',
        mainFields: ['module', 'main'],
        banner: esmRequireBanner,
        minify: true,
        sourceMap: true,
        sourcesContent: false,
        // Bundle the SDK: the runtime's copy lags and differs from the versions tested here.
        bundleAwsSDK: true,
        // pg's optional native binding is never used (pure JS client).
        externalModules: ['pg-native'],
        define: sqlAdapter ? { 'process.env.PIPELINE_SQL_ADAPTER': JSON.stringify(sqlAdapter) } : undefined,
        // Bundling is local esbuild only (checked above); this image is never pulled or built.
        dockerImage: DockerImage.fromRegistry('local-esbuild-only'),
        forceDockerBundling: false,
      },
    });
    Validations.of(role).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'Active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level permissions (the test suite checks that only these actions get "*").',
    });
  }
}
