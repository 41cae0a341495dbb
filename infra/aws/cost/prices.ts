/**
 * AWS list prices (us-east-1, on demand, no free tier) and the usage assumptions the cost model
 * (`./model.ts`) multiplies them with. Every figure lives here once, with where it came from.
 *
 * The AWS pricing pages render most rates client-side, so the stored copies read for this file
 * often show the units and free tiers but not the numbers. A price is `confirmed` only where the
 * number itself was seen in AWS text (a pricing page, a localized copy of one, AWS documentation);
 * everything else carries a note that starts with `unconfirmed:` and says what was found instead.
 * Check those against the AWS Pricing Calculator before quoting them.
 */

/** One list price. An unconfirmed price must say why in its note. */
export type Price = {
  readonly usd: number;
  /** What one `usd` buys, e.g. `ACU-hour`, `million requests`. */
  readonly unit: string;
  /** The AWS pricing page the figure belongs to. */
  readonly source: string;
} & (
  | { readonly confirmed: true; readonly note?: string }
  | { readonly confirmed: false; readonly note: `unconfirmed: ${string}` }
);

/** One usage figure the model needs and no template holds, with the reason for its value. */
export interface Assumption {
  readonly value: number;
  readonly unit: string;
  readonly why: string;
}

const page = {
  aurora: 'https://aws.amazon.com/rds/aurora/pricing/',
  secrets: 'https://aws.amazon.com/secrets-manager/pricing/',
  kms: 'https://aws.amazon.com/kms/pricing/',
  cloudwatch: 'https://aws.amazon.com/cloudwatch/pricing/',
  lambda: 'https://aws.amazon.com/lambda/pricing/',
  apiGateway: 'https://aws.amazon.com/api-gateway/pricing/',
  eventBridge: 'https://aws.amazon.com/eventbridge/pricing/',
  dynamodb: 'https://aws.amazon.com/dynamodb/pricing/on-demand/',
  s3: 'https://aws.amazon.com/s3/pricing/',
  sns: 'https://aws.amazon.com/sns/pricing/',
  sqs: 'https://aws.amazon.com/sqs/pricing/',
  xray: 'https://aws.amazon.com/xray/pricing/',
  vpc: 'https://aws.amazon.com/vpc/pricing/',
  privateLink: 'https://aws.amazon.com/privatelink/pricing/',
} as const;

const prices = {
  auroraAcuHour: {
    usd: 0.12,
    unit: 'ACU-hour (Aurora Standard, Serverless v2, billed per second)',
    source: page.aurora,
    confirmed: false,
    note: 'unconfirmed: the stored AWS page shows the billing model, not the rate; $0.12 from c3x.dev, awsnegotiations.com (2026-05), pinpole.cloud and the static fallback of AWS-authored aws/agent-toolkit-for-aws acu_calculator.py (2026-03-28)',
  },
  auroraStorageGbMonth: {
    usd: 0.1,
    unit: 'GB-month of cluster volume used (Aurora Standard)',
    source: page.aurora,
    confirmed: false,
    note: 'unconfirmed: static fallback of AWS-authored aws/agent-toolkit-for-aws acu_calculator.py and awsnegotiations.com, not the AWS page',
  },
  auroraIoMillion: {
    usd: 0.2,
    unit: 'million I/O requests (Aurora Standard)',
    source: page.aurora,
    confirmed: false,
    note: 'unconfirmed: AWS docs (User_DBInstanceBilling) confirm I/O is billed per million requests on Aurora Standard; the $0.20 is from third-party summaries',
  },
  dataApiMillion: {
    usd: 0.35,
    unit: 'million RDS Data API requests (first billion a month; payloads metered in 32 KB steps)',
    source: page.aurora,
    confirmed: false,
    note: 'unconfirmed: recalled figure, not found in any stored source (research/aws-facts.md section 2)',
  },
  secretMonth: {
    usd: 0.4,
    unit: 'secret-month (prorated)',
    source: page.secrets,
    confirmed: false,
    note: 'unconfirmed: the page table is client-rendered; $0.40 appears in its pricing examples per a verbatim transcription (api-evangelist, read 2026-09-20)',
  },
  kmsKeyMonth: {
    usd: 1,
    unit: 'customer managed key-month (prorated hourly); each automatic rotation adds a backing key',
    source: page.kms,
    confirmed: true,
    note: 'seen on the AWS page (research/aws-facts.md section 2); rotation charges start after the first rotation, a year after creation, and are not modelled',
  },
  alarmMetricMonth: {
    usd: 0.1,
    unit: 'standard-resolution alarm metric-month',
    source: page.cloudwatch,
    confirmed: false,
    note: 'unconfirmed: the free tier (10 alarm metrics) is on the AWS page; the $0.10 rate is from c3x.dev and infracost output',
  },
  highResolutionAlarmMetricMonth: {
    usd: 0.3,
    unit: 'high-resolution (period under 60 s) alarm metric-month',
    source: page.cloudwatch,
    confirmed: false,
    note: 'unconfirmed: third-party summaries (c3x.dev, infracost output)',
  },
  customMetricMonth: {
    usd: 0.3,
    unit: 'custom metric-month (first 10,000), prorated by the hours it receives data',
    source: page.cloudwatch,
    confirmed: false,
    note: 'unconfirmed: $0.30 and the first-10,000 tier from signoz.io (2026-02) and third-party copies of the page; the hourly proration is recalled, not seen',
  },
  cloudWatchApiThousandRequests: {
    usd: 0.01,
    unit: '1,000 CloudWatch API requests (DescribeAlarms and the like; first 1,000,000 a month free)',
    source: page.cloudwatch,
    confirmed: false,
    note: 'unconfirmed: $0.01 per 1,000 requests recalled from the CloudWatch pricing page; the free tier is not applied here',
  },
  dashboardMonth: {
    usd: 3,
    unit: 'dashboard-month',
    source: page.cloudwatch,
    confirmed: false,
    note: 'unconfirmed: the free tier (3 dashboards of up to 50 metrics) is on the AWS page; $3 from factualminds.com (2026-06)',
  },
  logsIngestGb: {
    usd: 0.5,
    unit: 'GB ingested into CloudWatch Logs (Standard class)',
    source: page.cloudwatch,
    confirmed: false,
    note: 'unconfirmed: the 5 GB free tier is on the AWS page; $0.50 from factualminds.com and cloudburn.io (2026)',
  },
  lambdaArmGbSecond: {
    usd: 0.0000133334,
    unit: 'GB-second of arm64 duration (first 7.5 billion a month)',
    source: page.lambda,
    confirmed: false,
    note: 'unconfirmed: the AWS table is client-rendered; figure from the constants artillery ships, citing the page, and cloudchipr.com',
  },
  lambdaX86GbSecond: {
    usd: 0.0000166667,
    unit: 'GB-second of x86_64 duration (first 6 billion a month)',
    source: page.lambda,
    confirmed: false,
    note: 'unconfirmed: the AWS table is client-rendered; figure from the constants artillery ships, citing the page',
  },
  lambdaRequestMillion: {
    usd: 0.2,
    unit: 'million requests (AWS docs: each start in response to EventBridge, API Gateway or an Invoke is one)',
    source: page.lambda,
    confirmed: false,
    note: 'unconfirmed: the rate is client-rendered on the page; $0.20 per million from its Managed Instances text (api-evangelist transcription) and third parties',
  },
  apiGatewayRestMillion: {
    usd: 3.5,
    unit: 'million REST API calls (first 333 million a month)',
    source: page.apiGateway,
    confirmed: true,
    note: 'AWS whitepaper "Best Practices for Designing Amazon API Gateway Private APIs", table 4',
  },
  eventBridgeCustomEventMillion: {
    usd: 1,
    unit: 'million custom events published, each 64 KB chunk of a payload one event',
    source: page.eventBridge,
    confirmed: false,
    note: 'unconfirmed: the 64 KB chunking is on the AWS page; the $1.00 rate from cloudburn.io (2026-03), wring.co and infracost',
  },
  eventBridgeArchiveGb: {
    usd: 0.1,
    unit: 'GB of events processed into an archive',
    source: page.eventBridge,
    confirmed: false,
    note: 'unconfirmed: cloudburn.io (2026-03), hykell.com, infracost',
  },
  eventBridgeArchiveStorageGbMonth: {
    usd: 0.023,
    unit: 'GB-month of archived events',
    source: page.eventBridge,
    confirmed: false,
    note: 'unconfirmed: cloudburn.io (2026-03), infracost',
  },
  eventBridgeScheduledRuleInvocation: {
    usd: 0,
    unit: 'invocation of a scheduled rule (legacy scheduled rules, not EventBridge Scheduler)',
    source: page.eventBridge,
    confirmed: false,
    note: 'unconfirmed: no current AWS text found. An older CloudWatch pricing page lists "Events: All events except custom events are included" and the EventBridge page prices only custom, partner and cross-account events; scheduled-rule events are none of these. (Scheduler would be $1.00/M after 14 M free a month.)',
  },
  dynamoWriteRequestMillion: {
    usd: 0.625,
    unit: 'million write request units, on demand (1 KB each)',
    source: page.dynamodb,
    confirmed: false,
    note: 'unconfirmed: airbyte.com (2025-07), after the November 2024 cut; the unit sizes are in the AWS whitepaper "How AWS Pricing Works"',
  },
  dynamoReadRequestMillion: {
    usd: 0.125,
    unit: 'million read request units, on demand (4 KB strongly consistent, or two eventually consistent)',
    source: page.dynamodb,
    confirmed: false,
    note: 'unconfirmed: airbyte.com (2025-07), after the November 2024 cut',
  },
  s3PutThousand: {
    usd: 0.005,
    unit: 'thousand PUT requests, S3 Standard',
    source: page.s3,
    confirmed: false,
    note: 'unconfirmed: third-party guides (devnotes.tech, cloudkaramchari.com); the stored AWS page shows no rate',
  },
  snsPublishMillion: {
    usd: 0.5,
    unit: 'million publishes to a standard topic (64 KB chunks)',
    source: page.sns,
    confirmed: false,
    note: 'unconfirmed: factualminds.com (2026-06)',
  },
  dynamoStorageGbMonth: {
    usd: 0.25,
    unit: 'GB-month of table storage, Standard table class (items billed at their size plus 100 bytes each; first 25 GB a month free, not applied)',
    source: page.dynamodb,
    confirmed: false,
    note: 'unconfirmed: recalled from the AWS page; the 100-byte overhead per item is in the DynamoDB developer guide (item sizes)',
  },
  dynamoPitrGbMonth: {
    usd: 0.2,
    unit: 'GB-month of continuous backups (point-in-time recovery), on the table size',
    source: page.dynamodb,
    confirmed: false,
    note: 'unconfirmed: recalled from the AWS page',
  },
  sqsRequestMillion: {
    usd: 0.4,
    unit: 'million requests to a standard queue (64 KB chunks; first million a month free, not applied)',
    source: page.sqs,
    confirmed: false,
    note: 'unconfirmed: recalled; the stored AWS page shows the units and the free tier, not the rate',
  },
  xrayTraceMillion: {
    usd: 5,
    unit: 'million traces recorded (first 100,000 a month free, not applied)',
    source: page.xray,
    confirmed: true,
    note: 'localized copies of the AWS page (de, cn): 0.000005 USD per trace recorded',
  },
  natGatewayHour: {
    usd: 0.045,
    unit: 'NAT gateway-hour (plus $0.045 per GB processed, not modelled)',
    source: page.vpc,
    confirmed: false,
    note: 'unconfirmed: recalled; only used if the template has a NAT gateway',
  },
  interfaceEndpointAzHour: {
    usd: 0.01,
    unit: 'interface VPC endpoint-hour per Availability Zone (plus data processed, not modelled)',
    source: page.privateLink,
    confirmed: false,
    note: 'unconfirmed: recalled; only used if the template has an interface endpoint',
  },
  publicIpv4Hour: {
    usd: 0.005,
    unit: 'public IPv4 address-hour (Elastic IP)',
    source: page.vpc,
    confirmed: false,
    note: 'unconfirmed: recalled; only used if the template has an Elastic IP',
  },
} as const satisfies Record<string, Price>;

const assumptions = {
  hoursPerMonth: { value: 730, unit: 'hours', why: 'the month AWS pricing examples use (8,760 h / 12)' },
  auroraActiveAcu: {
    value: 0.5,
    unit: 'ACU',
    why: 'capacity of an awake MinCapacity-0 instance doing almost nothing: AWS does not document the floor (its example shows a resume at 2 ACU), 0.5 is the smallest non-zero setting',
  },
  auroraResumeSeconds: {
    value: 15,
    unit: 's',
    why: 'AWS: "the typical time to resume might be approximately 15 seconds" (30 s or more after a day paused)',
  },
  auroraStorageGb: {
    value: 1,
    unit: 'GB',
    why: 'a near-empty cluster volume (catalogs, a small outbox); read VolumeBytesUsed once deployed. Backups within the retention period are free up to the volume size',
  },
  relaySweepSeconds: {
    value: 1,
    unit: 's',
    why: 'an idle sweep: claim nothing, read the stats, purge nothing, read the stats, return (warm function)',
  },
  relaySweepDataApiCalls: {
    value: 4,
    unit: 'requests',
    why: 'one claim (a run widens to `topology.relay.roundsInFlight` rounds only while claims come back full), stats, purge, stats (shared/outbox/relay.ts runRelay)',
  },
  relayIdleLogBytes: { value: 1024, unit: 'bytes', why: 'START/END/REPORT lines plus one EMF document' },
  sqsMappingIdlePollers: {
    value: 5,
    unit: 'pollers',
    why: 'an SQS event source mapping long-polls its standard queue even when it is empty; "when traffic is low, Lambda scales back the processing to five concurrent batches" (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html, read 2026-12-05): the count AWS documents for a quiet queue',
  },
  sqsMappingFewestPollers: {
    value: 2,
    unit: 'pollers',
    why: 'the low end of the idle range: Lambda "can optimize to as few as 2 concurrent batches" on a quiet queue, but not for a mapping with maximum concurrency set (same page), which stays at sqsMappingIdlePollers',
  },
  sqsRequestsPerDelivery: {
    value: 4,
    unit: 'requests',
    why: "each event a consumer's queue carries: EventBridge's SendMessage, the poller's ReceiveMessage and its delete of a handled message, and the handler's ChangeMessageVisibility that proves the receipt (shared/consumers/queue-delivery.ts); priced one message per receive and per delete, as at a trickle: a batch of 10 shares its receive and delete (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html)",
  },
  sqsLongPollSeconds: {
    value: 20,
    unit: 's',
    why: "the longest ReceiveMessage wait (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/best-practices-setting-up-long-polling.html): an empty queue's poller asks at most this often",
  },
  gaugeRunSeconds: {
    value: 0.5,
    unit: 's',
    why: 'a guess: three small DynamoDB Queries per shard of the operator index and consumer, all in parallel, from a warm function',
  },
  gaugeQueriesPerShard: {
    value: 3,
    unit: 'Queries',
    why: 'one per open status (PROCESSING, FAILED, DEAD) on each shard (`topology.inbox.openIndexShards`) of the open-records index',
  },
  gaugeQueryReadUnits: {
    value: 0.5,
    unit: 'RRU',
    why: 'an eventually consistent Query on a GSI of under 4 KB (an idle index is empty) is the minimum half unit',
  },
  gaugeLogBytes: {
    value: 1024,
    unit: 'bytes',
    why: 'START/END/REPORT lines plus one EMF document per consumer',
  },
  auditIdleSeconds: {
    value: 0.5,
    unit: 's',
    why: 'a guess: an idle delivery audit run (shared/audit/delivery-audit.ts) takes its lease, finds no open finding and no delivered row past its cursor, releases, reads its counters and its alarms, from a warm function',
  },
  auditIdleDataApiCalls: {
    value: 5,
    unit: 'requests',
    why: 'acquire the lease, the findings to recheck, the next page (empty), release, the undelivered counters',
  },
  auditPageSeconds: {
    value: 1,
    unit: 's',
    why: 'a guess: one page of `topology.audit.pageSize` delivered rows through the Data API, one BatchGetItem per 100 (event, consumer) keys, 8 at a time, and the statement that records the page',
  },
  auditDataApiCallsPerPage: {
    value: 2,
    unit: 'requests',
    why: 'the page read and the statement that records its findings and moves the cursor',
  },
  tasksApiSeconds: {
    value: 0.1,
    unit: 's',
    why: 'one approve: one Data API statement and an async Invoke',
  },
  relayNudgeSeconds: {
    value: 0.2,
    unit: 's',
    why: 'a nudged run at low rates: claim one row, PutEvents, mark it, read the stats',
  },
  consumerSeconds: { value: 0.15, unit: 's', why: 'inbox begin, the effect, inbox complete' },
  taskCreateSeconds: {
    value: 0.1,
    unit: 's',
    why: 'one create (POST /tasks) before each approval: one Data API statement, no nudge',
  },
  taskCreateDataApiCalls: {
    value: 1,
    unit: 'requests',
    why: 'one ExecuteStatement: the task row with its idempotency key (shared/tasks/task-store.ts)',
  },
  taskCreateIoPerTask: {
    value: 3,
    unit: 'I/O requests',
    why: 'a guess, not a measurement: one INSERT of a row and its index entries',
  },
  taskCreateLogBytes: {
    value: 2 * 1024,
    unit: 'bytes',
    why: 'the API access log line and the tasks API invocation of the create',
  },
  dynamoItemOverheadBytes: {
    value: 100,
    unit: 'bytes',
    why: 'DynamoDB bills storage by the size of each item plus 100 bytes of indexing overhead',
  },
  approveDataApiCalls: {
    value: 1,
    unit: 'requests',
    why: 'one ExecuteStatement: the task change and its outbox row in one statement (test/integration/data-api-lost-answers.test.ts counts it)',
  },
  relayDataApiCallsPerEvent: {
    value: 4,
    unit: 'requests',
    why: 'at low rates each nudged run handles one event: claim, mark delivered, stats, purge',
  },
  auroraIoPerApproval: {
    value: 10,
    unit: 'I/O requests',
    why: 'a guess, not a measurement: the UPDATE, the INSERT, the relay mark and the purge each write WAL pages',
  },
  eventBytes: {
    value: 1024,
    unit: 'bytes',
    why: 'a CloudEvent with ids, version and a short summary, never the body',
  },
  inboxItemKb: {
    value: 1.5,
    unit: 'KB',
    why: 'an inbox record holds the event itself (for redrive) plus its state',
  },
  inboxWritesPerConsumer: {
    value: 2,
    unit: 'writes',
    why: 'begin (the update that creates the record) and complete (an update, billed on the larger of the item before and after)',
  },
  inboxIndexWritesPerConsumer: {
    value: 2,
    unit: 'WRU',
    why: 'the open-records entry written at begin and removed at complete: keys only, under 1 KB, one write unit each',
  },
  logBytesPerApproval: {
    value: 4 * 1024,
    unit: 'bytes',
    why: 'API access log, tasks-api and relay, a few structured lines each (each consumer it reaches adds logBytesPerConsumerEvent)',
  },
  logBytesPerConsumerEvent: {
    value: 2 * 1024,
    unit: 'bytes',
    why: 'one consumer invocation: its start, its effect and its result, a few structured lines',
  },
  apiMethodDetailedMetrics: {
    value: 5,
    unit: 'metrics',
    why: 'Count, 4XXError, 5XXError, Latency, IntegrationLatency of the approve method when the stage enables detailed metrics (billed as custom metrics: unconfirmed)',
  },
} as const satisfies Record<string, Assumption>;

/** Every price and assumption the cost model reads, with the date and region they hold for. */
export interface PriceBook {
  /** When the figures were collected (from stored copies of the sources, dated 2025-07 to 2026-11). */
  readonly asOf: string;
  readonly region: 'us-east-1';
  readonly prices: Readonly<Record<keyof typeof prices, Price>>;
  readonly assumptions: Readonly<Record<keyof typeof assumptions, Assumption>>;
}

/** The prices the report uses: us-east-1 list prices, free tiers not applied (an account shares them). */
export const priceBook: PriceBook = {
  asOf: '2026-12-01',
  region: 'us-east-1',
  prices,
  assumptions,
};
