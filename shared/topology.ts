import { type ConsumerDefinition, type ConsumerPolicy, consumerRegistry } from './consumers/define-consumer';
import { allEventTypes, eventSource, eventTypes, ruleNameOf } from './events/event-types';

/**
 * What a pipeline is, as a value: its bus, its consumers (a registry of their definitions), the
 * rules that route each event type to them, and the figures of the relay, the inbox, the audit
 * and the alarms. The core (`shared/`) declares its shape and builds it ({@link defineTopology});
 * the project's own is `functions/topology.ts`, beside the consumer registry, and every entry
 * point (each Lambda handler, the CDK app, the local runtime, the CLI) passes it down. Nothing
 * in `shared/` reads a topology of its own: a runtime built from another topology (a test's
 * variant) lists, routes and redrives exactly its consumers.
 *
 * The words: a *Config* is what a process reads from its environment (`shared/config.ts`); a
 * topology's figures are *Settings* (the relay's, the inbox's, the audit's); a consumer's
 * *Policy* is how its failures are retried (`ConsumerPolicy`).
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

/**
 * A consumer's name: one of its topology's registry. Declared, not inferred from a registry, so
 * that the core is the same whatever consumers a project has; `defineTopology` checks the names.
 */
export type ConsumerName = string;

/** Relay settings: how often, how much, how long, and when to give up. */
export interface RelaySettings {
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

/** The consumers' inbox table (`shared/inbox/dynamo-inbox-store.ts`, `infra/aws/constructs/inbox-table.ts`). */
export interface InboxIndexSettings {
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

/**
 * The delivery audit (`shared/audit/`): checks that every event the relay delivered has a
 * record in the inbox of every consumer the rules route it to, walking the delivered outbox rows
 * by `delivered_at` behind a cursor it keeps, a bounded number of pages per run.
 */
export interface AuditSettings {
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

/** What a project says of its pipeline; {@link defineTopology} derives the rest. */
export interface TopologySpec {
  /** The custom EventBridge bus the relay publishes to. */
  readonly busName: string;
  /**
   * How long the bus archive keeps events for replay. A replay re-delivers them, so the inbox
   * keeps processed records past it (`shared/inbox/settings.ts`): replays are duplicates.
   */
  readonly archiveRetentionDays: number;
  /** The consumers as their folders declare them, in the rules' target order. */
  readonly registry: readonly ConsumerDefinition[];
  readonly relay: RelaySettings;
  readonly inbox: InboxIndexSettings;
  readonly audit: AuditSettings;
  readonly alarms: AlarmThresholds;
}

/** A pipeline: what its project says, and what follows from it. */
export interface Topology extends TopologySpec {
  /** EventBridge `Source` of every event the pipeline publishes. */
  readonly source: string;
  readonly eventTypes: typeof eventTypes;
  /** Each consumer's policy, by name, in the registry's order. */
  readonly consumers: Readonly<Record<ConsumerName, ConsumerPolicy>>;
  /** Every consumer's name, in the registry's order (a non-empty tuple, as `z.enum` takes it). */
  readonly consumerNames: readonly [ConsumerName, ...ConsumerName[]];
  /** One rule per event type some consumer subscribes to. */
  readonly rules: readonly RuleSpec[];
}

/**
 * One rule per event type that has subscribers: it routes the type to each consumer of the
 * registry that subscribes to it, in the registry's order.
 */
export function rulesFor(registry: readonly ConsumerDefinition[]): readonly RuleSpec[] {
  return allEventTypes.flatMap((type) => {
    const targets = registry.filter((c) => c.subscribes.includes(type)).map((c) => c.name);
    if (targets.length === 0) return [];
    return [
      {
        name: ruleNameOf(type),
        description: `Routes ${type} to ${targets.join(', ')}`,
        pattern: { source: [eventSource], 'detail-type': [type] },
        targets,
      },
    ];
  });
}

/**
 * The topology of `spec`: its registry checked (no name twice, no counter twice, not empty),
 * each consumer's policy by name, and its rules.
 */
export function defineTopology(spec: TopologySpec): Topology {
  const registry = consumerRegistry(spec.registry);
  const names = registry.map((c) => c.name);
  return {
    ...spec,
    source: eventSource,
    eventTypes,
    registry,
    consumers: Object.fromEntries(registry.map((c) => [c.name, c.policy])),
    consumerNames: names as [ConsumerName, ...ConsumerName[]],
    rules: rulesFor(registry),
  };
}

/**
 * `t` with a registry of other consumers (a test's variant: a fixture consumer added, one taken
 * away), checked as `defineTopology` checks the project's.
 */
export function topologyWith(t: TopologySpec, consumers: readonly ConsumerDefinition[]): Topology {
  const { busName, archiveRetentionDays, relay, inbox, audit, alarms } = t;
  return defineTopology({ busName, archiveRetentionDays, registry: consumers, relay, inbox, audit, alarms });
}

/** `name`'s policy in `t`, or an error that names the consumers there are. */
export function consumerPolicyOf(t: Pick<Topology, 'consumers'>, name: ConsumerName): ConsumerPolicy {
  const policy = t.consumers[name];
  if (policy === undefined)
    throw new Error(`unknown consumer "${name}"; one of ${Object.keys(t.consumers).join(', ')}`);
  return policy;
}
