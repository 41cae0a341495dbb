/**
 * AWS's published default quotas (us-east-1) that the capacity model (`./model.ts`) holds the
 * pipeline's use against, each with the page it comes from and the day it was read. Every
 * figure lives here once.
 *
 * `adjustable` says whether AWS raises it on request (Service Quotas or a support case): a
 * component at its limit then needs a quota increase, not a change of ours. A fixed limit that
 * our design runs into (a partition's throughput, the control-plane rate) is ours to design
 * around, and the model counts it as our own limit.
 *
 * The AWS pages were read from stored copies; where the number was seen only in an archived
 * copy of AWS's documentation (the awsdocs GitHub repositories, frozen in 2023) or elsewhere,
 * the note says so. Check `aws service-quotas list-service-quotas --service-code <code>` for
 * the values an account actually has: new accounts start lower for Lambda.
 */

/** One published quota. */
export interface Quota {
  readonly value: number;
  readonly unit: string;
  /** Raised by AWS on request. */
  readonly adjustable: boolean;
  /** The AWS page that states it. */
  readonly source: string;
  /** When the page was read (YYYY-MM-DD). */
  readonly read: string;
  readonly note?: string;
}

const read = '2026-12-01';

const page = {
  apiGateway: 'https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html',
  lambdaQuotas: 'https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html',
  lambdaScaling: 'https://docs.aws.amazon.com/lambda/latest/dg/scaling-behavior.html',
  dataApi: 'https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/data-api.limitations.html',
  auroraServerless:
    'https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/aurora-serverless-v2.requirements.html',
  eventBridge: 'https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html',
  dynamoPartition:
    'https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html',
  dynamoQuotas: 'https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html',
  dynamoOnDemand:
    'https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode.html',
  dynamoWarm: 'https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html',
  sqsMessages:
    'https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html',
  sqsQueues: 'https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-queues.html',
  cloudWatch: 'https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch_limits.html',
  cloudWatchLogs: 'https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/cloudwatch_limits_cwl.html',
} as const;

export const quotas = {
  apiGatewayAccountRps: {
    value: 10_000,
    unit: 'requests per second, per account and Region, across every API (token bucket, burst 5,000)',
    adjustable: true,
    source: page.apiGateway,
    read,
    note: '2,500 RPS (burst 1,250) in Africa (Cape Town), Europe (Milan), Asia Pacific (Jakarta) and ten other newer Regions (quotasIn)',
  },
  lambdaConcurrency: {
    value: 1_000,
    unit: 'concurrent executions per account and Region, shared by every function without a reservation',
    adjustable: true,
    source: page.lambdaQuotas,
    read,
    note: 'new accounts start lower and are raised with use; Lambda keeps 100 unreserved whatever is reserved',
  },
  lambdaUnreservedMinimum: {
    value: 100,
    unit: 'concurrent executions Lambda keeps unreserved (reservations may take the rest)',
    adjustable: false,
    source: page.lambdaQuotas,
    read,
  },
  lambdaScalingRate: {
    value: 1_000,
    unit: 'new execution environments per function every 10 seconds',
    adjustable: false,
    source: page.lambdaScaling,
    read,
    note: 'how fast a function reaches its concurrency, not how much it may have: a ramp from idle to 10,000 approvals/s takes tens of seconds',
  },
  lambdaSyncInvokeRps: {
    value: 10,
    unit: 'x the concurrency quota: synchronous invocation requests per second per Region, all sources',
    adjustable: true,
    source: page.lambdaQuotas,
    read,
    note: 'the number itself seen in the archived awsdocs/aws-lambda-developer-guide copy; raised with the concurrency quota',
  },
  lambdaAsyncInvokeRps: {
    value: 10,
    unit: 'x the concurrency quota: asynchronous invocation requests per second per Region from non-AWS sources (our Invoke calls)',
    adjustable: true,
    source: page.lambdaQuotas,
    read,
    note: 'asynchronous invocations by AWS services (EventBridge) are unlimited; raised with the concurrency quota',
  },
  dataApiRequestsPerSecond: {
    value: Number.POSITIVE_INFINITY,
    unit: 'RDS Data API requests per second on Aurora Serverless v2 and provisioned clusters',
    adjustable: false,
    source: page.dataApi,
    read,
    note: '"For Aurora Serverless v1, the maximum number of requests per second is 1,000. For all other supported databases, there is no limit."',
  },
  auroraMaxAcu: {
    value: 256,
    unit: 'ACUs per Aurora Serverless v2 instance (128 on older engine versions); each ACU about 2 GiB of memory with its CPU',
    adjustable: false,
    source: page.auroraServerless,
    read,
    note: 'the Data API runs every statement on the writer, so this is the ceiling of one cluster',
  },
  eventBridgePutEventsTps: {
    value: 10_000,
    unit: 'PutEvents requests per second per account (us-east-1; by Region in quotasIn)',
    adjustable: true,
    source: page.eventBridge,
    read,
    note: '"Maximum number of requests per second for PutEvents API": requests, of up to 10 entries each',
  },
  eventBridgeInvocationsTps: {
    value: 18_750,
    unit: 'rule target invocations per second per account (us-east-1; by Region in quotasIn)',
    adjustable: true,
    source: page.eventBridge,
    read,
    note: 'past it invocations are delayed, not lost',
  },
  eventBridgeControlPlaneTps: {
    value: 50,
    unit: 'requests per second for all control-plane APIs together (EnableRule, DisableRule, PutRule, ...)',
    adjustable: false,
    source: page.eventBridge,
    read,
  },
  dynamoPartitionWcu: {
    value: 1_000,
    unit: 'write units per second per partition (3,000 read units, or a linear combination)',
    adjustable: false,
    source: page.dynamoPartition,
    read,
    note: 'one partition key value lives on one partition; adaptive capacity may split hot items but AWS promises nothing beyond this',
  },
  dynamoPartitionRcu: {
    value: 3_000,
    unit: 'read units per second per partition',
    adjustable: false,
    source: page.dynamoPartition,
    read,
  },
  dynamoOnDemandTableWru: {
    value: 40_000,
    unit: 'write request units per second per on-demand table (and as much read)',
    adjustable: true,
    source: page.dynamoQuotas,
    read,
    note: 'no account-level quota applies to on-demand tables; a new on-demand table serves up to 4,000 WRU at once and doubles its previous peak within 30 minutes (on-demand-capacity-mode), so a cold launch at full rate throttles for a while',
  },
  dynamoNewTableWarmWru: {
    value: 4_000,
    unit: 'write request units per second a new on-demand table (and each of its global secondary indexes) serves at once',
    adjustable: true,
    source: page.dynamoWarm,
    read: '2026-12-05',
    note: '"New on-demand tables will be able to sustain up to 4,000 writes per second and 12,000 reads per second" (pre-warming-on-demand-capacity-mode.html); past that a table throttles until it has doubled its previous peak, which takes up to 30 minutes. Raised per table by setting its warm throughput (WarmThroughput), billed once',
  },
  sqsStandardApiRps: {
    value: Number.POSITIVE_INFINITY,
    unit: 'API calls per second per action on a standard queue ("nearly unlimited")',
    adjustable: false,
    source: page.sqsMessages,
    read,
  },
  sqsInFlight: {
    value: 120_000,
    unit: 'in-flight messages per standard queue (received, not yet deleted)',
    adjustable: true,
    source: page.sqsQueues,
    read,
  },
  cloudWatchPutMetricDataTps: {
    value: 500,
    unit: 'PutMetricData requests per second per Region',
    adjustable: true,
    source: page.cloudWatch,
    read,
    note: 'the number seen in the archived awsdocs/amazon-cloudwatch-user-guide copy; the current page may be higher',
  },
  cloudWatchLogsPutLogEventsTps: {
    value: 1_500,
    unit: 'PutLogEvents requests per second per account and Region (800 in some Regions)',
    adjustable: true,
    source: page.cloudWatchLogs,
    read,
    note: 'the number seen in the archived awsdocs/amazon-cloudwatch-logs-user-guide copy; AWS has raised it since in some Regions. It counts the PutLogEvents calls an account makes; Lambda and API Gateway deliver their logs themselves',
  },
} as const satisfies Record<string, Quota>;

/** Every quota the capacity model reads, by name. */
export type QuotaBook = Readonly<Record<keyof typeof quotas, Quota>>;

/**
 * Regions the capacity report holds the stack against: the two largest, where EventBridge's and
 * API Gateway's defaults are highest, and two smaller ones. Only the quotas whose defaults differ
 * by Region are listed; the others are the same everywhere (Lambda's 1,000 concurrent executions,
 * DynamoDB's 40,000 units a table, the Data API's none).
 */
export const regionalQuotas = {
  'us-east-1': {},
  'eu-west-1': { eventBridgePutEventsTps: 10_000, eventBridgeInvocationsTps: 18_750 },
  'sa-east-1': { eventBridgePutEventsTps: 600, eventBridgeInvocationsTps: 1_100 },
  'eu-south-1': { eventBridgePutEventsTps: 400, eventBridgeInvocationsTps: 750, apiGatewayAccountRps: 2_500 },
} as const satisfies Record<string, Partial<Record<keyof typeof quotas, number>>>;

/** A Region of the capacity report. */
export type Region = keyof typeof regionalQuotas;

/** The Regions of the capacity report, in its order. */
export const regions = Object.keys(regionalQuotas) as readonly Region[];

/** Where each Regional figure was read, in the page's words. */
const regionalRead = '2026-12-05';

/**
 * The quota book of `region`: the us-east-1 defaults above with the Region's own where it has
 * one (EventBridge's quotas table lists PutEvents and invocations by Region; API Gateway's lists
 * the Regions at 2,500 requests a second).
 */
export function quotasIn(region: Region): QuotaBook {
  const own: Partial<Record<keyof typeof quotas, number>> = regionalQuotas[region];
  return Object.fromEntries(
    (Object.keys(quotas) as (keyof typeof quotas)[]).map((name) => {
      const value = own[name];
      const q: Quota = quotas[name];
      return [
        name,
        value === undefined || region === 'us-east-1'
          ? q
          : { ...q, value, read: regionalRead, note: `${region}'s default${q.note ? `; ${q.note}` : ''}` },
      ];
    }),
  ) as QuotaBook;
}
