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
  /** AWS: one per rule DLQ, and one for the consumers' dead letters. */
  queueNotEmpty: (queue: string) => `queue-not-empty-${queue}`,
  /** Locally the bus keeps one dead-letter store, so one alarm stands for every queue. */
  deadLetters: 'dead-letters',
  ruleFailedInvocations: (rule: string) => `rule-failed-invocations-${rule}`,
} as const;
