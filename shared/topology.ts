import { consumers as registry } from '../functions/consumers/registry';
import type { ConsumerDefinition, ConsumerPolicy } from './consumers/define-consumer';
import { allEventTypes, eventSource, eventTypes, ruleNameOf } from './events/event-types';

/**
 * The one description of the pipeline. `infra/aws` (CDK) and `infra/local` (the embedded
 * runtime) both realize exactly this: change a rule, a consumer or a threshold here and both
 * targets follow. Values are plain data so tests can check every realization against them.
 */

/**
 * A rule's event pattern, as EventBridge's PutRule takes it (parsed JSON; values are always
 * arrays). Not CDK's `EventPattern`, which is the same pattern with camel-cased keys.
 */
export type RulePattern = Readonly<Record<string, unknown>>;

export interface RuleSpec {
  readonly name: string;
  readonly description: string;
  readonly pattern: RulePattern;
  readonly targets: readonly ConsumerName[];
}

export type { ConsumerPolicy } from './consumers/define-consumer';
export { type EventType, eventTypes } from './events/event-types';

/** A consumer's name: one of the registry's (`functions/consumers/registry.ts`). */
export type ConsumerName = (typeof registry)[number]['name'];

const source = eventSource;

/** Relay settings: how often, how much, how long, and when to give up. */
export interface RelayConfig {
  /**
   * The safety sweep: a relay run this often catches what a lost nudge left behind. Long on
   * purpose, so that an idle Aurora Serverless v2 cluster reaches its auto-pause time between
   * sweeps (see `infra/aws/cost/` for what that saves and docs/aws.md "Relay schedule" for the bounds).
   */
  readonly sweepSeconds: number;
  /**
   * How long a relay run holds its slot of the run lease (renewed every third of it while the
   * run lasts): a run that dies blocks nudges for at most this long, after which the next
   * nudge, wake-up or sweep starts another.
   */
  readonly runLeaseSeconds: number;
  /**
   * Relay runs draining at once, at most: one primary (the one nudges look for) and helpers a
   * run starts when claims keep coming back full with all its rounds busy.
   */
  readonly maxRuns: number;
  readonly claimBatchSize: number;
  readonly roundsInFlight: number;
  readonly putEventsMaxEntries: number;
  readonly maxRequestBytes: number;
  readonly publishConcurrency: number;
  readonly leaseSeconds: number;
  /**
   * Transient publish failures (throttling, internal failures, a failed call) are retried
   * until the event is this old; then it goes `dead`. Permanent entry errors go dead at once.
   */
  readonly maxEventAgeSeconds: number;
  /** Claims in a row that never settled (the relay crashed or timed out) before a row goes `dead`. */
  readonly maxUnsettledClaims: number;
  /**
   * What one claim may return, in bytes as the RDS Data API counts its response (JSON, the
   * payload escaped twice): below its 1 MiB response limit, and per row below its 64 KB row limit.
   */
  readonly claimBytes: { readonly perClaim: number; readonly perRow: number };
  /**
   * Backoff of one row's transient failure, when it fails alone: a throttled entry beside
   * accepted ones, a failed call beside calls that passed. Full jitter up to the ceiling.
   */
  readonly backoff: { readonly baseMs: number; readonly maxMs: number };
  /**
   * The transport's circuit: when a round's every published entry fails transiently (the bus
   * or PutEvents refusing everything), the relay stops claiming and probes with one due row,
   * the first after `probeBaseMs`, each failed probe doubling the wait up to `probeMaxMs`.
   * Rows gain neither attempts nor backoff while it is open (`shared/outbox/relay-circuit.ts`).
   */
  readonly circuit: { readonly probeBaseMs: number; readonly probeMaxMs: number };
  readonly pollIntervalMs: number;
  readonly budgetMarginMs: number;
  readonly timeoutSeconds: number;
  readonly purge: {
    readonly retentionHours: number;
    readonly batchSize: number;
    readonly maxBatchesPerRun: number;
  };
}

const relay: RelayConfig = {
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

/** The consumers' inbox table (`shared/inbox/dynamo-inbox-store.ts`, `infra/aws/constructs/inbox-table.ts`). */
export interface InboxConfig {
  /**
   * Shards of each `<consumer>#<status>` key of the operator's index (`open-records`): a record
   * is indexed under `<consumer>#<status>#<shard>`, the shard a hash of its event id, and every
   * ops read queries all of them in parallel. Raise it freely (a record changes shard only when
   * it changes state, and reads cover every shard); lowering it hides the records in the shards
   * dropped until they change state.
   */
  readonly openIndexShards: number;
  /**
   * The same for the local runtime's inbox (dynalite or DynamoDB Local): a local engine has no
   * partition limits, and each shard is one more request in every ops read there (a status
   * page reads 3 statuses x 3 consumers x the shards, on the runtime's own CPU: at 32 shards an
   * end-to-end test that polls its status took half again as long). Several, so the local
   * runtime runs the sharded reads (merged dead lists, counts over every shard) as AWS does.
   */
  readonly localOpenIndexShards: number;
}

const inbox: InboxConfig = {
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

/**
 * The delivery audit (`shared/audit/`): checks that every event the relay delivered has a
 * record in the inbox of every consumer the rules route it to, walking the delivered outbox rows
 * by `delivered_at` behind a cursor it keeps, a bounded number of pages per run.
 */
export interface AuditConfig {
  /**
   * Events delivered less than this long ago are not audited yet: the bus, a consumer's retries
   * and a mark's commit all take a moment, and an event still on its way is not missing.
   */
  readonly graceSeconds: number;
  /** Delivered events read per page: one outbox read and a BatchGetItem per 100 (event, consumer) keys. */
  readonly pageSize: number;
  /** Pages a run reads at most: a run's reads are bounded whatever the backlog (the next run goes on). */
  readonly maxPagesPerRun: number;
  /** Open findings a run checks again (checked longest ago first); those whose record has arrived are cleared. */
  readonly recheckPerRun: number;
  /**
   * How long a run holds the audit's lease, renewed with every page: one run at a time whatever
   * overlaps (a slow run and the next tick, Lambda's retry), and a run that dies blocks the
   * next for at most this long.
   */
  readonly leaseSeconds: number;
  /** Lambda timeout of the audit function: a run stops paging with a page's time to spare. */
  readonly timeoutSeconds: number;
  /** The local runtime only: how often it audits (on AWS the audit runs with the relay's safety sweep). */
  readonly localPeriodSeconds: number;
  /**
   * A `FAILED` or `PROCESSING` inbox record nothing was due on, nor done to, for this long has
   * lost its delivery: each run re-sends it (shared/audit/stuck-records.ts).
   */
  readonly stuckAfterSeconds: number;
  /** Stuck records a run reads and re-sends at most per consumer (the next run goes on). */
  readonly stuckPerRun: number;
}

const audit: AuditConfig = {
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

/** Alarm thresholds; both the CDK alarms and the local status page evaluate these. */
export interface AlarmThresholds {
  readonly oldestPendingAgeSeconds: number;
  readonly deadEvents: number;
  readonly relayErrors: number;
  /** DEAD inbox records, all consumers' together, from which `inbox-dead` alarms. */
  readonly inboxDeadRecords: number;
  /**
   * `inbox-oldest-lease` alarms when some consumer's oldest `PROCESSING` attempt has held its
   * record longer than this many inbox lease periods (`inboxHealthThresholds` turns it into seconds).
   */
  readonly oldestLeasePeriods: number;
  /**
   * `inbox-retry-age` alarms when some consumer's oldest `FAILED` record was first attempted
   * longer ago than this share of `maxEventAgeSeconds` (the least of the consumers', for one alarm).
   */
  readonly retryAgeShare: number;
  /** Delivered events the audit found missing from the consumers' inboxes, all together, from which `undelivered` alarms. */
  readonly undeliveredEvents: number;
  readonly dlqMessages: number;
  readonly periodSeconds: number;
  readonly evaluationPeriods: number;
  /** Of `evaluationPeriods`, how many must breach: a minute without a relay run is no evidence either way. */
  readonly datapointsToAlarm: number;
  /** How often the inbox gauges count each consumer's DEAD records (their alarms' period). */
  readonly gaugePeriodSeconds: number;
  /** Relay sweep periods without a single relay report before `relay-silent` alarms. */
  readonly relaySilentSweeps: number;
}

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

/** Each consumer's policy, by name, in the registry's order. */
function consumerPolicies<N extends string>(
  registry: readonly ConsumerDefinition<N>[],
): Readonly<Record<N, ConsumerPolicy>> {
  return Object.fromEntries(registry.map((c) => [c.name, c.policy])) as Record<N, ConsumerPolicy>;
}

/**
 * One rule per event type that has subscribers: it routes the type to each consumer of the
 * registry that subscribes to it, in the registry's order.
 */
export function rulesFor(registry: readonly ConsumerDefinition[]): readonly RuleSpec[] {
  return allEventTypes.flatMap((type) => {
    const targets = registry.filter((c) => c.subscribes.includes(type)).map((c) => c.name as ConsumerName);
    if (targets.length === 0) return [];
    return [
      {
        name: ruleNameOf(type),
        description: `Routes ${type} to ${targets.join(', ')}`,
        pattern: { source: [source], 'detail-type': [type] },
        targets,
      },
    ];
  });
}

export const topology = {
  /** EventBridge `Source` of every event the pipeline publishes. */
  source,
  busName: 'content-pipeline',
  /**
   * How long the bus archive keeps events for replay. A replay re-delivers them, so the inbox
   * keeps processed records past it (`shared/inbox/settings.ts`): replays are duplicates.
   */
  archiveRetentionDays: 30,
  eventTypes,
  /** The consumers as their folders declare them (resources, counters, folder), in the registry's order. */
  registry: registry as readonly ConsumerDefinition[],
  consumers: consumerPolicies(registry),
  rules: rulesFor(registry),
  relay,
  inbox,
  audit,
  alarms,
} as const;

export type Topology = typeof topology;

/** Every consumer's name, in the registry's order (a non-empty tuple, as `z.enum` takes it). */
export const consumerNames = registry.map((c) => c.name) as [ConsumerName, ...ConsumerName[]];

/**
 * The topology with a registry of consumers other than the project's: a test's variant (a
 * fixture consumer added, one taken away). Typed as the project's, which a variant's names are not.
 */
export function topologyWith(consumers: readonly ConsumerDefinition[]): Topology {
  return {
    ...topology,
    registry: consumers,
    consumers: consumerPolicies(consumers),
    rules: rulesFor(consumers),
  } as unknown as Topology;
}
