import type { ConsumerDefinition } from '../shared/consumers/define-consumer';
import {
  type AlarmThresholds,
  type AuditSettings,
  defineTopology,
  type InboxIndexSettings,
  type RelaySettings,
  type Topology,
  topologyWith as withRegistry,
} from '../shared/topology';
import { consumers } from './consumers/registry';

/**
 * This project's pipeline: its consumers (`./consumers/registry.ts`) and its figures. Every
 * entry point builds on this value (the Lambda handlers, `infra/aws/app.ts`, the local runtime,
 * the CLI) and passes it down to the core, which has none of its own. Change a rule, a consumer
 * or a figure here and every realization follows.
 */

const relay: RelaySettings = {
  sweepSeconds: 3600,
  runLeaseSeconds: 15,
  /**
   * One run keeps up to `roundsInFlight` batches of `claimBatchSize` in flight, ~3,300 events/s
   * through the Data API in the benchmark's AWS profile; four runs take the pipeline past
   * 10,000 approvals/s before its statements, not its run count, are the bound.
   */
  maxRuns: 4,
  /**
   * Rows claimed per statement, at most: a claim is also bounded by `claimBytes`, which cuts it
   * short for large payloads. Two statements (claim, mark) per batch: 1,000 rows keep a drain
   * at about 2 database round trips (Data API calls) per 1,000 events; measured in
   * `npm run bench` against a grid of batch sizes and connections (docs/performance.md).
   */
  claimBatchSize: 1_000,
  /**
   * Claim-publish-settle rounds a relay runs side by side, at most: one batch is claimed or
   * marked while others wait on PutEvents. A run widens only while claims come back full, and
   * only to as many rounds as keep the database busy (`runRelay`): with the Data API's and
   * PutEvents' latencies (tens to hundreds of milliseconds a call) that is far more than four
   * and throughput grows with every round, so four; on a loopback database it is two.
   */
  roundsInFlight: 4,
  /** PutEvents takes 1-10 entries per call. */
  putEventsMaxEntries: 10,
  /**
   * Bytes per PutEvents request (and so per entry). AWS raised the limit to 1 MB on
   * 2026-01-29; 256 KB stays the default because older accounts' docs and LocalStack use it.
   */
  maxRequestBytes: 256 * 1024,
  /**
   * PutEvents calls in flight at once per round: a batch of 1,000 is 100 calls, sent in about
   * ten call latencies. A relay thus keeps at most `roundsInFlight x publishConcurrency` = 40
   * calls in flight, about 900 calls per second at 45 ms a call: within the account's PutEvents
   * quota (10,000 per second in us-east-1, 2,400 in us-east-2, lower in smaller Regions, shared
   * by every caller in the account and Region:
   * https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html). A call throttled
   * anyway is retried by the SDK and then backs off per entry, as any transient failure.
   */
  publishConcurrency: 10,
  /** A claim is the owner's for this long; it must exceed one publish round trip by far. */
  leaseSeconds: 30,
  /** As long as EventBridge itself keeps retrying a target: an outage of hours loses nothing. */
  maxEventAgeSeconds: 24 * 3600,
  maxUnsettledClaims: 10,
  /**
   * https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/data-api.limitations.html:
   * "The response size limit is 1 MiB", "64 KB per row in the result set". Margins for the
   * other columns and the result metadata.
   */
  claimBytes: { perClaim: 1024 * 1024 - 64 * 1024, perRow: 60 * 1024 },
  backoff: { baseMs: 1_000, maxMs: 15 * 60_000 },
  /**
   * A probe is one PutEvents call of one entry (and a few statements): a minute apart at most,
   * an outage's end is seen within a minute by the probes alone, and at once where the
   * transport says so (the local bus when its journal writes again).
   */
  circuit: { probeBaseMs: 1_000, probeMaxMs: 60_000 },
  /**
   * A run that has drained what is due waits for rows that become due within its budget
   * (backoff), re-checking at most this often; it returns once nothing is pending.
   */
  pollIntervalMs: 1_000,
  /** Stop claiming when less than this remains of the invocation. */
  budgetMarginMs: 10_000,
  /** Lambda timeout of the relay: a run drains, waits out short backoffs, and returns. */
  timeoutSeconds: 60,
  /**
   * Delivered rows are kept a week, then deleted in batches of `batchSize`: at least
   * `maxBatchesPerRun` a run, and as many as twice what the run delivered (`runRelay`), so at
   * 1,000 approvals/s (86 million rows a day) the purge deletes as fast as rows are delivered.
   */
  purge: { retentionHours: 7 * 24, batchSize: 500, maxBatchesPerRun: 20 },
};

const inbox: InboxIndexSettings = {
  /**
   * Sized so that no inbox key of ours limits a consumer below 10,000 events a second. A key
   * value of a global secondary index lives in one partition, and "each individual partition
   * is limited to 1000 write units per second", for indexes as for tables
   * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput-scenarios.html,
   * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/throttling-key-range-limit-exceeded-mitigation.html),
   * on-demand or not; adaptive capacity may isolate a hot key, never lift that cap. A record's index entry
   * is its keys only (KEYS_ONLY, well under 1 KB: 1 write unit), written when the event arrives
   * (begin: into `PROCESSING`) and again when it completes (out of it): 2 write units per event
   * per consumer on its shard, so one shard takes 1,000 / 2 = 500 events a second, and 32
   * shards 16,000 a second per consumer. `FAILED` and `DEAD` are sharded alike: an effect's
   * outage sends every event to `FAILED` (and each retry out and back), a poison flood every
   * event to `DEAD`, at the consumer's whole rate, and an index short of write capacity fails
   * the table's writes (https://repost.aws/knowledge-center/dynamodb-gsi-throttling-table).
   * The table's own items are keyed by event: no limit of ours there. The price is reads: an
   * ops count is one Query per shard and status (the inbox gauges, `GET /ops/status`).
   */
  openIndexShards: 32,
  localOpenIndexShards: 4,
};

const audit: AuditSettings = {
  // A delivery reaches a consumer in well under a second, and Lambda's own retries of a failed
  // invoke take a minute or two; five minutes is past both.
  graceSeconds: 300,
  pageSize: 1_000,
  // 100,000 events a run at most: with prod's sweep every minute the audit keeps pace with
  // about 1,600 approvals a second; a longer backlog (a sandbox, swept hourly, under load) is
  // worked off by the following runs, and `GET /ops/audit` says how far behind it is.
  maxPagesPerRun: 100,
  recheckPerRun: 1_000,
  leaseSeconds: 60,
  timeoutSeconds: 300,
  localPeriodSeconds: 60,
  // Twice the longest wait between two attempts of a record still being retried: on AWS Lambda's
  // own retries (a minute, then two) and the retry queue's delay of a backoff cap; locally the
  // bus retries at the backoff cap (a minute).
  stuckAfterSeconds: 600,
  stuckPerRun: 500,
};
const alarms: AlarmThresholds = {
  /**
   * Oldest undelivered event older than this alarms. The relay reports the age after every run,
   * so between runs (an idle pipeline is swept once per sweep period) the alarm keeps its state;
   * a relay that stops reporting altogether is `relay-silent`, where missing data breaches.
   */
  oldestPendingAgeSeconds: 300,
  /** Any dead outbox event alarms. */
  deadEvents: 1,
  /** Relay errors in one period. */
  relayErrors: 1,
  /** Any dead inbox record of any consumer alarms, until it is redriven or expires. */
  inboxDeadRecords: 1,
  /**
   * A healthy attempt holds its record at most the consumer function's timeout (heartbeats
   * renew a lease past one period); a killed one until Lambda's retry, a minute or two after it,
   * takes the record over. Five lease periods is past both: a record held that long is stuck
   * (a consumer killed on its last retry, or hung mid-effect), and nothing will take it over.
   */
  oldestLeasePeriods: 5,
  /**
   * A quarter of the day transient failures are retried for: a failure that outlasts the
   * consumer's async retries on AWS already shows in its on-failure queue's alarm, so this is
   * the backstop for a FAILED record nothing is retrying any more (its queued message deleted
   * or expired), raised while three quarters of the budget are left to fix the cause.
   */
  retryAgeShare: 0.25,
  /** Any delivered event missing from a consumer's inbox alarms, until it is redriven. */
  undeliveredEvents: 1,
  /** Any message in a DLQ or on-failure destination alarms. */
  dlqMessages: 1,
  periodSeconds: 60,
  evaluationPeriods: 5,
  datapointsToAlarm: 3,
  gaugePeriodSeconds: 300,
  relaySilentSweeps: 2,
};

export const topology: Topology = defineTopology({
  busName: 'content-pipeline',
  /**
   * How long the bus archive keeps events for replay. A replay re-delivers them, so the inbox
   * keeps processed records past it (`shared/inbox/settings.ts`): replays are duplicates.
   */
  archiveRetentionDays: 30,
  registry: consumers,
  relay,
  inbox,
  audit,
  alarms,
});

/** Every consumer's name, in the registry's order. */
export const consumerNames = topology.consumerNames;

/** This project's topology with a registry of other consumers (a test's variant), checked as the project's is. */
export function topologyWith(registry: readonly ConsumerDefinition[]): Topology {
  return withRegistry(topology, registry);
}
