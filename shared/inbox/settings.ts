import { type ConsumerName, type Topology, topology } from '../topology';

/** How the inbox treats one consumer's attempts: retries, leases and retention. */
export interface InboxSettings {
  /** Attempts before a record goes `DEAD` (the topology's consumer policy). */
  readonly maxAttempts: number;
  /** Backoff between attempts, full jitter (the topology's consumer policy). */
  readonly backoff: { readonly baseMs: number; readonly maxMs: number };
  /**
   * The longest lease granted at once. Work that runs longer is kept alive by the heartbeat,
   * so a crashed attempt blocks its event for at most this long, whatever the Lambda timeout.
   */
  readonly leaseMs: number;
  /** Added to the invocation's deadline: Lambda stops the function then, clocks may drift a little. */
  readonly leaseGraceMs: number;
  /** How long a `PROCESSED` record stays (DynamoDB TTL): must outlast every redelivery. */
  readonly retentionSeconds: number;
  /** How long a `DEAD` record stays: longer, since an operator has to see and redrive it. */
  readonly deadRetentionSeconds: number;
  /** Events larger than this (JSON bytes) are stored truncated: a DynamoDB item holds 400 KB. */
  readonly maxStoredEventBytes: number;
}

/** Defaults for what the topology does not say. */
export const inboxDefaults = {
  leaseMs: 30_000,
  leaseGraceMs: 2_000,
  /** 8 days: well past the longest redelivery window (see longestRedeliveryWindowSeconds). */
  retentionSeconds: 8 * 24 * 3600,
  deadRetentionSeconds: 30 * 24 * 3600,
  maxStoredEventBytes: 64 * 1024,
} as const;

/** The inbox settings of one consumer: its topology policy plus the defaults, then `overrides`. */
export function inboxSettingsFor(
  consumer: ConsumerName,
  overrides: Partial<InboxSettings> = {},
  t: Pick<Topology, 'consumers'> = topology,
): InboxSettings {
  const policy = t.consumers[consumer];
  return {
    maxAttempts: policy.maxAttempts,
    backoff: policy.backoff,
    ...inboxDefaults,
    ...overrides,
  };
}

/**
 * The longest time after its first delivery at which an event can still arrive again: the
 * relay re-publishing after a lost PutEvents response (its whole backoff schedule and leases),
 * then EventBridge retrying the invoke for the target's maximum event age, then Lambda's
 * asynchronous retries up to their maximum event age. A processed record must outlive this,
 * or a late duplicate would run the effect again.
 */
export function longestRedeliveryWindowSeconds(t: Pick<Topology, 'consumers' | 'relay'> = topology): number {
  const { relay } = t;
  // Retried until the event is maxEventAgeSeconds old, then one more backoff; each claim that
  // never settled held the row for a lease on top.
  const relayMs =
    relay.maxEventAgeSeconds * 1000 +
    relay.backoff.maxMs +
    relay.maxUnsettledClaims * relay.leaseSeconds * 1000;
  const consumerSeconds = Object.values(t.consumers).map(
    (c) => c.targetRetry.maximumEventAgeSeconds + c.asyncInvoke.maximumEventAgeSeconds,
  );
  return Math.ceil(relayMs / 1000) + Math.max(...consumerSeconds);
}
