import { CallRecorder } from './calls';
import { type CloudWatchStandin, type CloudWatchStandinOptions, startCloudWatchStandin } from './cloudwatch';
import { startDynamoDbProxy } from './dynamodb';
import { startEventBridgeProxy } from './eventbridge';
import type { LocalEndpoint } from './http';
import { type LambdaStandin, type LambdaStandinOptions, startLambdaStandin } from './lambda';
import type { RecordingProxy } from './proxy';
import { startRdsDataProxy } from './rds-data';
import { startS3Proxy } from './s3';
import {
  type SecretsManagerStandin,
  type SecretsManagerStandinOptions,
  startSecretsManagerStandin,
} from './secrets-manager';
import { type SnsStandin, type SnsStandinOptions, startSnsStandin } from './sns';
import { type SqsStandin, type SqsStandinOptions, startSqsStandin } from './sqs';

export { anonymousCaller, CallRecorder, callerOf, parseSigV4Authorization, type RecordedCall } from './calls';
export type { LocalEndpoint } from './http';
export { type RecordingProxy, startRecordingProxy } from './proxy';
export { startS3rver } from './s3rver';

/**
 * The variable each SDK v3 client reads its endpoint from: `AWS_ENDPOINT_URL_` plus the
 * client's serviceId, upper-cased, spaces as `_` (getEndpointUrlConfig in
 * @smithy/core/dist-cjs/submodules/endpoints; serviceIds from each client's runtime config:
 * "SNS", "SQS", "Lambda", "Secrets Manager", "CloudWatch", "DynamoDB", "S3", "EventBridge",
 * "RDS Data"). No variable sets S3's forcePathStyle, and none is needed here: for an IP
 * endpoint such as 127.0.0.1 the S3 client addresses buckets path-style by itself.
 */
export const endpointEnvNames = {
  sns: 'AWS_ENDPOINT_URL_SNS',
  sqs: 'AWS_ENDPOINT_URL_SQS',
  lambda: 'AWS_ENDPOINT_URL_LAMBDA',
  secretsManager: 'AWS_ENDPOINT_URL_SECRETS_MANAGER',
  cloudwatch: 'AWS_ENDPOINT_URL_CLOUDWATCH',
  dynamodb: 'AWS_ENDPOINT_URL_DYNAMODB',
  s3: 'AWS_ENDPOINT_URL_S3',
  eventbridge: 'AWS_ENDPOINT_URL_EVENTBRIDGE',
  rdsData: 'AWS_ENDPOINT_URL_RDS_DATA',
} as const;

/** The engines the recording proxies forward to; a proxy starts only for a backend given. */
export interface AwsBackends {
  /** dynalite or DynamoDB Local. */
  readonly dynamodb?: string;
  /** s3rver (see ./s3rver.ts). */
  readonly s3?: string;
  /** A PutEvents endpoint, e.g. the local bus. */
  readonly eventbridge?: string;
  /** A Data API endpoint, e.g. test/support/data-api-server.ts. */
  readonly rdsData?: string;
}

/** How the whole set is started; each service's own options, without the shared recorder. */
export interface AwsStandinsOptions {
  /** Shared by every stand-in. @default a new recorder in us-east-1 / 123456789012 */
  readonly recorder?: CallRecorder;
  readonly backends?: AwsBackends;
  readonly sns?: Omit<SnsStandinOptions, 'recorder'>;
  readonly sqs?: Omit<SqsStandinOptions, 'recorder'>;
  readonly lambda?: Omit<LambdaStandinOptions, 'recorder'>;
  readonly secretsManager?: Omit<SecretsManagerStandinOptions, 'recorder'>;
  readonly cloudwatch?: Omit<CloudWatchStandinOptions, 'recorder'>;
}

/** Every stand-in of a rehearsal, the recorder they share, and the env that points SDKs at them. */
export interface AwsStandins {
  readonly recorder: CallRecorder;
  readonly sns: SnsStandin;
  readonly sqs: SqsStandin;
  readonly lambda: LambdaStandin;
  readonly secretsManager: SecretsManagerStandin;
  readonly cloudwatch: CloudWatchStandin;
  readonly proxies: {
    readonly dynamodb?: RecordingProxy;
    readonly s3?: RecordingProxy;
    readonly eventbridge?: RecordingProxy;
    readonly rdsData?: RecordingProxy;
  };
  /** `AWS_ENDPOINT_URL_<SERVICE>` for every stand-in and proxy started. */
  readonly env: Readonly<Record<string, string>>;
  /** Closes every stand-in and proxy (not the backends, which the caller started). */
  close(): Promise<void>;
}

/**
 * Starts the in-memory stand-ins and a recording proxy per backend given, all recording into
 * one CallRecorder. If one fails to start, the ones already started are closed again.
 */
export async function startAwsStandins(options: AwsStandinsOptions = {}): Promise<AwsStandins> {
  const recorder = options.recorder ?? new CallRecorder();
  const started: LocalEndpoint[] = [];
  // Every start, settled: on a failure the ones that did start are closed, none left listening.
  const starts: Promise<void>[] = [];
  const track = <T extends LocalEndpoint>(starting: Promise<T>): Promise<T> => {
    starts.push(
      starting.then(
        (endpoint) => {
          started.push(endpoint);
        },
        () => undefined, // the rejection reaches the caller through Promise.all below
      ),
    );
    return starting;
  };
  const closeAll = async () => {
    const results = await Promise.allSettled(started.splice(0).map((e) => e.close()));
    const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failures.length > 0) {
      throw new AggregateError(
        failures.map((f) => f.reason),
        'closing the AWS stand-ins failed',
      );
    }
  };
  try {
    const backends = options.backends ?? {};
    const optional = <T extends LocalEndpoint>(
      backend: string | undefined,
      start: (b: string) => Promise<T>,
    ) => (backend === undefined ? Promise.resolve(undefined) : track(start(backend)));
    const [sns, sqs, lambda, secretsManager, cloudwatch, dynamodb, s3, eventbridge, rdsData] =
      await Promise.all([
        track(startSnsStandin({ ...options.sns, recorder })),
        track(startSqsStandin({ ...options.sqs, recorder })),
        track(startLambdaStandin({ ...options.lambda, recorder })),
        track(startSecretsManagerStandin({ ...options.secretsManager, recorder })),
        track(startCloudWatchStandin({ ...options.cloudwatch, recorder })),
        optional(backends.dynamodb, (backend) => startDynamoDbProxy({ backend, recorder })),
        optional(backends.s3, (backend) => startS3Proxy({ backend, recorder })),
        optional(backends.eventbridge, (backend) => startEventBridgeProxy({ backend, recorder })),
        optional(backends.rdsData, (backend) => startRdsDataProxy({ backend, recorder })),
      ]);
    const endpoints: Partial<Record<keyof typeof endpointEnvNames, LocalEndpoint>> = {
      sns,
      sqs,
      lambda,
      secretsManager,
      cloudwatch,
      ...(dynamodb ? { dynamodb } : {}),
      ...(s3 ? { s3 } : {}),
      ...(eventbridge ? { eventbridge } : {}),
      ...(rdsData ? { rdsData } : {}),
    };
    const env = Object.fromEntries(
      Object.entries(endpoints).map(([service, e]) => [
        endpointEnvNames[service as keyof typeof endpointEnvNames],
        e.endpoint,
      ]),
    );
    return {
      recorder,
      sns,
      sqs,
      lambda,
      secretsManager,
      cloudwatch,
      proxies: {
        ...(dynamodb ? { dynamodb } : {}),
        ...(s3 ? { s3 } : {}),
        ...(eventbridge ? { eventbridge } : {}),
        ...(rdsData ? { rdsData } : {}),
      },
      env,
      close: closeAll,
    };
  } catch (err) {
    await Promise.all(starts);
    await closeAll().catch(() => undefined); // the start failure is the error to report
    throw err;
  }
}
