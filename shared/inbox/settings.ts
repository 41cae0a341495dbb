import { type ConsumerName, consumerPolicyOf, type RelaySettings, type Topology } from '../topology';

/** How the inbox treats one consumer's attempts: retries, leases and retention. */
export interface InboxSettings {
  /** Permanent failures before a record goes `DEAD` (the topology's consumer policy). */
  readonly maxPermanentAttempts: number;
  /**
   * Transient failures and lost leases are retried until the first attempt is this old, in ms
   * (the topology's `maxEventAgeSeconds`); one after that makes the record `DEAD`.
   */
  readonly maxEventAgeMs: number;
  /** Backoff between attempts, full jitter, capped (the topology's consumer policy). */
  readonly backoff: { readonly baseMs: number; readonly maxMs: number };
  /**
   * The longest lease granted at once. Work that runs longer is kept alive by the heartbeat,
   * so a crashed attempt blocks its event for at most this long, whatever the Lambda timeout.
   */
  readonly leaseMs: number;
  /** Added to the invocation's deadline: Lambda stops the function then, clocks may drift a little. */
  readonly leaseGraceMs: number;
  /** How long a `PROCESSED` record stays (DynamoDB TTL): derived, see {@link inboxRetentionSeconds}. */
  readonly retentionSeconds: number;
  /**
   * How long a `DEAD` record stays: at least as long as a processed one (a late copy of the event
   * must find it DEAD, not start afresh), and at least {@link inboxDefaults.deadOperatorSeconds}.
   */
  readonly deadRetentionSeconds: number;
  /** Events larger than this (JSON bytes) are stored truncated: a DynamoDB item holds 400 KB. */
  readonly maxStoredEventBytes: number;
}

/** Defaults for what the topology does not say. */
export const inboxDefaults = {
  leaseMs: 30_000,
  leaseGraceMs: 2_000,
  /** The least time an operator gets to see and redrive a `DEAD` record. */
  deadOperatorSeconds: 30 * 24 * 3600,
  maxStoredEventBytes: 64 * 1024,
} as const;

/** What the retention derivation reads of the topology. */
export type RetentionTopology = Pick<Topology, 'consumers' | 'archiveRetentionDays'> & {
  readonly relay: Pick<
    RelaySettings,
    'maxEventAgeSeconds' | 'backoff' | 'maxUnsettledClaims' | 'leaseSeconds'
  >;
};

/** The inbox settings of one consumer: its topology policy plus the defaults, then `overrides`. */
export function inboxSettingsFor(
  t: RetentionTopology,
  consumer: ConsumerName,
  overrides: Partial<InboxSettings> = {},
): InboxSettings {
  const policy = consumerPolicyOf(t, consumer);
  const retentionSeconds = inboxRetentionSeconds(t, consumer);
  const { deadOperatorSeconds, ...defaults } = inboxDefaults;
  return {
    maxPermanentAttempts: policy.maxPermanentAttempts,
    maxEventAgeMs: policy.maxEventAgeSeconds * 1000,
    backoff: policy.backoff,
    ...defaults,
    retentionSeconds,
    deadRetentionSeconds: Math.max(retentionSeconds, deadOperatorSeconds),
    ...overrides,
  };
}

/** One way a delivery of an event can come back, and the longest after its first publish it can take. */
export interface RedeliveryPath {
  readonly path: string;
  readonly seconds: number;
}

const daySeconds = 24 * 3600;

/**
 * Every path by which a delivery of an event can reach `consumer` again after its first
 * publish, each with the longest it can take:
 * - the relay re-publishes an event whose PutEvents answer was lost: until the event's maximum
 *   age, one more backoff, and a lease for each claim that never settled;
 * - EventBridge retries the delivery to the consumer's queue up to its maximum event age, then
 *   puts the event in the rule's DLQ, which an ops redrive can take from while the queue keeps it;
 * - the consumer's queue keeps a message up to its retention, handing it over again after each
 *   failure (hidden for the record's backoff) until the inbox records an outcome; what the
 *   function could never handle goes to the queue's DLQ, redrivable while that keeps it;
 * - the bus archive keeps every event (each re-publish too) for replay, and a replayed delivery
 *   can take every path above once more.
 * Completion comes after the first publish, so a record kept the longest of these from its
 * completion outlives every copy still on its way.
 */
export function redeliveryPaths(t: RetentionTopology, consumer: ConsumerName): RedeliveryPath[] {
  const { relay } = t;
  const c = consumerPolicyOf(t, consumer);
  const republish =
    relay.maxEventAgeSeconds + relay.backoff.maxMs / 1000 + relay.maxUnsettledClaims * relay.leaseSeconds;
  const target = c.targetRetry.maximumEventAgeSeconds;
  const queue = c.queue.retentionSeconds;
  const deadLetters = c.deadLetterRetentionSeconds;
  const archive = t.archiveRetentionDays * daySeconds;
  return [
    { path: 'relay re-publish', seconds: republish },
    { path: 'rule DLQ redrive', seconds: republish + target + deadLetters },
    {
      path: "the consumer's queue, then a dead-letter redrive",
      seconds: republish + target + queue + deadLetters,
    },
    { path: 'archive replay', seconds: republish + archive + target + queue + deadLetters },
  ];
}

/**
 * How long a `PROCESSED` record of `consumer` is kept: the longest of its redelivery paths,
 * rounded up to whole days. Derived, so lengthening any path (a queue's retention, an event
 * age, the archive) lengthens the retention with it; a late duplicate never finds the record
 * gone and runs the effect again.
 */
export function inboxRetentionSeconds(t: RetentionTopology, consumer: ConsumerName): number {
  const longest = Math.max(...redeliveryPaths(t, consumer).map((p) => p.seconds));
  return Math.ceil(longest / daySeconds) * daySeconds;
}

/** The inbox figures' alarm thresholds in seconds, from the topology's `alarms`, its consumers and the inbox lease. */
export interface InboxHealthThresholds {
  /** `inbox-oldest-lease`: some consumer's oldest `PROCESSING` attempt has held its record longer than this. */
  readonly oldestLeaseSeconds: number;
  /** `inbox-retry-age`: some consumer's oldest `FAILED` record was first attempted longer ago than this. */
  readonly retryAgeSeconds: number;
}

/**
 * The thresholds both realizations alarm at (the CloudWatch alarms and the local evaluation),
 * above the threshold, not at it: `oldestLeasePeriods` inbox lease periods, and `retryAgeShare`
 * of the shortest `maxEventAgeSeconds` of any consumer (one alarm watches them all, so the
 * strictest budget sets it).
 */
export function inboxHealthThresholds(t: Pick<Topology, 'alarms' | 'consumers'>): InboxHealthThresholds {
  const maxAge = Math.min(...Object.values(t.consumers).map((c) => c.maxEventAgeSeconds));
  return {
    oldestLeaseSeconds: (t.alarms.oldestLeasePeriods * inboxDefaults.leaseMs) / 1000,
    retryAgeSeconds: Math.round(t.alarms.retryAgeShare * maxAge),
  };
}
