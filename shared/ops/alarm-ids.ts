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
  inboxDead: (consumer: string) => `inbox-dead-${consumer}`,
  /** A consumer's oldest `PROCESSING` attempt has held its record past `oldestLeasePeriods` leases. */
  inboxOldestLease: (consumer: string) => `inbox-oldest-lease-${consumer}`,
  /** A consumer's oldest `FAILED` record was first attempted more than `retryAgeShare` of its event age ago. */
  inboxRetryAge: (consumer: string) => `inbox-retry-age-${consumer}`,
  /** The delivery audit found delivered events missing from the consumer's inbox. */
  undelivered: (consumer: string) => `undelivered-${consumer}`,
  /** AWS: the delivery audit function failed (locally its runner's errors). */
  auditErrors: 'delivery-audit-errors',
  /** AWS: one per rule DLQ and on-failure queue. */
  queueNotEmpty: (queue: string) => `queue-not-empty-${queue}`,
  /** Locally the bus keeps one dead-letter store, so one alarm stands for every queue. */
  deadLetters: 'dead-letters',
  ruleFailedInvocations: (rule: string) => `rule-failed-invocations-${rule}`,
} as const;
