import { consumerServiceName } from '../../../shared/consumers/contract';
import type { ConsumerDefinition } from '../../../shared/consumers/define-consumer';
import { resourceConstructId } from '../../../shared/consumers/resources';
import { relayServiceName } from '../../../shared/outbox/relay-metrics';
import type { RelaySettings, Topology } from '../../../shared/topology';
import {
  approvedConsumers,
  type CfnTemplate,
  type CostPart,
  type CostTopology,
  declaredResources,
  functionOf,
  idleMonthlyCost,
  instancesAtWriterCapacity,
  type LambdaFunction,
  lambdaFunctions,
  lambdaUsd,
  logBytesPerApproval,
  ofType,
  perMillionApprovals,
  record,
  referencedId,
  tasksApiServiceName,
} from '../cost/model';
import type { PriceBook } from '../cost/prices';
import type { QuotaBook } from './quotas';

/**
 * The capacity model: a synthesized template, the topology, AWS's default quotas, the price
 * book and the database's measured cost per operation in; for any approval rate, each
 * component's use as a share of its limit, the rate at which each limit is reached, and the
 * cost per million approvals at that rate, out. It never synthesizes or measures, so a test
 * can hand it a template of a few resources.
 *
 * Every use is linear in the approval rate (concurrency = rate x duration, writes = rate x
 * writes per approval): the rate at which a limit is reached is the limit over the use per
 * approval. Only approvals are modelled; withdrawals cost the same or less (one consumer).
 */

/**
 * Whose limit it is. `own`: something this stack sets (a throttle, a reservation, a maximum
 * capacity). `design`: a fixed AWS limit that our design runs into (a partition key's
 * throughput, the control-plane rate, the largest Aurora instance): ours to design around.
 * `launch`: what a new table serves from its first moment (its warm throughput, which the stack
 * sets or leaves at a new on-demand table's default): ours too, but met only until the table has
 * served that much, since DynamoDB raises it with use. `quota`: an account quota AWS raises on request.
 */
export type LimitKind = 'own' | 'design' | 'launch' | 'quota';

/** One thing that can run out, with its use per approval/s and its limit. */
export interface CapacityComponent {
  readonly name: string;
  readonly kind: LimitKind;
  /** In `unit`; `Infinity` when nothing limits it (it is shown, never reached). */
  readonly limit: number;
  readonly unit: string;
  /** Use at one approval a second, in `unit`. */
  readonly perApproval: number;
  /** Use that does not grow with the rate (at most so much a second, whatever the rate), in `unit`. */
  readonly fixed?: number;
  /** Where the limit comes from: the template, or the quota's page. */
  readonly limitFrom: string;
  /** How the use is counted. */
  readonly detail: string;
}

/** A component with the rate at which it is reached and its share of the limit at each rate asked for. */
export interface ComponentFigures extends CapacityComponent {
  /** Approvals/s at which the use reaches the limit; `Infinity` when it never does. */
  readonly limitApprovalsPerSec: number;
  /** Use over limit at each of `CapacityReport.rates`, same order. */
  readonly shares: readonly number[];
}

/** What one approval rate looks like. */
export interface RateFigures {
  readonly approvalsPerSec: number;
  /** Components at or over their limit at this rate. */
  readonly reached: readonly string[];
  /** Of those, the account quotas to raise. */
  readonly quotaIncreases: readonly string[];
  /** Of those, limits of our own (settings and design). */
  readonly ownReached: readonly string[];
  readonly auroraAcu: number;
  /** What a million approvals cost at a steady rate: the month's fixed bill spread over them, plus their own use. */
  readonly costPerMillionUsd: number;
}

/** The lowest rate at which a limit is reached, and which. */
export interface FirstLimit {
  readonly component: string;
  readonly kind: LimitKind;
  readonly approvalsPerSec: number;
}

export interface CapacityReport {
  readonly rates: readonly number[];
  readonly components: readonly ComponentFigures[];
  readonly byRate: readonly RateFigures[];
  /** The first limit of any kind; null when nothing modelled has a limit. */
  readonly firstLimit: FirstLimit | null;
  /** The first limit this stack sets or designs itself into (`own`, `design` or `launch`). */
  readonly firstOwnLimit: FirstLimit | null;
}

/** What of the topology the model reads (the registry: what each consumer's resources take per event). */
export type CapacityTopology = Pick<
  Topology,
  'registry' | 'consumers' | 'rules' | 'eventTypes' | 'inbox' | 'audit' | 'archiveRetentionDays'
> & {
  readonly relay: Pick<RelaySettings, 'putEventsMaxEntries' | 'purge'> &
    CostTopology['relay'] & {
      /**
       * Relay runs that may drain at once (the run lease in PostgreSQL), when the topology sets a
       * bound; absent, only a reservation (the template's) bounds them.
       */
      readonly maxRuns?: number;
    };
};

/** The database's measured cost per operation and the relay's measured drain, from the benchmarks. */
export interface MeasuredCosts {
  /** Database CPU per operation, in ms (`npm run bench:statements`). */
  readonly dbCpuMs: {
    readonly approve: number;
    readonly relayDrainPerEvent: number;
    /**
     * A task read by id (`getTask`): what the model charges each database call a consumer
     * declares (its database resource's `perEvent.calls`).
     */
    readonly taskRead: number;
    readonly purgePerRow: number;
    /**
     * A relay run started by a nudge that finds nothing to drain: take the run lease, claim,
     * give the lease up, wait for the writers, look again. What a run start costs at least.
     */
    readonly relayNudge: number;
    /** A nudge that finds a run draining: its one statement (the run lease, held). */
    readonly relayNudgeSkipped: number;
  };
  /** Events/s one relay run drains under the latency model (`npm run bench`, `latencyModel.relayEventsPerSec`). */
  readonly relayEventsPerSecPerRun: number;
  /** Database round trips, i.e. Data API calls, per 1,000 events of a drain (`npm run bench`, `relayRoundTripsPer1000`). */
  readonly relayDataApiCallsPer1000: number;
}

export interface CapacityInputs {
  readonly template: CfnTemplate;
  readonly topology: CapacityTopology;
  readonly quotas: QuotaBook;
  readonly prices: PriceBook;
  readonly measured: MeasuredCosts;
}

/**
 * The model's own figures: what no template, topology or benchmark holds. Each with why.
 * Latencies are means (Little's law turns them into concurrency), warm functions.
 */
export const capacityAssumptions = {
  /**
   * Data API calls per request, by route: ONE for approve, reject and withdraw. Issue 16 item 2 makes
   * the task change and its outbox row one statement (a data-modifying CTE is atomic); the code
   * before it made four calls (BeginTransaction, UPDATE, INSERT, CommitTransaction). The
   * database's cost of the statements is measured separately (`MeasuredCosts`).
   */
  dataApiCallsPerRequest: {
    'POST /tasks/{taskId}/approve': 1,
    'POST /tasks/{taskId}/reject': 1,
    'POST /tasks/{taskId}/withdraw': 1,
  } as Readonly<Record<string, number>>,
  /** The route the approval rate arrives on. */
  approveRoute: { method: 'POST', resource: '/tasks/{taskId}/approve' },
  /**
   * Nudges (asynchronous Invokes of the relay) per approval, at most: the tasks API nudges only
   * when its statement saw no run holding the run lease, so under a steady load (a run draining)
   * almost none; one per approval is the bound the model keeps.
   */
  nudgesPerApproval: 1,
  /**
   * A nudge that finds a relay run draining returns after one Data API call (the run lease,
   * issue 16 item 3); the runs that drain are counted from the measured drain rate.
   */
  nudgeDataApiCalls: 1,
  /**
   * Data API calls a relay run holds the primary slot through, at the least: take the lease,
   * claim, read the stats, give it up, read the writers in flight, read the stats again. So slot
   * 0 starts at most 1,000 / (6 x `dataApiCallMs`) runs a second, whatever the rate: the full
   * cost of a run start (`relayNudge`) is a fixed load, not one per approval.
   */
  runStartDataApiCalls: 6,
  /** ms, the mean of the Data API distribution in bench/support/aws-latency.ts (p50 105, p90 271, p99 572 ms). */
  dataApiCallMs: 150,
  /** ms: an asynchronous Invoke answers once Lambda has queued the event (assumption). */
  invokeCallMs: 25,
  /** ms: a DynamoDB item operation ("single-digit millisecond", AWS), rounded up. */
  dynamoCallMs: 10,
  /** ms: a consumer's effect call (S3 PutObject, SNS Publish, a conditional put) (assumption). */
  effectCallMs: 30,
  /** ms: a warm handler's own work around its calls (assumption). */
  handlerMs: 10,
  /** DynamoDB calls of a consumer's inbox per event: begin (a put) and complete (an update). */
  inboxCallsPerEvent: 2,
  /**
   * Writes per event per consumer: to the table, begin (put) and complete (update); to the
   * open-records index, the `PROCESSING` entry written by begin and removed by complete (an
   * index write each). Together the price book's `inboxWritesPerConsumer`.
   */
  inboxWritesPerEvent: { table: 2, index: 2 },
  /**
   * vCPU of one ACU. AWS publishes only "about 2 GiB of memory and corresponding CPU"; the
   * memory-optimized classes Serverless v2 is sized against have 8 GiB per vCPU (db.r6g.xlarge:
   * 4 vCPU, 32 GiB = 16 ACU), so a quarter. A core of the benchmark machine counts as one vCPU.
   */
  vcpuPerAcu: 0.25,
} as const;

/**
 * What each key attribute's values hold, for the attributes the stores write: which records
 * share one value. One place; a key attribute not listed here is read from the key schema
 * alone (a table keyed by its partition key only has one value per record) or refused.
 * - `consumer`: the inbox's partition key before issue 16 item 4: every record of a consumer.
 * - `openKey`: `<consumer>#<status>` of the open-records index, `#<shard>` with
 *   `topology.inbox.openIndexShards`.
 * - `eventId`, `taskId`: one value per event, per task.
 */
const keyValueParts: Readonly<Record<string, readonly KeyPart[]>> = {
  consumer: ['consumer'],
  openKey: ['consumer', 'status', 'shard'],
  eventId: ['record'],
  taskId: ['record'],
};

type KeyPart = 'consumer' | 'status' | 'shard' | 'record';

const kb = 1024;
const gib = 1024 ** 3;
const million = 1_000_000;

// ---------------------------------------------------------------------------------------------
// Reading the template

const asArray = (value: unknown): readonly unknown[] => (Array.isArray(value) ? value : []);

/** Every logical id a value refers to (Ref, Fn::GetAtt, inside Fn::Join and the like). */
function referencesIn(value: unknown, into: Set<string> = new Set()): Set<string> {
  const id = referencedId(value);
  if (id) into.add(id);
  else if (Array.isArray(value)) for (const v of value) referencesIn(v, into);
  else if (typeof value === 'object' && value !== null)
    for (const v of Object.values(value)) referencesIn(v, into);
  return into;
}

/** IAM actions granted to a function's role, each with the logical ids its resources name. */
function grantsOf(template: CfnTemplate, fn: LambdaFunction): { action: string; resources: Set<string> }[] {
  const fnProps = template.Resources[fn.id]?.Properties ?? {};
  const role = referencedId(fnProps.Role);
  const grants: { action: string; resources: Set<string> }[] = [];
  for (const [, policy] of ofType(template, 'AWS::IAM::Policy')) {
    if (!asArray(policy.Roles).some((r) => referencedId(r) === role)) continue;
    for (const statement of asArray(record(policy.PolicyDocument).Statement)) {
      const s = record(statement);
      if (s.Effect !== 'Allow') continue;
      const resources = referencesIn(s.Resource);
      for (const action of typeof s.Action === 'string' ? [s.Action] : asArray(s.Action))
        if (typeof action === 'string') grants.push({ action, resources });
    }
  }
  return grants;
}

const may = (grants: ReturnType<typeof grantsOf>, action: string, on?: string) =>
  grants.some((g) => g.action === action && (on === undefined || g.resources.has(on)));

/** The functions a `content.approved` event reaches: the targets of the rules matching it. */
/**
 * The consumers `content.approved` reaches: each rule target is a consumer's queue, read by the
 * function of the event source mapping on it (rule -> queue -> mapping -> function), with the
 * mapping's batch size and maximum concurrency. A target that is a function (a stack before the
 * queues) is taken as it is, unbatched and unbounded.
 */
function approvedTargets(template: CfnTemplate, topology: CapacityTopology): ConsumerTarget[] {
  const targets = new Map<string, ConsumerTarget>();
  const mappings = ofType(template, 'AWS::Lambda::EventSourceMapping');
  for (const [, rule] of ofType(template, 'AWS::Events::Rule')) {
    const types = asArray(record(rule.EventPattern)['detail-type']);
    if (rule.State === 'DISABLED' || !types.includes(topology.eventTypes.approved)) continue;
    for (const target of asArray(rule.Targets)) {
      const id = referencedId(record(target).Arn);
      if (!id) continue;
      if (template.Resources[id]?.Type !== 'AWS::SQS::Queue') {
        targets.set(id, { functionId: id, batchSize: 1, maxConcurrency: undefined });
        continue;
      }
      const mapping = mappings.find(([, m]) => referencedId(m.EventSourceArn) === id)?.[1];
      const functionId = mapping && referencedId(mapping.FunctionName);
      if (!mapping || !functionId)
        throw new Error(`no event source mapping reads the rule target queue ${id}`);
      const concurrency = record(mapping.ScalingConfig).MaximumConcurrency;
      targets.set(functionId, {
        functionId,
        queueId: id,
        batchSize: typeof mapping.BatchSize === 'number' ? mapping.BatchSize : 10,
        maxConcurrency: typeof concurrency === 'number' ? concurrency : undefined,
      });
    }
  }
  return [...targets.values()];
}

/** A consumer `content.approved` reaches, as the template wires it. */
interface ConsumerTarget {
  readonly functionId: string;
  readonly queueId?: string;
  readonly batchSize: number;
  readonly maxConcurrency: number | undefined;
}

/** The API stage throttle that applies to `route`: its own method setting, else the stage-wide one. */
function routeThrottle(
  template: CfnTemplate,
  route: { method: string; resource: string },
): { rate: number; burst: number | undefined; where: string } | undefined {
  for (const [id, stage] of ofType(template, 'AWS::ApiGateway::Stage')) {
    const settings = asArray(stage.MethodSettings).map(record);
    // A method setting's ResourcePath is '/' then the resource path with its own '/' escaped as
    // '~1' (JSON Pointer): '/~1tasks~1{taskId}~1approve' is /tasks/{taskId}/approve.
    const path = (s: Readonly<Record<string, unknown>>) =>
      String(s.ResourcePath ?? '')
        .replace(/^\//, '')
        .replaceAll('~1', '/')
        .replaceAll('~0', '~');
    const own = settings.find((s) => path(s) === route.resource && s.HttpMethod === route.method);
    const stageWide = settings.find((s) => s.ResourcePath === '/*' && s.HttpMethod === '*');
    for (const [setting, scope] of [
      [own, `${route.method} ${route.resource}`],
      [stageWide, '/*/* (every method)'],
    ] as const) {
      if (setting && typeof setting.ThrottlingRateLimit === 'number')
        return {
          rate: setting.ThrottlingRateLimit,
          burst: typeof setting.ThrottlingBurstLimit === 'number' ? setting.ThrottlingBurstLimit : undefined,
          where: `stage ${String(stage.StageName ?? id)} MethodSettings ${scope}`,
        };
    }
  }
  return undefined;
}

/** The logical id an output names (`{ Ref: id }`), e.g. the inbox table's. */
function outputRef(template: CfnTemplate, output: string): string | undefined {
  const outputs = record((template as { Outputs?: unknown }).Outputs);
  return referencedId(record(outputs[output]).Value);
}

interface KeyedIndex {
  readonly name: string;
  readonly partitionKey: string;
  readonly partitionOnly: boolean;
  /** An index whose entries hold their keys only: each write is one WCU (keys are far under 1 KB). */
  readonly keysOnly: boolean;
}

/** A table's key and its global secondary indexes' keys. */
function keysOf(table: Readonly<Record<string, unknown>>): { table: KeyedIndex; indexes: KeyedIndex[] } {
  const keyOf = (name: string, schema: unknown, projection?: unknown): KeyedIndex => {
    const keys = asArray(schema).map(record);
    const hash = keys.find((k) => k.KeyType === 'HASH')?.AttributeName;
    if (typeof hash !== 'string') throw new Error(`${name} has no partition key`);
    const keysOnly = record(projection).ProjectionType === 'KEYS_ONLY';
    return { name, partitionKey: hash, partitionOnly: keys.length === 1, keysOnly };
  };
  return {
    table: keyOf('table', table.KeySchema),
    indexes: asArray(table.GlobalSecondaryIndexes)
      .map(record)
      .map((i) => keyOf(String(i.IndexName), i.KeySchema, i.Projection)),
  };
}

/**
 * How many partition key values one consumer's stream of events writes to: 1 when every event
 * of a consumer shares the key (a hot key takes the consumer's whole rate), `shards` when the
 * key is sharded, `Infinity` when each record has its own.
 */
function keyValuesPerStream(key: KeyedIndex, isTable: boolean, shards: number): number {
  const parts = keyValueParts[key.partitionKey];
  if (!parts) {
    // The table's partition key alone identifies a record: it cannot be shared by a stream.
    if (isTable && key.partitionOnly) return Number.POSITIVE_INFINITY;
    throw new Error(
      `cannot tell what key attribute "${key.partitionKey}" (${key.name}) holds: add it to keyValueParts in infra/aws/capacity/model.ts`,
    );
  }
  if (parts.includes('record')) return Number.POSITIVE_INFINITY;
  return parts.includes('shard') ? shards : 1;
}

const writeUnits = (itemKb: number) => Math.max(1, Math.ceil(itemKb));

/** A resource key as a component's label: `searchIndex` -> `search index`. */
const words = (key: string) => key.replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase();

const count = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 0 });

// ---------------------------------------------------------------------------------------------
// The components

interface PathFunction {
  readonly fn: LambdaFunction;
  readonly label: string;
  /** Invocations per approval. */
  readonly invocations: number;
  /** Seconds of execution per approval (all its invocations, plus any run time). */
  readonly seconds: number;
  readonly reserved: number | undefined;
}

/** Everything per approval that both the limits and the bill need. */
interface PerApproval {
  readonly functions: readonly PathFunction[];
  readonly dataApiCalls: number;
  readonly dbCpuSeconds: number;
  /** Database CPU seconds a second that do not grow with the rate (relay run starts, at most). */
  readonly fixedDbCpuSecondsPerSec: number;
  readonly inboxWru: number;
  /** Write units of the tables the consumers declare. */
  readonly declaredTableWru: number;
  readonly s3Puts: number;
  readonly snsPublishes: number;
}

function components(inputs: CapacityInputs): {
  list: CapacityComponent[];
  per: PerApproval;
  maxAcu: number;
  minAcu: number;
} {
  const { template, topology, quotas: q, prices, measured } = inputs;
  const a = capacityAssumptions;
  const list: CapacityComponent[] = [];
  const quota = (name: keyof QuotaBook) => `${q[name].source} (read ${q[name].read})`;

  // API Gateway
  const throttle = routeThrottle(template, a.approveRoute);
  const route = `${a.approveRoute.method} ${a.approveRoute.resource}`;
  if (throttle)
    list.push({
      name: `API Gateway throttle, ${route}`,
      kind: 'own',
      limit: throttle.rate,
      unit: 'requests/s',
      perApproval: 1,
      limitFrom: `template: ${throttle.where}, rate ${throttle.rate}/s${throttle.burst === undefined ? '' : `, burst ${throttle.burst}`}`,
      detail: 'one request per approval; the 429s past it are the caller’s',
    });
  list.push({
    name: 'API Gateway account throttle',
    kind: 'quota',
    limit: q.apiGatewayAccountRps.value,
    unit: 'requests/s',
    perApproval: 1,
    limitFrom: quota('apiGatewayAccountRps'),
    detail: 'shared by every API of the account in the Region',
  });

  // Lambda: the functions on an approval's path and how long each runs per approval
  const functions = lambdaFunctions(template);
  const reservedOf = (fn: LambdaFunction) => {
    const r = template.Resources[fn.id]?.Properties?.ReservedConcurrentExecutions;
    return typeof r === 'number' ? r : undefined;
  };
  const tasksApi = functionOf(functions, tasksApiServiceName);
  const relay = functionOf(functions, relayServiceName);
  const targets = approvedTargets(template, topology);
  const consumers = targets.map(({ functionId: id }) => {
    const fn = functions.find((f) => f.id === id);
    if (!fn)
      throw new Error(`a content.approved rule targets ${id}, which is no Lambda function of the template`);
    return fn;
  });
  const targetOf = (fn: LambdaFunction) => targets.find((t) => t.functionId === fn.id) as ConsumerTarget;
  // What each consumer's resources take per event is what its declaration says.
  const approved = approvedConsumers(topology);
  const declarationOf = (fn: LambdaFunction): ConsumerDefinition => {
    const found = approved.find((c) => consumerServiceName(c.name) === fn.service);
    if (!found)
      throw new Error(
        `a content.approved rule targets ${fn.id} (service ${fn.service || 'none'}), which is no consumer the topology routes content.approved to`,
      );
    return found;
  };
  const declarations = consumers.map(declarationOf);
  const databaseCalls = (of: readonly ConsumerDefinition[]) =>
    declaredResources(of, 'database').reduce((calls, d) => calls + d.spec.perEvent.calls, 0);
  const grants = new Map(
    [tasksApi, relay, ...consumers].map((fn) => [fn.id, grantsOf(template, fn)] as const),
  );
  const grantsFor = (fn: LambdaFunction) => grants.get(fn.id) ?? [];
  const dataApiPerApprove = a.dataApiCallsPerRequest[route] ?? 1;
  const ms = (n: number) => n / 1000;
  const pathFunctions: PathFunction[] = [
    {
      fn: tasksApi,
      label: tasksApi.service,
      invocations: 1,
      seconds: ms(dataApiPerApprove * a.dataApiCallMs + a.invokeCallMs + a.handlerMs),
      reserved: reservedOf(tasksApi),
    },
    {
      fn: relay,
      label: relay.service,
      invocations: a.nudgesPerApproval,
      // Each nudge for a moment, and the draining runs for as long as their events take.
      seconds:
        a.nudgesPerApproval * ms(a.nudgeDataApiCalls * a.dataApiCallMs + a.handlerMs) +
        1 / measured.relayEventsPerSecPerRun,
      reserved: reservedOf(relay),
    },
    // A batch's messages are handled at once (queue-delivery.ts), so at load, batches full, an
    // event takes a batch's share of an invocation.
    ...consumers.map((fn) => ({
      fn,
      label: fn.service || fn.id,
      invocations: 1 / targetOf(fn).batchSize,
      seconds:
        ms(
          a.inboxCallsPerEvent * a.dynamoCallMs +
            databaseCalls([declarationOf(fn)]) * a.dataApiCallMs +
            a.effectCallMs +
            a.handlerMs,
        ) / targetOf(fn).batchSize,
      reserved: reservedOf(fn),
    })),
  ];
  const reservedTotal = functions.reduce((n, fn) => n + (reservedOf(fn) ?? 0), 0);
  const accountPool = Math.max(q.lambdaUnreservedMinimum.value, q.lambdaConcurrency.value - reservedTotal);
  // A reservation is a limit of the function's own; the others share the account's pool. The
  // relay's holds its draining runs: a nudge is an asynchronous invoke, which Lambda queues and
  // retries when throttled (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html),
  // and only hints (the approve statement nudges only while no run holds the run lease), so the
  // nudges past the reservation delay a hint, never an event.
  const drainSeconds = 1 / measured.relayEventsPerSecPerRun;
  for (const p of pathFunctions.filter((f) => f.reserved !== undefined)) {
    const isRelay = p.fn.id === relay.id;
    list.push({
      name: `Lambda concurrency, ${p.label} (reserved)`,
      kind: 'own',
      limit: p.reserved ?? 0,
      unit: 'executions',
      perApproval: isRelay ? drainSeconds : p.seconds,
      limitFrom: `template: ReservedConcurrentExecutions ${p.reserved}`,
      detail: isRelay
        ? `the draining runs, a run draining ${count(measured.relayEventsPerSecPerRun)} events/s; nudges past the reservation are throttled, queued and retried by Lambda, and only hint`
        : `${p.invocations} invocation(s) per approval, ${(p.seconds * 1000).toFixed(0)} ms of execution`,
    });
  }
  // Each consumer's queue holds what its mapping's maximum concurrency cannot take yet: a bound of
  // its own, which is also the most of the account's pool it can ever hold.
  for (const fn of consumers) {
    const { maxConcurrency, batchSize, queueId } = targetOf(fn);
    const p = pathFunctions.find((f) => f.fn.id === fn.id);
    if (maxConcurrency === undefined || !p || !queueId) continue;
    list.push({
      name: `Consumer queue mapping, ${p.label} (maximum concurrency)`,
      kind: 'own',
      limit: maxConcurrency,
      unit: 'executions',
      perApproval: p.seconds,
      limitFrom: `template: the event source mapping of ${queueId}, ScalingConfig.MaximumConcurrency ${maxConcurrency}`,
      detail: `batches of ${batchSize} handled at once, ${(p.seconds * batchSize * 1000).toFixed(0)} ms an invocation; past it events wait in the queue, delayed, never lost or throttled`,
    });
  }
  const maxRuns = topology.relay.maxRuns;
  const relayReserved = reservedOf(relay);
  if (maxRuns !== undefined)
    list.push({
      name: 'Relay runs draining at once',
      kind: 'own',
      limit: relayReserved === undefined ? maxRuns : Math.min(maxRuns, relayReserved),
      unit: 'runs',
      perApproval: drainSeconds,
      limitFrom: `topology: relay.maxRuns ${maxRuns}${relayReserved !== undefined && relayReserved < maxRuns ? `, fewer by the relay's reservation (${relayReserved})` : ''}`,
      detail: `a run drains ${count(measured.relayEventsPerSecPerRun)} events/s (measured, AWS-like latency profile)`,
    });
  const unreserved = pathFunctions.filter((p) => p.reserved === undefined);
  list.push({
    name: 'Lambda concurrency, account',
    kind: 'quota',
    limit: accountPool,
    unit: 'executions',
    perApproval: unreserved.reduce((s, p) => s + p.seconds, 0),
    limitFrom: `${quota('lambdaConcurrency')}, less ${reservedTotal} reserved`,
    detail: `rate x execution time per approval of the path's functions without a reservation: ${unreserved.map((p) => `${p.label} ${(p.seconds * 1000).toFixed(0)} ms`).join(', ')}`,
  });
  list.push({
    name: 'Lambda synchronous invocations',
    kind: 'quota',
    limit: q.lambdaSyncInvokeRps.value * q.lambdaConcurrency.value,
    unit: 'requests/s',
    perApproval: 1,
    limitFrom: quota('lambdaSyncInvokeRps'),
    detail: 'API Gateway invokes the tasks API once per approval',
  });
  if (may(grantsFor(tasksApi), 'lambda:InvokeFunction', relay.id))
    list.push({
      name: 'Lambda asynchronous invocations (nudges)',
      kind: 'quota',
      limit: q.lambdaAsyncInvokeRps.value * q.lambdaConcurrency.value,
      unit: 'requests/s',
      perApproval: a.nudgesPerApproval,
      limitFrom: quota('lambdaAsyncInvokeRps'),
      detail:
        'the tasks API invokes the relay once per approval; EventBridge’s invocations of consumers are not counted here',
    });

  // Data API and Aurora
  const consumerDatabaseCalls = databaseCalls(declarations);
  const dataApiCalls =
    dataApiPerApprove +
    a.nudgesPerApproval * a.nudgeDataApiCalls +
    consumerDatabaseCalls +
    measured.relayDataApiCallsPer1000 / 1000 +
    1 / topology.relay.purge.batchSize;
  const runStartsPerSec = 1_000 / (a.runStartDataApiCalls * a.dataApiCallMs);
  list.push({
    name: 'RDS Data API requests',
    kind: 'quota',
    limit: q.dataApiRequestsPerSecond.value,
    unit: 'requests/s',
    perApproval: dataApiCalls,
    fixed: runStartsPerSec * a.runStartDataApiCalls,
    limitFrom: quota('dataApiRequestsPerSecond'),
    detail: `approve ${dataApiPerApprove}, nudge ${a.nudgeDataApiCalls}, consumer reads ${consumerDatabaseCalls}, relay ${measured.relayDataApiCallsPer1000} per 1,000 events, purge 1 per ${topology.relay.purge.batchSize}`,
  });
  const db = measured.dbCpuMs;
  const dbCpuMs =
    db.approve +
    a.nudgesPerApproval * db.relayNudgeSkipped +
    consumerDatabaseCalls * db.taskRead +
    db.relayDrainPerEvent +
    db.purgePerRow;
  const acuPerApproval = ms(dbCpuMs) / a.vcpuPerAcu;
  const runStartAcu = (runStartsPerSec * ms(db.relayNudge)) / a.vcpuPerAcu;
  const clusters = ofType(template, 'AWS::RDS::DBCluster');
  let maxAcu = 0;
  let minAcu = 0;
  for (const [id, cluster] of clusters) {
    const scaling = record(cluster.ServerlessV2ScalingConfiguration);
    const max = typeof scaling.MaxCapacity === 'number' ? scaling.MaxCapacity : q.auroraMaxAcu.value;
    maxAcu = Math.max(maxAcu, max);
    minAcu = Math.max(minAcu, typeof scaling.MinCapacity === 'number' ? scaling.MinCapacity : 0);
    const detail = `database CPU ${dbCpuMs.toFixed(2)} ms per approval (approve ${db.approve}, nudge ${db.relayNudgeSkipped}, reads ${consumerDatabaseCalls} x ${db.taskRead}, drain ${db.relayDrainPerEvent}, purge ${db.purgePerRow}; measured) at ${a.vcpuPerAcu} vCPU per ACU`;
    list.push({
      name: clusters.length > 1 ? `Aurora capacity, ${id}` : 'Aurora capacity',
      kind: 'own',
      limit: max,
      unit: 'ACU',
      perApproval: acuPerApproval,
      fixed: runStartAcu,
      limitFrom: `template: ServerlessV2ScalingConfiguration.MaxCapacity ${max}`,
      detail: `${detail}; plus ${runStartsPerSec.toFixed(1)} relay run starts a second at most, ${db.relayNudge} ms each`,
    });
    if (max < q.auroraMaxAcu.value)
      list.push({
        name: 'Aurora Serverless v2 largest instance',
        kind: 'design',
        limit: q.auroraMaxAcu.value,
        unit: 'ACU',
        perApproval: acuPerApproval,
        fixed: runStartAcu,
        limitFrom: quota('auroraMaxAcu'),
        detail: 'every Data API statement runs on the writer: one instance',
      });
  }

  // EventBridge
  const putEventsCalls = 1 / topology.relay.putEventsMaxEntries;
  list.push({
    name: 'EventBridge PutEvents',
    kind: 'quota',
    limit: q.eventBridgePutEventsTps.value,
    unit: 'requests/s',
    perApproval: putEventsCalls,
    limitFrom: quota('eventBridgePutEventsTps'),
    detail: `1 entry per approval, ${topology.relay.putEventsMaxEntries} entries per request`,
  });
  list.push({
    name: 'EventBridge target invocations',
    kind: 'quota',
    limit: q.eventBridgeInvocationsTps.value,
    unit: 'invocations/s',
    perApproval: consumers.length,
    limitFrom: quota('eventBridgeInvocationsTps'),
    detail: `content.approved reaches ${consumers.length} targets`,
  });
  if (may(grantsFor(relay), 'events:EnableRule') || may(grantsFor(relay), 'events:DisableRule'))
    list.push({
      name: 'EventBridge control plane (EnableRule/DisableRule)',
      kind: 'design',
      limit: q.eventBridgeControlPlaneTps.value,
      unit: 'requests/s',
      perApproval: a.nudgesPerApproval,
      limitFrom: quota('eventBridgeControlPlaneTps'),
      detail: 'the relay may toggle its busy sweep on every run, and every nudge is a run',
    });

  // DynamoDB
  const book = prices.assumptions;
  const shards = Math.max(1, topology.inbox.openIndexShards);
  const inboxId = outputRef(template, 'InboxTableName');
  // The tables the consumers write, by logical id: the inbox, and each table a consumer declares
  // (the stack outputs its name as `<construct id>TableName`).
  const written = new Map<
    string,
    { label: string; itemKb: number; writes: { table: number; index: number } }
  >();
  if (inboxId)
    written.set(inboxId, { label: 'inbox', itemKb: book.inboxItemKb.value, writes: a.inboxWritesPerEvent });
  for (const { key, spec } of declaredResources(declarations, 'table')) {
    const id = outputRef(template, `${resourceConstructId(key)}TableName`);
    if (id)
      written.set(id, {
        label: words(key),
        itemKb: spec.perEvent.itemKb,
        writes: { table: spec.perEvent.writes, index: 0 },
      });
  }
  let inboxWru = 0;
  let declaredTableWru = 0;
  for (const [id, table] of ofType(template, 'AWS::DynamoDB::Table')) {
    const keys = keysOf(table);
    const writers = consumers.filter((fn) =>
      grantsFor(fn).some((g) => g.action.startsWith('dynamodb:') && g.resources.has(id)),
    ).length;
    if (writers === 0) continue;
    const isInbox = id === inboxId;
    const use = written.get(id);
    if (!use)
      throw new Error(
        `consumers may write table ${id}, which is neither the inbox nor a table a consumer declares (no output <Key>TableName names it)`,
      );
    const { label, itemKb, writes } = use;
    const wcu = writeUnits(itemKb);
    const perKey = (key: KeyedIndex, isTable: boolean, writesPerEvent: number) => {
      const values = keyValuesPerStream(key, isTable, shards);
      // A write to a keys-only index entry is one WCU whatever the item's size.
      const unitWcu = !isTable && key.keysOnly ? 1 : wcu;
      const where = isTable ? `${label} table` : `${label} index ${key.name}`;
      list.push({
        name: `DynamoDB partition, ${where} (key ${key.partitionKey})`,
        kind: 'design',
        limit: q.dynamoPartitionWcu.value,
        unit: 'WCU/s per key value',
        // A key per record takes a record's few writes once, whatever the rate.
        perApproval: Number.isFinite(values) ? (writesPerEvent * unitWcu) / values : 0,
        limitFrom: quota('dynamoPartitionWcu'),
        detail: Number.isFinite(values)
          ? `every event of a consumer writes ${values === 1 ? 'the same key value' : `one of ${values} key values`}: ${writesPerEvent} writes x ${unitWcu} WCU (${!isTable && key.keysOnly ? 'keys-only entries' : `${itemKb} KB items`})`
          : 'one key value per record: its writes never add up',
      });
    };
    perKey(keys.table, true, writes.table);
    const tableWru = writers * writes.table * wcu;
    const launch = (where: string, warm: unknown, perApproval: number) => {
      const set = typeof record(warm).WriteUnitsPerSecond === 'number';
      const value = set ? Number(record(warm).WriteUnitsPerSecond) : q.dynamoNewTableWarmWru.value;
      list.push({
        name: `DynamoDB new ${where}, warm writes`,
        kind: 'launch',
        limit: value,
        unit: 'WRU/s',
        perApproval,
        limitFrom: set
          ? `template: WarmThroughput.WriteUnitsPerSecond ${value}`
          : `template: no WarmThroughput, so a new on-demand table's ${count(value)} (${quota('dynamoNewTableWarmWru')})`,
        detail:
          'what it serves from its first moment; past it a new table throttles until it has doubled its peak, up to 30 minutes at a time (on-demand-capacity-mode); once served, DynamoDB keeps it warm',
      });
    };
    launch(`table, ${label}`, table.WarmThroughput, tableWru);
    list.push({
      name: `DynamoDB on-demand table, ${label}`,
      kind: 'quota',
      limit: q.dynamoOnDemandTableWru.value,
      unit: 'WRU/s',
      perApproval: tableWru,
      limitFrom: quota('dynamoOnDemandTableWru'),
      detail: `${writers} consumer(s) x ${writes.table} writes x ${wcu} WCU`,
    });
    let indexWru = 0;
    const indexProps = asArray(table.GlobalSecondaryIndexes).map(record);
    for (const index of keys.indexes) {
      perKey(index, false, writes.index);
      const indexWcu = index.keysOnly ? 1 : wcu;
      indexWru += writers * writes.index * indexWcu;
      if (writes.index > 0)
        launch(
          `index, ${label} ${index.name}`,
          indexProps.find((i) => i.IndexName === index.name)?.WarmThroughput,
          writers * writes.index * indexWcu,
        );
      if (writes.index > 0)
        list.push({
          name: `DynamoDB on-demand index, ${label} ${index.name}`,
          kind: 'quota',
          limit: q.dynamoOnDemandTableWru.value,
          unit: 'WRU/s',
          perApproval: writers * writes.index * indexWcu,
          limitFrom: quota('dynamoOnDemandTableWru'),
          detail: `${writers} consumer(s) x ${writes.index} index writes x ${indexWcu} WCU${index.keysOnly ? ' (keys only)' : ''}`,
        });
    }
    if (isInbox) inboxWru += tableWru + indexWru;
    else declaredTableWru += tableWru;
  }

  // SQS: the dead-letter queues take nothing while deliveries
  // succeed; a queue the relay consumes (its wake-ups) takes at most a message per run start.
  const queues = ofType(template, 'AWS::SQS::Queue').map(([id]) => id);
  const relayIds = new Set(
    lambdaFunctions(template)
      .filter((f) => f.service === relayServiceName)
      .map((f) => f.id),
  );
  const consumed = new Set(
    ofType(template, 'AWS::Lambda::EventSourceMapping')
      .filter(([, m]) => [...referencesIn(m.FunctionName)].some((id) => relayIds.has(id)))
      .flatMap(([, m]) => [...referencesIn(m.EventSourceArn)]),
  );
  const wakeUpQueues = queues.filter((id) => consumed.has(id)).length;
  list.push({
    name: `SQS, ${queues.length} queue(s)`,
    kind: 'quota',
    limit: q.sqsStandardApiRps.value,
    unit: 'messages/s',
    // Per queue, as the quota is: a consumer's queue takes one message per approval.
    perApproval: 1,
    fixed: wakeUpQueues * runStartsPerSec * 2,
    limitFrom: quota('sqsStandardApiRps'),
    detail: `${queues.length - wakeUpQueues} consumer and dead-letter queue(s): a consumer's queue one message per event, standard queues with nearly unlimited throughput; the dead-letter queues nothing while deliveries succeed; ${wakeUpQueues} the relay consumes: a wake-up or a helper request per run at most`,
  });

  // CloudWatch
  const putMetricData = pathFunctions
    .filter((p) => may(grantsFor(p.fn), 'cloudwatch:PutMetricData'))
    .reduce((n, p) => n + p.invocations, 0);
  list.push({
    name: 'CloudWatch PutMetricData',
    kind: 'quota',
    limit: q.cloudWatchPutMetricDataTps.value,
    unit: 'requests/s',
    perApproval: putMetricData,
    limitFrom: quota('cloudWatchPutMetricDataTps'),
    detail:
      'metrics go out as embedded metric format in the logs; a function allowed PutMetricData counts one call per invocation',
  });
  const logKb = logBytesPerApproval(topology, prices) / kb;
  list.push({
    name: 'CloudWatch Logs ingestion',
    kind: 'quota',
    limit: Number.POSITIVE_INFINITY,
    unit: 'KB/s',
    perApproval: logKb,
    limitFrom: `no ingestion quota applies to the logs Lambda and API Gateway deliver; ${quota('cloudWatchLogsPutLogEventsTps')} counts PutLogEvents calls, and our code makes none`,
    detail: `~${logKb} KB per approval (price book, by the consumers it reaches)`,
  });

  const per: PerApproval = {
    functions: pathFunctions,
    dataApiCalls,
    dbCpuSeconds: ms(dbCpuMs),
    fixedDbCpuSecondsPerSec: runStartsPerSec * ms(db.relayNudge),
    inboxWru,
    declaredTableWru,
    s3Puts: declaredResources(declarations, 'bucket').reduce((puts, b) => puts + b.spec.perEvent.puts, 0),
    snsPublishes: declaredResources(declarations, 'topic').reduce((n, t) => n + t.spec.perEvent.publishes, 0),
  };
  return { list, per, maxAcu, minAcu };
}

// ---------------------------------------------------------------------------------------------
// The bill at a steady rate

function partUsd(parts: readonly CostPart[], name: string): number {
  const part = parts.find((p) => p.name === name);
  if (!part) throw new Error(`the cost model has no part "${name}"`);
  return part.usd;
}

/**
 * A million approvals at a steady `rate`: the month's bill (the idle one, Aurora at the
 * capacity the rate needs instead of idle, the metrics a busy pipeline sends) over the month's
 * approvals, plus each approval's own use at list prices.
 */
function costPerMillion(inputs: CapacityInputs, per: PerApproval, acu: number, rate: number): number {
  const { template, topology, prices: book } = inputs;
  const { prices: p, assumptions: a } = book;
  const idle = idleMonthlyCost(template, topology, book);
  const busy = perMillionApprovals(template, topology, book);
  const hours = a.hoursPerMonth.value;
  const approvals = rate * hours * 3600;
  const monthly =
    idle.totalUsd -
    partUsd(idle.parts, 'Aurora Serverless v2 compute') +
    acu * Math.max(1, instancesAtWriterCapacity(template)) * hours * p.auroraAcuHour.usd +
    partUsd(busy.parts, 'CloudWatch custom metrics while busy');
  const traced = per.functions.filter((f) => f.fn.traced).reduce((n, f) => n + f.invocations, 0);
  const eventGb = a.eventBytes.value / gib;
  const archives = ofType(template, 'AWS::Events::Archive');
  const archiveUsd = archives.reduce((usd, [, archive]) => {
    const days =
      typeof archive.RetentionDays === 'number' && archive.RetentionDays > 0 ? archive.RetentionDays : 30;
    return (
      usd +
      eventGb * p.eventBridgeArchiveGb.usd +
      eventGb * Math.min(1, days / 30) * p.eventBridgeArchiveStorageGbMonth.usd
    );
  }, 0);
  const perApprovalUsd =
    p.apiGatewayRestMillion.usd / million +
    per.functions.reduce(
      (usd, f) => usd + lambdaUsd(book, f.fn, f.invocations, f.seconds / f.invocations),
      0,
    ) +
    (per.dataApiCalls * p.dataApiMillion.usd) / million +
    (a.auroraIoPerApproval.value * p.auroraIoMillion.usd) / million +
    (Math.ceil(a.eventBytes.value / (64 * kb)) * p.eventBridgeCustomEventMillion.usd) / million +
    archiveUsd +
    ((per.inboxWru + per.declaredTableWru) * p.dynamoWriteRequestMillion.usd) / million +
    (per.s3Puts * p.s3PutThousand.usd) / 1000 +
    (per.snsPublishes * p.snsPublishMillion.usd) / million +
    (logBytesPerApproval(topology, book) / gib) * p.logsIngestGb.usd +
    (traced * p.xrayTraceMillion.usd) / million;
  return (monthly / approvals + perApprovalUsd) * million;
}

// ---------------------------------------------------------------------------------------------
// The model

const limitRateOf = (c: CapacityComponent) =>
  Number.isFinite(c.limit) && c.perApproval > 0
    ? Math.max(0, c.limit - (c.fixed ?? 0)) / c.perApproval
    : Number.POSITIVE_INFINITY;

function first(figures: readonly ComponentFigures[], kinds: readonly LimitKind[]): FirstLimit | null {
  const candidates = figures.filter((c) => kinds.includes(c.kind) && Number.isFinite(c.limitApprovalsPerSec));
  const lowest = candidates.sort((x, y) => x.limitApprovalsPerSec - y.limitApprovalsPerSec)[0];
  return lowest
    ? { component: lowest.name, kind: lowest.kind, approvalsPerSec: lowest.limitApprovalsPerSec }
    : null;
}

/** The capacity of the stack `inputs.template` describes, at each of `rates` approvals/s. */
export function capacityModel(inputs: CapacityInputs, rates: readonly number[]): CapacityReport {
  const { list, per, maxAcu, minAcu } = components(inputs);
  const figures: ComponentFigures[] = list.map((c) => ({
    ...c,
    limitApprovalsPerSec: limitRateOf(c),
    shares: rates.map((r) => (Number.isFinite(c.limit) ? ((c.fixed ?? 0) + c.perApproval * r) / c.limit : 0)),
  }));
  const acuPerApproval = per.dbCpuSeconds / capacityAssumptions.vcpuPerAcu;
  const byRate = rates.map((rate, i): RateFigures => {
    const reached = figures.filter((c) => (c.shares[i] ?? 0) >= 1);
    const acu = rate * acuPerApproval + per.fixedDbCpuSecondsPerSec / capacityAssumptions.vcpuPerAcu;
    return {
      approvalsPerSec: rate,
      reached: reached.map((c) => c.name),
      quotaIncreases: reached.filter((c) => c.kind === 'quota').map((c) => c.name),
      ownReached: reached.filter((c) => c.kind !== 'quota').map((c) => c.name),
      auroraAcu: acu,
      // Past its maximum the cluster stays at it (and the rate is not served).
      costPerMillionUsd: costPerMillion(inputs, per, Math.min(maxAcu, Math.max(minAcu, acu)), rate),
    };
  });
  return {
    rates,
    components: figures,
    byRate,
    firstLimit: first(figures, ['own', 'design', 'quota']),
    firstOwnLimit: first(figures, ['own', 'design', 'launch']),
  };
}
