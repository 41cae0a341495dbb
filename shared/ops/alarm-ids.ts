/**
 * The pipeline's alarms by id, one list for both realizations: the CloudWatch alarms are named
 * `<stack>-<id>` (infra/aws/constructs/pipeline-alarms.ts), and the local runtime's evaluation
 * of the same thresholds (infra/local/local-alarms.ts) reports under the same ids, so the ops
 * API's `alarms` reads the same wherever it runs.
 */
export const alarmIds = {
  oldestPendingAge: 'oldest-pending-age',
  relaySilent: 'relay-silent',
  outboxDead: 'outbox-dead',
  relayErrors: 'relay-errors',
  inboxGaugesErrors: 'inbox-gauges-errors',
  /**
   * Some consumer's inbox holds DEAD records (a person is needed). One alarm for every consumer,
   * on the sum the gauges send without the `Consumer` dimension (each alarm is billed): the
   * status says whose.
   */
  inboxDead: 'inbox-dead',
  /**
   * Some consumer's oldest `PROCESSING` attempt has held its record past `oldestLeasePeriods`
   * leases. One alarm for every consumer (each alarm is billed): the status says which.
   */
  inboxOldestLease: 'inbox-oldest-lease',
  /** Some consumer's oldest `FAILED` record was first attempted more than `retryAgeShare` of its event age ago. */
  inboxRetryAge: 'inbox-retry-age',
  /** The delivery audit found delivered events missing from some consumer's inbox. */
  undelivered: 'undelivered',
  /**
   * Local only: the delivery audit found an effect of an event with no outbox row (a forged or
   * foreign event reached a consumer); ALARM while it keeps such findings. On AWS only IAM
   * principals granted PutEvents on the bus can put an event there.
   */
  foreignEffects: 'foreign-effects',
  /** AWS: the delivery audit function failed (locally its runner's errors). */
  auditErrors: 'delivery-audit-errors',
  /**
   * AWS: one per rule DLQ, and one for the consumers' dead letters. A rule's FailedInvocations
   * has no alarm of its own: its failed invocation lands in one of these queues
   * (infra/aws/constructs/pipeline-alarms.ts says why).
   */
  queueNotEmpty: (queue: string) => `queue-not-empty-${queue}`,
  /** Locally the bus keeps one dead-letter store, so one alarm stands for every queue. */
  deadLetters: 'dead-letters',
} as const;
