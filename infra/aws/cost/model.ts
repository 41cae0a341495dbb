import {
  auditMetricNames,
  consumerMetricNames,
  consumerServiceName,
  deliveryAuditServiceName,
  inboxGaugeMetricNames,
  inboxGaugesServiceName,
} from '../../../shared/consumers/contract';
import type { ConsumerDefinition } from '../../../shared/consumers/define-consumer';
import type { ResourceKind, ResourceSpec } from '../../../shared/consumers/resources';
import { inboxSettingsFor, type RetentionTopology } from '../../../shared/inbox/settings';
import { relayMetricNames, relayServiceName } from '../../../shared/outbox/relay-metrics';
import type { Topology } from '../../../shared/topology';
import type { PriceBook } from './prices';

/**
 * The cost model: a synthesized CloudFormation template and the topology in, dollars out. It
 * counts what the template holds (functions and their memory, schedules, alarms, secrets, keys,
 * the Aurora scaling configuration) and multiplies with `./prices.ts`; it never synthesizes, so
 * a test can hand it a template of a few resources.
 */

/** One resource of a CloudFormation template, as `cdk synth` writes it. */
export interface CfnResource {
  readonly Type: string;
  readonly Properties?: Readonly<Record<string, unknown>>;
}

/** The part of a template the model reads. */
export interface CfnTemplate {
  readonly Resources: Readonly<Record<string, CfnResource>>;
}

/** One line of a bill: what, how much a month, and how the figure came about. */
export interface CostPart {
  readonly name: string;
  readonly usd: number;
  readonly detail: string;
}

export interface IdleMonthlyCost {
  /** The sum of `parts`. */
  readonly totalUsd: number;
  readonly parts: readonly CostPart[];
  /**
   * Of an idle day, the fraction Aurora's writer spends paused (0 when MinCapacity is above 0,
   * 1 when nothing wakes it or there is no cluster); the lowest across clusters.
   */
  readonly auroraPausedFraction: number;
}

export interface PerMillionApprovalsCost {
  /** The sum of `parts`: what a million approvals spread over a month add to the idle bill. */
  readonly totalUsd: number;
  readonly parts: readonly CostPart[];
}

/**
 * What of `shared/topology.ts` the model reads: the consumers' declarations (`registry`) say
 * what each consumer's resources take per event.
 */
export type CostTopology = Pick<
  Topology,
  'registry' | 'consumers' | 'rules' | 'eventTypes' | 'inbox' | 'audit' | 'archiveRetentionDays'
> & {
  /** What the inbox's retention is derived from (`inboxSettingsFor`): how long a record is billed. */
  readonly relay: RetentionTopology['relay'];
};

/**
 * Which end of the idle range to price. `pollers`: each SQS mapping at the count AWS documents
 * for a quiet standard queue (`documented`, five) or at the fewest Lambda may optimize to
 * (`fewest`, two; five still for a mapping with maximum concurrency, which that optimization
 * skips). `auroraAwake`: a cluster that may pause is priced awake all month (something other
 * than the sweeps keeps calling it), instead of paused between sweeps.
 */
export interface IdleAssumptions {
  readonly pollers?: 'documented' | 'fewest';
  readonly auroraAwake?: boolean;
}

/** The tasks API function's Powertools service name (set in `constructs/tasks-api.ts`, not exported there). */
export const tasksApiServiceName = 'tasks-api';

/**
 * What the relay sends after every run (`addRelayMetrics`), whatever the counts: the gauges its
 * alarms need. `PendingEvents` is sent only while above zero, like the inbox gauges.
 */
const relayGaugeMetrics = [relayMetricNames.oldestPendingAge, relayMetricNames.dead];

/** Issue 8 item 7: what an idle sandbox may cost, and how much of an idle day Aurora must sleep. */
export const sandboxGoal = {
  idleMonthlyUsd: 10,
  /**
   * The consumers `idleMonthlyUsd` holds for: the pipeline as it ships. Each consumer has idle
   * costs of its own (its queue's and dead-letter queues' alarms, its mapping's pollers, its gauge
   * reads: $0.51 a month at the fewest pollers for the fixture consumer of test/fixtures), so a
   * consumer added raises the goal by `perAddedConsumerUsd` instead of breaking it.
   */
  consumersIncluded: 3,
  perAddedConsumerUsd: 0.75,
  auroraPausedFraction: 0.9,
} as const;

/** The idle sandbox's goal for a pipeline of `consumers` consumers: {@link sandboxGoal}. */
export const sandboxIdleGoalUsd = (consumers: number): number =>
  sandboxGoal.idleMonthlyUsd +
  Math.max(0, consumers - sandboxGoal.consumersIncluded) * sandboxGoal.perAddedConsumerUsd;

/** Counters a busy, healthy relay sends (counters go out only when non-zero): events published, old rows purged. */
const relayBusyCounters = [relayMetricNames.published, relayMetricNames.purged];

const million = 1_000_000;
const gib = 1024 ** 3;

// ---------------------------------------------------------------------------------------------
// Reading the template

/** The resources of one type, as `[logical id, Properties]`. */
export function ofType(template: CfnTemplate, type: string): [string, Readonly<Record<string, unknown>>][] {
  return Object.entries(template.Resources)
    .filter(([, r]) => r.Type === type)
    .map(([id, r]) => [id, r.Properties ?? {}]);
}

const countOf = (template: CfnTemplate, type: string): number => ofType(template, type).length;

/** `value` as an object, or an empty one: template properties are read without trusting their shape. */
export const record = (value: unknown): Readonly<Record<string, unknown>> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};

/** The logical id behind `{ "Fn::GetAtt": [id, "Arn"] }` or `{ "Ref": id }`; undefined for anything else. */
export function referencedId(value: unknown): string | undefined {
  const v = record(value);
  const getAtt = v['Fn::GetAtt'];
  if (Array.isArray(getAtt) && typeof getAtt[0] === 'string') return getAtt[0];
  return typeof v.Ref === 'string' ? v.Ref : undefined;
}

/** A Lambda function of the template, as the models read it. */
export interface LambdaFunction {
  readonly id: string;
  readonly service: string;
  readonly memoryGb: number;
  readonly arm64: boolean;
  readonly traced: boolean;
}

/** Every Lambda function of the template, with its Powertools service name, memory and architecture. */
export function lambdaFunctions(template: CfnTemplate): LambdaFunction[] {
  return ofType(template, 'AWS::Lambda::Function').map(([id, p]) => {
    const service = record(record(p.Environment).Variables).POWERTOOLS_SERVICE_NAME;
    const architectures = Array.isArray(p.Architectures) ? p.Architectures : [];
    return {
      id,
      service: typeof service === 'string' ? service : '',
      // CloudFormation's default memory size.
      memoryGb: (typeof p.MemorySize === 'number' ? p.MemorySize : 128) / 1024,
      arm64: architectures.includes('arm64'),
      traced: record(p.TracingConfig).Mode === 'Active',
    };
  });
}

/** The function with Powertools service name `service`; throws when the template has none. */
export function functionOf(functions: readonly LambdaFunction[], service: string): LambdaFunction {
  const found = functions.find((f) => f.service === service);
  if (!found) throw new Error(`the template has no Lambda function with POWERTOOLS_SERVICE_NAME=${service}`);
  return found;
}

interface Schedule {
  readonly ruleId: string;
  readonly expression: string;
  readonly periodSeconds: number;
  readonly enabled: boolean;
  readonly targets: readonly string[];
}

const rateUnits: Readonly<Record<string, number>> = { minute: 60, hour: 3600, day: 86_400 };

/** Seconds between runs of `rate(n unit)`; cron expressions are refused rather than guessed. */
export function ratePeriodSeconds(expression: string): number {
  const match = /^rate\((\d+) (minute|hour|day)s?\)$/.exec(expression.trim());
  const unit = match?.[2] ? rateUnits[match[2]] : undefined;
  if (!match || unit === undefined) {
    throw new Error(`cannot cost schedule "${expression}": only rate(n minutes|hours|days) is modelled`);
  }
  return Number(match[1]) * unit;
}

function schedules(template: CfnTemplate): Schedule[] {
  return ofType(template, 'AWS::Events::Rule')
    .filter(([, p]) => typeof p.ScheduleExpression === 'string')
    .map(([ruleId, p]) => {
      const expression = p.ScheduleExpression as string;
      const targets = (Array.isArray(p.Targets) ? p.Targets : []).map(
        (t) => referencedId(record(t).Arn) ?? String(record(t).Arn),
      );
      // CloudFormation creates a rule ENABLED unless State says otherwise.
      return {
        ruleId,
        expression,
        periodSeconds: ratePeriodSeconds(expression),
        enabled: p.State !== 'DISABLED',
        targets,
      };
    });
}

// ---------------------------------------------------------------------------------------------
// Shared arithmetic

const usdPer = (quantity: number, price: { readonly usd: number }, per = 1): number =>
  (quantity * price.usd) / per;

const fmt = (n: number, digits = 0): string =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

const plural = (n: number, word: string): string => `${fmt(n)} ${word}${n === 1 ? '' : 's'}`;

/** A unit price as a bill prints it: cents for whole-cent prices, every digit below a cent. */
const each = (price: { readonly usd: number }): string =>
  `$${price.usd >= 0.01 ? fmt(price.usd, 2) : String(price.usd)}`;

/** What `invocations` of `fn` lasting `seconds` each cost: duration at its memory and architecture, plus requests. */
export function lambdaUsd(book: PriceBook, fn: LambdaFunction, invocations: number, seconds: number): number {
  const gbSeconds = invocations * seconds * fn.memoryGb;
  const duration = fn.arm64 ? book.prices.lambdaArmGbSecond : book.prices.lambdaX86GbSecond;
  return usdPer(gbSeconds, duration) + usdPer(invocations, book.prices.lambdaRequestMillion, million);
}

const memory = (fn: LambdaFunction): string =>
  `${fmt(fn.memoryGb * 1024)} MB ${fn.arm64 ? 'arm64' : 'x86_64'}`;

/** Of the hours in a month, the fraction in which a metric sent every `periodSeconds` receives data. */
const hoursWithData = (periodSeconds: number | undefined): number =>
  periodSeconds === undefined ? 0 : Math.min(1, 3600 / periodSeconds);

const sum = (parts: readonly CostPart[]): number => parts.reduce((total, p) => total + p.usd, 0);

// ---------------------------------------------------------------------------------------------
// What runs when nobody approves anything

interface IdleRuns {
  readonly relay: LambdaFunction;
  readonly gauges: LambdaFunction;
  /** Undefined in a template without the delivery audit. */
  readonly audit: LambdaFunction | undefined;
  readonly relayRunsPerMonth: number;
  readonly gaugeRunsPerMonth: number;
  readonly auditRunsPerMonth: number;
  /** Mean seconds between idle relay runs; undefined when no enabled schedule runs it. */
  readonly relayPeriodSeconds: number | undefined;
  readonly gaugePeriodSeconds: number | undefined;
  readonly describe: string;
}

/**
 * The enabled schedules and what they run. Only the relay sweeps, the inbox gauges and the
 * delivery audit are modelled: any other enabled schedule fails the model instead of being
 * costed as free. The audit rides the relay's sweep rule, so it wakes no Aurora of its own.
 */
function idleRuns(template: CfnTemplate, book: PriceBook): IdleRuns {
  const functions = lambdaFunctions(template);
  const relay = functionOf(functions, relayServiceName);
  const gauges = functionOf(functions, inboxGaugesServiceName);
  const audit = functions.find((f) => f.service === deliveryAuditServiceName);
  const secondsPerMonth = book.assumptions.hoursPerMonth.value * 3600;
  let relayRunsPerMonth = 0;
  let gaugeRunsPerMonth = 0;
  let auditRunsPerMonth = 0;
  const runsWithTheSweep = new Set<string>();
  const seen: string[] = [];
  for (const s of schedules(template)) {
    if (!s.enabled) {
      seen.push(`${s.expression} disabled`);
      continue;
    }
    for (const target of s.targets) {
      const runs = secondsPerMonth / s.periodSeconds;
      if (target === relay.id) relayRunsPerMonth += runs;
      else if (target === gauges.id) gaugeRunsPerMonth += runs;
      else if (target === audit?.id) {
        auditRunsPerMonth += runs;
        if (s.targets.includes(relay.id)) runsWithTheSweep.add(s.ruleId);
      } else
        throw new Error(`scheduled rule ${s.ruleId} targets ${target}, which the cost model does not know`);
      seen.push(
        `${s.expression} -> ${target === relay.id ? 'relay' : target === gauges.id ? 'gauges' : 'audit'}`,
      );
    }
  }
  // The model's Aurora wake-ups are the relay's sweeps: an audit on a schedule of its own would
  // wake the cluster at other times, which it does not price.
  if (auditRunsPerMonth > 0 && runsWithTheSweep.size === 0) {
    throw new Error(
      'the delivery audit runs on a schedule of its own: the cost model prices it only on the sweep rule',
    );
  }
  const period = (runs: number) => (runs > 0 ? secondsPerMonth / runs : undefined);
  return {
    relay,
    gauges,
    audit,
    relayRunsPerMonth,
    gaugeRunsPerMonth,
    auditRunsPerMonth,
    relayPeriodSeconds: period(relayRunsPerMonth),
    gaugePeriodSeconds: period(gaugeRunsPerMonth),
    describe: seen.join(', '),
  };
}

interface AuroraIdle {
  readonly clusters: number;
  readonly computeUsd: number;
  /** A full month awake at the capacity traffic keeps it at (MinCapacity, or the assumed active ACU). */
  readonly awakeMonthUsd: number;
  readonly pausedFraction: number;
  readonly detail: string;
}

/**
 * Aurora Serverless v2 when idle. With MinCapacity 0 each idle sweep wakes the writer, which
 * stays up for resume + run + SecondsUntilAutoPause (at most the sweep period) and pauses for
 * the rest; with MinCapacity above 0 it never pauses and idles at its minimum.
 */
function auroraIdle(template: CfnTemplate, book: PriceBook, runs: IdleRuns, alwaysAwake = false): AuroraIdle {
  const { assumptions: a, prices: p } = book;
  const hours = a.hoursPerMonth.value;
  const instances = ofType(template, 'AWS::RDS::DBInstance');
  let computeUsd = 0;
  let awakeMonthUsd = 0;
  let pausedFraction = 1;
  const details: string[] = [];
  for (const [id, props] of ofType(template, 'AWS::RDS::DBCluster')) {
    const scaling = record(props.ServerlessV2ScalingConfiguration);
    const members = instances.filter(([, i]) => referencedId(i.DBClusterIdentifier) === id);
    const provisioned = members.filter(([, i]) => i.DBInstanceClass !== 'db.serverless');
    if (provisioned.length > 0 || typeof scaling.MinCapacity !== 'number') {
      throw new Error(
        `cluster ${id} is not all Aurora Serverless v2: the cost model prices only db.serverless`,
      );
    }
    const min = scaling.MinCapacity;
    awakeMonthUsd += members.length * Math.max(min, a.auroraActiveAcu.value) * hours * p.auroraAcuHour.usd;
    if (min === 0 && alwaysAwake) {
      computeUsd += members.length * a.auroraActiveAcu.value * hours * p.auroraAcuHour.usd;
      pausedFraction = 0;
      details.push(
        `MinCapacity 0 but kept awake all month (the range's high end): ${plural(members.length, 'instance')} x ${a.auroraActiveAcu.value} ACU (assumed) x ${hours} h`,
      );
      continue;
    }
    if (min > 0) {
      computeUsd += members.length * min * hours * p.auroraAcuHour.usd;
      pausedFraction = 0;
      details.push(
        `MinCapacity ${min}: never pauses, ${plural(members.length, 'instance')} x ${min} ACU x ${hours} h`,
      );
      continue;
    }
    // AWS's default when MinCapacity is 0 and no interval is given.
    const autoPause = typeof scaling.SecondsUntilAutoPause === 'number' ? scaling.SecondsUntilAutoPause : 300;
    const period = runs.relayPeriodSeconds;
    const awake =
      period === undefined
        ? 0
        : Math.min(period, a.auroraResumeSeconds.value + a.relaySweepSeconds.value + autoPause);
    const fraction = period === undefined ? 0 : awake / period;
    pausedFraction = Math.min(pausedFraction, 1 - fraction);
    computeUsd += members.length * a.auroraActiveAcu.value * hours * fraction * p.auroraAcuHour.usd;
    details.push(
      period === undefined
        ? 'MinCapacity 0 and nothing scheduled wakes it: paused all month'
        : `MinCapacity 0, auto-pause after ${autoPause} s: awake ${fmt(awake)} s of every ${fmt(period)} s sweep ` +
            `(resume ${a.auroraResumeSeconds.value} + run ${a.relaySweepSeconds.value} + ${autoPause}), ` +
            `paused ${fmt((1 - fraction) * 100, 1)}%; ${plural(members.length, 'instance')} x ${a.auroraActiveAcu.value} ACU (assumed) x ${fmt(hours * fraction, 1)} h`,
    );
  }
  return {
    clusters: countOf(template, 'AWS::RDS::DBCluster'),
    computeUsd,
    awakeMonthUsd,
    pausedFraction,
    detail: details.join('; ') || 'no Aurora cluster in the template',
  };
}

/** The network pieces that bill by the hour whatever the traffic; none is expected here. */
function networkPart(template: CfnTemplate, book: PriceBook): CostPart {
  const hours = book.assumptions.hoursPerMonth.value;
  const nat = countOf(template, 'AWS::EC2::NatGateway');
  const eips = countOf(template, 'AWS::EC2::EIP');
  // An endpoint without a type is a Gateway endpoint, which costs nothing.
  const interfaceAzs = ofType(template, 'AWS::EC2::VPCEndpoint')
    .filter(([, p]) => p.VpcEndpointType === 'Interface')
    .reduce((n, [, p]) => n + Math.max(1, Array.isArray(p.SubnetIds) ? p.SubnetIds.length : 1), 0);
  const usd =
    nat * hours * book.prices.natGatewayHour.usd +
    eips * hours * book.prices.publicIpv4Hour.usd +
    interfaceAzs * hours * book.prices.interfaceEndpointAzHour.usd;
  const found = [
    nat ? plural(nat, 'NAT gateway') : '',
    interfaceAzs ? `${plural(interfaceAzs, 'interface endpoint AZ')}` : '',
    eips ? plural(eips, 'Elastic IP') : '',
  ].filter(Boolean);
  return {
    name: 'NAT gateways, VPC endpoints, public IPv4',
    usd,
    detail: found.length
      ? `${found.join(', ')} x ${hours} h (data processed not modelled)`
      : 'none in the template',
  };
}

/**
 * What the pipeline costs in a month in which nobody approves anything: the resources that bill
 * by the month, and the scheduled runs (relay sweeps, inbox gauges) with what they touch.
 */
export function idleMonthlyCost(
  template: CfnTemplate,
  topology: CostTopology,
  book: PriceBook,
  assume: IdleAssumptions = {},
): IdleMonthlyCost {
  const { prices: p, assumptions: a } = book;
  const runs = idleRuns(template, book);
  const aurora = auroraIdle(template, book, runs, assume.auroraAwake);
  const consumers = Object.keys(topology.consumers).length;

  const secrets = countOf(template, 'AWS::SecretsManager::Secret');
  const keys = countOf(template, 'AWS::KMS::Key');
  const dashboards = countOf(template, 'AWS::CloudWatch::Dashboard');
  const alarms = ofType(template, 'AWS::CloudWatch::Alarm');
  let alarmMetrics = 0;
  let highResolution = 0;
  for (const [, alarm] of alarms) {
    const metrics = Array.isArray(alarm.Metrics)
      ? alarm.Metrics.filter((m) => record(m).MetricStat !== undefined).length
      : 1;
    if (typeof alarm.Period === 'number' && alarm.Period < 60) highResolution += metrics;
    else alarmMetrics += metrics;
  }

  const relayMetricMonths = relayGaugeMetrics.length * hoursWithData(runs.relayPeriodSeconds);
  // The relay's PendingEvents is sent only while above zero (shared/outbox/relay-metrics.ts),
  // the inbox gauges and the audit's count only while above zero or while their alarm is not OK
  // yet (shared/inbox/inbox-gauges.ts): idle and healthy, none of them is billed.
  const gaugeMetricMonths = 0;
  const dataApiCalls =
    aurora.clusters > 0
      ? runs.relayRunsPerMonth * a.relaySweepDataApiCalls.value +
        runs.auditRunsPerMonth * a.auditIdleDataApiCalls.value
      : 0;
  const gaugeQueries = a.gaugeQueriesPerShard.value * topology.inbox.openIndexShards;
  // Each SQS event source mapping long-polls its queue all month, messages or not: counted from
  // the template, so a mapping more (a queue per consumer) is priced as it is added.
  const sqsMappings = ofType(template, 'AWS::Lambda::EventSourceMapping').filter(
    ([, p]) => template.Resources[referencedId(p.EventSourceArn) ?? '']?.Type === 'AWS::SQS::Queue',
  );
  const mappings = sqsMappings.length;
  const pollersOf = (mapping: Readonly<Record<string, unknown>>) =>
    assume.pollers === 'fewest' && record(mapping.ScalingConfig).MaximumConcurrency === undefined
      ? a.sqsMappingFewestPollers.value
      : a.sqsMappingIdlePollers.value;
  const pollers = sqsMappings.reduce((n, [, m]) => n + pollersOf(m), 0);
  const functions = lambdaFunctions(template);
  const polledBy = sqsMappings.map(([, m]) => {
    const fn = functions.find((f) => f.id === referencedId(m.FunctionName) || f.id === m.FunctionName);
    return fn?.service || String(referencedId(m.FunctionName) ?? m.FunctionName);
  });
  const pollsPerMonth = pollers * (3600 / a.sqsLongPollSeconds.value) * a.hoursPerMonth.value;
  const gaugeReadUnits = runs.gaugeRunsPerMonth * consumers * gaugeQueries * a.gaugeQueryReadUnits.value;
  const traces =
    (runs.relay.traced ? runs.relayRunsPerMonth : 0) +
    (runs.gauges.traced ? runs.gaugeRunsPerMonth : 0) +
    (runs.audit?.traced ? runs.auditRunsPerMonth : 0);
  const logBytes =
    runs.relayRunsPerMonth * a.relayIdleLogBytes.value +
    runs.gaugeRunsPerMonth * a.gaugeLogBytes.value +
    runs.auditRunsPerMonth * a.relayIdleLogBytes.value;

  const parts: CostPart[] = [
    { name: 'Aurora Serverless v2 compute', usd: aurora.computeUsd, detail: aurora.detail },
    {
      name: 'Aurora storage',
      usd: aurora.clusters * a.auroraStorageGb.value * p.auroraStorageGbMonth.usd,
      detail: `${plural(aurora.clusters, 'cluster')} x ${a.auroraStorageGb.value} GB (assumed) x ${each(p.auroraStorageGbMonth)}/GB-month`,
    },
    {
      name: 'RDS Data API (sweeps)',
      usd: usdPer(dataApiCalls, p.dataApiMillion, million),
      detail: `${fmt(runs.relayRunsPerMonth)} relay runs x ${a.relaySweepDataApiCalls.value} requests + ${fmt(runs.auditRunsPerMonth)} audit runs x ${a.auditIdleDataApiCalls.value}`,
    },
    {
      name: 'Secrets Manager',
      usd: secrets * p.secretMonth.usd,
      detail: `${plural(secrets, 'secret')} x ${each(p.secretMonth)} (API calls not counted)`,
    },
    {
      name: 'KMS keys',
      usd: keys * p.kmsKeyMonth.usd,
      detail: `${plural(keys, 'customer managed key')} x ${each(p.kmsKeyMonth)}`,
    },
    {
      name: 'CloudWatch alarms',
      usd: alarmMetrics * p.alarmMetricMonth.usd + highResolution * p.highResolutionAlarmMetricMonth.usd,
      detail:
        `${plural(alarms.length, 'alarm')}: ${plural(alarmMetrics, 'standard-resolution metric')} x ${each(p.alarmMetricMonth)}` +
        (highResolution
          ? `, ${plural(highResolution, 'high-resolution metric')} x ${each(p.highResolutionAlarmMetricMonth)}`
          : ''),
    },
    {
      name: 'CloudWatch custom metrics',
      usd: (relayMetricMonths + gaugeMetricMonths) * p.customMetricMonth.usd,
      detail:
        `relay ${relayGaugeMetrics.join('/')} (${fmt(hoursWithData(runs.relayPeriodSeconds) * 100)}% of hours) + ` +
        `relay ${relayMetricNames.pending}, ${[...Object.values(inboxGaugeMetricNames), auditMetricNames.undelivered].join('/')} x ${consumers} consumers (0% of hours: sent only while above zero or an alarm is not OK) ` +
        `= ${fmt(relayMetricMonths + gaugeMetricMonths, 1)} metric-months x ${each(p.customMetricMonth)}`,
    },
    {
      name: 'CloudWatch dashboards',
      usd: dashboards * p.dashboardMonth.usd,
      detail: `${plural(dashboards, 'dashboard')} x ${each(p.dashboardMonth)}`,
    },
    {
      name: 'Lambda (scheduled runs)',
      usd:
        lambdaUsd(book, runs.relay, runs.relayRunsPerMonth, a.relaySweepSeconds.value) +
        lambdaUsd(book, runs.gauges, runs.gaugeRunsPerMonth, a.gaugeRunSeconds.value) +
        (runs.audit ? lambdaUsd(book, runs.audit, runs.auditRunsPerMonth, a.auditIdleSeconds.value) : 0),
      detail:
        `relay ${fmt(runs.relayRunsPerMonth)} x ${a.relaySweepSeconds.value} s at ${memory(runs.relay)}; ` +
        `gauges ${fmt(runs.gaugeRunsPerMonth)} x ${a.gaugeRunSeconds.value} s at ${memory(runs.gauges)}; ` +
        `audit ${fmt(runs.auditRunsPerMonth)} x ${a.auditIdleSeconds.value} s${runs.audit ? ` at ${memory(runs.audit)}` : ''} (${runs.describe})`,
    },
    {
      name: 'SQS (event source mappings polling)',
      usd: usdPer(pollsPerMonth, p.sqsRequestMillion, million),
      detail: `${plural(mappings, 'SQS event source mapping')} (${polledBy.join(', ')}), ${plural(pollers, 'poller')} in all (${assume.pollers === 'fewest' ? `the fewest Lambda may optimize to: ${a.sqsMappingFewestPollers.value} a mapping, ${a.sqsMappingIdlePollers.value} with maximum concurrency` : `${a.sqsMappingIdlePollers.value} a mapping, as AWS documents for a quiet standard queue`}) x one ${a.sqsLongPollSeconds.value} s long poll = ${fmt(pollsPerMonth)} ReceiveMessage requests`,
    },
    {
      name: 'DynamoDB reads (gauge queries)',
      usd: usdPer(gaugeReadUnits, p.dynamoReadRequestMillion, million),
      detail: `${fmt(runs.gaugeRunsPerMonth)} runs x ${consumers} consumers x ${gaugeQueries} Queries x ${a.gaugeQueryReadUnits.value} RRU`,
    },
    {
      name: 'CloudWatch API (gauge runs read their alarms)',
      usd: usdPer(runs.gaugeRunsPerMonth + runs.auditRunsPerMonth, p.cloudWatchApiThousandRequests, 1_000),
      detail: `${fmt(runs.gaugeRunsPerMonth + runs.auditRunsPerMonth)} DescribeAlarms calls (gauges and audit runs)`,
    },
    {
      name: 'X-Ray traces (scheduled runs)',
      usd: usdPer(traces, p.xrayTraceMillion, million),
      detail: `${fmt(traces)} traces`,
    },
    {
      name: 'CloudWatch Logs ingestion (scheduled runs)',
      usd: usdPer(logBytes / gib, p.logsIngestGb),
      detail: `${fmt(runs.relayRunsPerMonth + runs.gaugeRunsPerMonth + runs.auditRunsPerMonth)} invocations x ~1 KB = ${fmt(logBytes / 1024 ** 2, 1)} MB`,
    },
    networkPart(template, book),
    {
      name: 'No idle charge',
      usd: 0,
      detail:
        `${plural(countOf(template, 'AWS::SQS::Queue'), 'SQS queue')} (requests: above), ` +
        `${plural(countOf(template, 'AWS::SNS::Topic'), 'SNS topic')}, ` +
        `${plural(countOf(template, 'AWS::S3::Bucket'), 'S3 bucket')} (~empty), ` +
        `${plural(countOf(template, 'AWS::ApiGateway::RestApi'), 'REST API')}, ` +
        `${plural(countOf(template, 'AWS::Events::EventBus'), 'event bus')} + ${plural(countOf(template, 'AWS::Events::Archive'), 'bus archive')} (~empty), ` +
        `${plural(countOf(template, 'AWS::DynamoDB::Table'), 'on-demand table')} (~empty; PITR bills by GB), ` +
        `scheduled-rule invocations ${each(p.eventBridgeScheduledRuleInvocation)} (unconfirmed), ` +
        'EMF metrics need no PutMetricData, VPC flow logs of an idle VPC ~0',
    },
  ];
  return { totalUsd: sum(parts), parts, auroraPausedFraction: aurora.pausedFraction };
}

/** An idle month at both ends of its assumptions, and at the count of pollers AWS documents. */
export interface IdleMonthlyRange {
  /** Each SQS mapping at the fewest pollers Lambda may optimize to; Aurora paused between sweeps. */
  readonly low: IdleMonthlyCost;
  /** Each SQS mapping at the pollers AWS documents for a quiet queue; Aurora paused between sweeps. */
  readonly documented: IdleMonthlyCost;
  /** As documented, and a cluster that may pause kept awake all month. */
  readonly high: IdleMonthlyCost;
}

/** The idle month's range: the figures the model assumes rather than reads, at each end. */
export function idleMonthlyRange(
  template: CfnTemplate,
  topology: CostTopology,
  book: PriceBook,
): IdleMonthlyRange {
  return {
    low: idleMonthlyCost(template, topology, book, { pollers: 'fewest' }),
    documented: idleMonthlyCost(template, topology, book),
    high: idleMonthlyCost(template, topology, book, { auroraAwake: true }),
  };
}

/**
 * Aurora instances that take the writer's capacity: the writer and every Serverless v2 reader in
 * promotion tier 0 or 1, which Aurora keeps at least at the writer's capacity
 * (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/aurora-serverless-v2.how-it-works.html,
 * read 2026-12-05). A busy cluster is billed that many times its writer's ACUs.
 */
export function instancesAtWriterCapacity(template: CfnTemplate): number {
  return ofType(template, 'AWS::RDS::DBInstance').filter(([, i]) => {
    const tier = i.PromotionTier;
    return tier === undefined || (typeof tier === 'number' && tier <= 1);
  }).length;
}

// ---------------------------------------------------------------------------------------------
// What approvals add

/** The log bytes one approval writes: the API's, the tasks API's and the relay's, and each consumer's it reaches. */
export function logBytesPerApproval(topology: CostTopology, book: PriceBook): number {
  const a = book.assumptions;
  return a.logBytesPerApproval.value + approvedConsumers(topology).length * a.logBytesPerConsumerEvent.value;
}

/** The consumers a `content.approved` event reaches (from the topology's rules), as the registry declares them. */
export function approvedConsumers(topology: CostTopology): ConsumerDefinition[] {
  const targets = topology.rules
    .filter((rule) => {
      const types = rule.pattern['detail-type'];
      return Array.isArray(types) && types.includes(topology.eventTypes.approved);
    })
    .flatMap((rule) => rule.targets as readonly string[]);
  return [...new Set(targets)].map((name) => {
    const consumer = topology.registry.find((c) => c.name === name);
    if (!consumer) throw new Error(`a rule targets consumer ${name}, which the registry does not declare`);
    return consumer;
  });
}

/** One resource a consumer declares, of kind `K`. */
export interface DeclaredResource<K extends ResourceKind> {
  readonly consumer: string;
  readonly key: string;
  readonly spec: Extract<ResourceSpec, { kind: K }>;
}

/** The resources of kind `kind` that `consumers` declare, in their order. */
export function declaredResources<K extends ResourceKind>(
  consumers: readonly ConsumerDefinition[],
  kind: K,
): DeclaredResource<K>[] {
  return consumers.flatMap((c) =>
    Object.entries(c.resources).flatMap(([key, spec]) =>
      spec.kind === kind ? [{ consumer: c.name, key, spec: spec as Extract<ResourceSpec, { kind: K }> }] : [],
    ),
  );
}

/** Write units of one put of an item of `itemKb` (DynamoDB bills a write per started KB). */
const tableWriteUnits = (itemKb: number): number => Math.ceil(itemKb);
/** Read units of one strongly consistent get of an item of `itemKb` (a read per started 4 KB). */
const tableReadUnits = (itemKb: number): number => Math.ceil(itemKb / 4);

/**
 * What a million approvals spread over a month add to the idle bill: each request's path
 * through the API, the relay, the bus and the consumers, plus the Aurora hours their steady
 * trickle keeps awake. A topic's deliveries depend on its subscribers and are left out.
 */
export function perMillionApprovals(
  template: CfnTemplate,
  topology: CostTopology,
  book: PriceBook,
): PerMillionApprovalsCost {
  const { prices: p, assumptions: a } = book;
  const n = million;
  const functions = lambdaFunctions(template);
  const tasksApi = functionOf(functions, tasksApiServiceName);
  const relay = functionOf(functions, relayServiceName);
  const approved = approvedConsumers(topology);
  const logBytes = logBytesPerApproval(topology, book);
  const consumers = approved.map((c) => ({
    name: c.name,
    fn: functionOf(functions, consumerServiceName(c.name)),
  }));
  const runs = idleRuns(template, book);
  const aurora = auroraIdle(template, book, runs);

  // What each consumer's declared resources take per event, from its declaration.
  const databases = declaredResources(approved, 'database');
  const tables = declaredResources(approved, 'table');
  const byConsumer = <K extends ResourceKind>(declared: readonly DeclaredResource<K>[]) =>
    approved
      .map((c) => ({ consumer: c.name, resources: declared.filter((d) => d.consumer === c.name) }))
      .filter((c) => c.resources.length > 0);
  const dataApiPerApproval =
    a.approveDataApiCalls.value +
    a.relayDataApiCallsPerEvent.value +
    databases.reduce((calls, d) => calls + d.spec.perEvent.calls, 0);
  const chunks = Math.ceil(a.eventBytes.value / (64 * 1024));
  const eventGb = (n * a.eventBytes.value) / gib;
  const archives = ofType(template, 'AWS::Events::Archive');
  const archiveStorageGbMonth = archives.reduce((gb, [, archive]) => {
    const days =
      typeof archive.RetentionDays === 'number' && archive.RetentionDays > 0 ? archive.RetentionDays : 30;
    return gb + eventGb * Math.min(1, days / 30);
  }, 0);
  const inboxWru =
    consumers.length *
    (a.inboxWritesPerConsumer.value * Math.ceil(a.inboxItemKb.value) + a.inboxIndexWritesPerConsumer.value);
  // Gets priced as strongly consistent (an eventually consistent one is half a unit): the upper bound.
  const tableUse = tables.map(({ consumer, key, spec: { perEvent } }) => ({
    wru: perEvent.writes * tableWriteUnits(perEvent.itemKb),
    rru: perEvent.reads * tableReadUnits(perEvent.itemKb),
    detail: `${key} of ${consumer}: ${perEvent.writes} put x ${tableWriteUnits(perEvent.itemKb)} WRU + ${perEvent.reads} get x ${tableReadUnits(perEvent.itemKb)} RRU`,
  }));
  const tableWru = tableUse.reduce((units, t) => units + t.wru, 0);
  const tableRru = tableUse.reduce((units, t) => units + t.rru, 0);
  const traced = [tasksApi, relay, ...consumers.map((c) => c.fn)].filter((f) => f.traced).length;
  const detailedApiMetrics = ofType(template, 'AWS::ApiGateway::Stage').some(([, stage]) =>
    (Array.isArray(stage.MethodSettings) ? stage.MethodSettings : []).some(
      (m) => record(m).MetricsEnabled === true,
    ),
  )
    ? a.apiMethodDetailedMetrics.value
    : 0;
  const busyMetrics =
    relayBusyCounters.length +
    consumers.length * Object.keys(consumerMetricNames).length +
    detailedApiMetrics;
  const consumerUsd = consumers.reduce(
    (usd, c) => usd + lambdaUsd(book, c.fn, n, a.consumerSeconds.value),
    0,
  );
  // The delivery audit reads each delivered event once: a page per `pageSize` events, and each
  // (event, consumer) key once, eventually consistent (half a unit per 4 KB of the item).
  const audit = functions.find((f) => f.service === deliveryAuditServiceName);
  const auditPages = n / topology.audit.pageSize;
  const auditRru = consumers.length * Math.ceil(a.inboxItemKb.value / 4) * 0.5;

  // Each approval's task was created first (POST /tasks): a request, a tasks API run, a statement.
  const createUsd =
    usdPer(n, p.apiGatewayRestMillion, million) +
    lambdaUsd(book, tasksApi, n, a.taskCreateSeconds.value) +
    usdPer(n * a.taskCreateDataApiCalls.value, p.dataApiMillion, million) +
    (aurora.clusters > 0 ? usdPer(n * a.taskCreateIoPerTask.value, p.auroraIoMillion, million) : 0) +
    usdPer((n * a.taskCreateLogBytes.value) / gib, p.logsIngestGb) +
    (tasksApi.traced ? usdPer(n, p.xrayTraceMillion, million) : 0);
  // What the tables keep of each approval: every inbox record for its retention (its TTL, derived
  // from the redelivery paths), each declared table's item for a month (kept while its task is;
  // each further month costs as much again); storage and point-in-time recovery alike, both
  // billed on the table's size, which counts each item with DynamoDB's per-item overhead.
  const monthSeconds = a.hoursPerMonth.value * 3600;
  const itemGb = (kb: number) => (kb * 1024 + a.dynamoItemOverheadBytes.value) / gib;
  const inboxGbMonths = approved.reduce(
    (gb, c) =>
      gb +
      n *
        itemGb(a.inboxItemKb.value) *
        (inboxSettingsFor(topology as RetentionTopology, c.name).retentionSeconds / monthSeconds),
    0,
  );
  const retentionDays = approved.map(
    (c) => inboxSettingsFor(topology as RetentionTopology, c.name).retentionSeconds / 86_400,
  );
  const declaredGbMonths = tables.reduce(
    (gb, t) => gb + n * t.spec.perEvent.writes * itemGb(t.spec.perEvent.itemKb),
    0,
  );
  const storedGbMonths = inboxGbMonths + declaredGbMonths;

  const parts: CostPart[] = [
    {
      name: 'Task creation (POST /tasks)',
      usd: createUsd,
      detail:
        `the task each approval decides: 1 request x ${each(p.apiGatewayRestMillion)}/M, ${a.taskCreateSeconds.value} s of the tasks API at ${memory(tasksApi)}, ` +
        `${a.taskCreateDataApiCalls.value} Data API request, ~${a.taskCreateIoPerTask.value} Aurora I/O (a guess), ~${fmt(a.taskCreateLogBytes.value / 1024)} KB of logs` +
        (tasksApi.traced ? ', 1 X-Ray trace' : ''),
    },
    {
      name: 'API Gateway REST requests',
      usd: usdPer(n, p.apiGatewayRestMillion, million),
      detail: `1 request per approval x ${each(p.apiGatewayRestMillion)}/M`,
    },
    {
      name: 'Lambda tasks-api',
      usd: lambdaUsd(book, tasksApi, n, a.tasksApiSeconds.value),
      detail: `${a.tasksApiSeconds.value} s at ${memory(tasksApi)} + 1 request`,
    },
    {
      name: 'Lambda relay (nudged runs)',
      usd: lambdaUsd(book, relay, n, a.relayNudgeSeconds.value),
      detail: `at most one run per approval, ${a.relayNudgeSeconds.value} s at ${memory(relay)}`,
    },
    {
      name: 'Lambda consumers',
      usd: consumerUsd,
      detail: `${consumers.map((c) => c.name).join(', ')}: ${a.consumerSeconds.value} s each at ${[...new Set(consumers.map((c) => memory(c.fn)))].join(', ')}`,
    },
    {
      name: 'RDS Data API',
      usd: usdPer(n * dataApiPerApproval, p.dataApiMillion, million),
      detail: `${dataApiPerApproval} requests per approval (${[
        `approve ${a.approveDataApiCalls.value}`,
        `relay ${a.relayDataApiCallsPerEvent.value}`,
        ...databases.map((d) => `${d.consumer} ${d.spec.perEvent.calls}`),
      ].join(', ')})`,
    },
    {
      name: 'Aurora I/O',
      usd: aurora.clusters > 0 ? usdPer(n * a.auroraIoPerApproval.value, p.auroraIoMillion, million) : 0,
      detail: `~${a.auroraIoPerApproval.value} I/O requests per approval (a guess, not measured)`,
    },
    {
      name: 'Aurora kept awake',
      usd: aurora.awakeMonthUsd - aurora.computeUsd,
      detail:
        'a steady trickle never leaves the writer idle long enough to pause: a full month awake ' +
        `($${fmt(aurora.awakeMonthUsd, 2)}) minus the idle compute ($${fmt(aurora.computeUsd, 2)})`,
    },
    {
      name: 'EventBridge PutEvents',
      usd: usdPer(n * chunks, p.eventBridgeCustomEventMillion, million),
      detail: `1 event of ~${fmt(a.eventBytes.value / 1024)} KB = ${plural(chunks, '64 KB chunk')} per approval (same-account rule delivery free)`,
    },
    {
      name: 'SQS (consumer queues)',
      usd: usdPer(n * consumers.length * a.sqsRequestsPerDelivery.value, p.sqsRequestMillion, million),
      detail: `${consumers.length} consumer queues x ${a.sqsRequestsPerDelivery.value} requests per event (the rule's SendMessage, the poller's ReceiveMessage and DeleteMessage, the handler's receipt check), one message per batch: the upper bound of a trickle`,
    },
    {
      name: 'EventBridge archive',
      usd:
        archives.length * usdPer(eventGb, p.eventBridgeArchiveGb) +
        usdPer(archiveStorageGbMonth, p.eventBridgeArchiveStorageGbMonth),
      detail: `${plural(archives.length, 'bus archive')}: ${fmt(eventGb, 2)} GB processed, ${fmt(archiveStorageGbMonth, 2)} GB-month kept`,
    },
    {
      name: 'DynamoDB writes and reads',
      usd:
        usdPer(n * (inboxWru + tableWru), p.dynamoWriteRequestMillion, million) +
        usdPer(n * tableRru, p.dynamoReadRequestMillion, million),
      detail:
        `inbox ${consumers.length} consumers x (${a.inboxWritesPerConsumer.value} writes x ${Math.ceil(a.inboxItemKb.value)} WRU + ${a.inboxIndexWritesPerConsumer.value} index WRU)` +
        tableUse.map((t) => `, ${t.detail}`).join('') +
        ` = ${inboxWru + tableWru} WRU + ${tableRru} RRU per approval`,
    },
    {
      name: 'DynamoDB storage and PITR',
      usd: usdPer(storedGbMonths, p.dynamoStorageGbMonth) + usdPer(storedGbMonths, p.dynamoPitrGbMonth),
      detail:
        `inbox ${consumers.length} records per approval of ~${a.inboxItemKb.value} KB + ${a.dynamoItemOverheadBytes.value} B, kept ${[...new Set(retentionDays.map((d) => fmt(d)))].join('/')} days (their TTL) = ${fmt(inboxGbMonths, 2)} GB-months` +
        tables
          .map((t) => `; ${t.key}: ${t.spec.perEvent.writes} item of ~${t.spec.perEvent.itemKb} KB a month`)
          .join('') +
        ` = ${fmt(storedGbMonths, 2)} GB-months x (${each(p.dynamoStorageGbMonth)} storage + ${each(p.dynamoPitrGbMonth)} PITR)`,
    },
    audit
      ? {
          name: 'Delivery audit',
          usd:
            usdPer(n * auditRru, p.dynamoReadRequestMillion, million) +
            usdPer(auditPages * a.auditDataApiCallsPerPage.value, p.dataApiMillion, million) +
            usdPer(
              auditPages * a.auditPageSeconds.value * audit.memoryGb,
              audit.arm64 ? p.lambdaArmGbSecond : p.lambdaX86GbSecond,
            ),
          detail:
            `${auditRru} RRU per approval (${consumers.length} inbox keys, eventually consistent), ` +
            `${fmt(auditPages)} pages of ${fmt(topology.audit.pageSize)} x (${a.auditDataApiCallsPerPage.value} Data API requests + ${a.auditPageSeconds.value} s at ${memory(audit)}); its runs ride the sweeps`,
        }
      : { name: 'Delivery audit', usd: 0, detail: 'not in the template' },
    ...byConsumer(declaredResources(approved, 'bucket')).map(({ consumer, resources }) => {
      const puts = resources.reduce((sum, b) => sum + b.spec.perEvent.puts, 0);
      return {
        name: `S3 PUT (${consumer})`,
        usd: usdPer(n * puts, p.s3PutThousand, 1000),
        detail: `${puts} PUT per approval into ${resources.map((b) => b.key).join(', ')} (storage not counted)`,
      };
    }),
    ...byConsumer(declaredResources(approved, 'topic')).map(({ consumer, resources }) => {
      const publishes = resources.reduce((sum, t) => sum + t.spec.perEvent.publishes, 0);
      return {
        name: `SNS publish (${consumer})`,
        usd: usdPer(n * publishes, p.snsPublishMillion, million),
        detail: `${publishes} publish per approval to ${resources.map((t) => t.key).join(', ')}; deliveries depend on the subscribers and are excluded`,
      };
    }),
    {
      name: 'CloudWatch Logs ingestion',
      usd: usdPer((n * logBytes) / gib, p.logsIngestGb),
      detail: `~${fmt(logBytes / 1024)} KB per approval across the functions and the access log`,
    },
    {
      name: 'X-Ray traces',
      usd: usdPer(n * traced, p.xrayTraceMillion, million),
      detail: `${traced} traced invocations per approval, all sampled at these rates (an upper bound: AWS may join them into fewer traces)`,
    },
    {
      name: 'CloudWatch custom metrics while busy',
      usd: busyMetrics * p.customMetricMonth.usd,
      detail:
        `data every hour: relay ${relayBusyCounters.join('/')}, ${consumers.length} consumers x ${Object.keys(consumerMetricNames).length} counters` +
        (detailedApiMetrics ? `, ${detailedApiMetrics} API method metrics (detailed metrics on)` : '') +
        ` = ${busyMetrics} x ${each(p.customMetricMonth)}`,
    },
  ];
  return { totalUsd: sum(parts), parts };
}
