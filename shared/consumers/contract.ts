/**
 * Names the consumer functions, the CDK stack and the local runtime must agree on: the
 * environment each consumer reads and the metrics it emits. One place, so a rename cannot
 * leave an alarm watching a metric nobody emits.
 */

/** Environment variables of the consumer functions. */
export const consumerEnv = {
  /** Always set: which consumer of the registry this function is. */
  consumerName: 'CONSUMER_NAME',
  /** DynamoDB inbox table, key (consumer, eventId). */
  inboxTable: 'INBOX_TABLE_NAME',
  /**
   * JSON: the consumer's inbox settings as its topology gives them (`inboxSettingsFor`) and the
   * inbox index's shard count (`openIndexShards`). The stack writes it, so the function's bundle
   * needs no topology of its own.
   */
  inboxSettings: 'INBOX_SETTINGS',
  // Each declared table, topic and bucket has a variable of its own: `resourceEnvName` (./resources.ts).
} as const;

/** The CloudWatch dimension that tells consumers' metrics apart. */
export const consumerDimension = 'Consumer';

/** Metric names every consumer emits (namespace `ContentPipeline`, dimension `Consumer`). */
export const consumerMetricNames = {
  processed: 'EventsProcessed',
  duplicate: 'DuplicateDeliveries',
  failed: 'FailedAttempts',
  dead: 'InboxDeadRecords',
  poison: 'PoisonEvents',
} as const;

/** Powertools service name of a consumer function (`consumer-index`, ...): its logs' and metrics' `service`. */
export const consumerServiceName = (name: string): string => `consumer-${name}`;

/** Powertools service name of the inbox gauges function. */
export const inboxGaugesServiceName = 'inbox-gauges';

/**
 * The gauges the inbox-gauges function emits on its schedule, per consumer (dimension
 * `Consumer`): DEAD and FAILED records now, and the age in seconds of the oldest `PROCESSING`
 * lease and of the oldest `FAILED` record's first attempt (0 when there is none). A gauge stays
 * at its value until the next one, unlike the per-invocation `InboxDeadRecords` count.
 */
export const inboxGaugeMetricNames = {
  dead: 'DeadRecordsInInbox',
  failed: 'FailedRecordsInInbox',
  oldestLease: 'OldestLeaseSeconds',
  retryAge: 'OldestRetryAgeSeconds',
} as const;

/** Powertools service name of the delivery audit function. */
export const deliveryAuditServiceName = 'delivery-audit';

/**
 * What the delivery audit emits after each run, per consumer (dimension `Consumer`): delivered
 * events it found missing from the consumer's inbox and not found since (a gauge).
 */
export const auditMetricNames = {
  undelivered: 'UndeliveredToConsumer',
} as const;

/** Environment variables of a consumer function on AWS: its queue (the local runtime has none). */
export const consumerQueueEnv = {
  url: 'CONSUMER_QUEUE_URL',
  arn: 'CONSUMER_QUEUE_ARN',
  /** The queue's visibility timeout: a received message is hidden this long. */
  visibilityTimeoutSeconds: 'CONSUMER_QUEUE_VISIBILITY_SECONDS',
} as const;
