import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { topology, topologyWith } from '../../functions/topology';
import {
  type CfnResource,
  type CfnTemplate,
  type CostPart,
  idleMonthlyCost,
  idleMonthlyRange,
  instancesAtWriterCapacity,
  perMillionApprovals,
  ratePeriodSeconds,
  sandboxGoal,
  sandboxIdleGoalUsd,
} from '../../infra/aws/cost/model';
import { priceBook } from '../../infra/aws/cost/prices';
import { readSection } from '../../infra/docs/doc-section';
import {
  consumerServiceName,
  deliveryAuditServiceName,
  inboxGaugesServiceName,
} from '../../shared/consumers/contract';
import { type ConsumerDefinition, defineConsumer } from '../../shared/consumers/define-consumer';
import { type ResourceKind, table, topic } from '../../shared/consumers/resources';
import { ruleNameOf } from '../../shared/events/event-types';
import { inboxSettingsFor } from '../../shared/inbox/settings';
import { relayMetricNames, relayServiceName } from '../../shared/outbox/relay-metrics';
import type { ConsumerName } from '../../shared/topology';
import { synthPipeline } from '../infra/support/synth';

const { prices, assumptions } = priceBook;
const hours = assumptions.hoursPerMonth.value;

interface Shape {
  readonly minCapacity?: number;
  readonly autoPause?: number;
  readonly sweep?: string;
  readonly sweepState?: 'ENABLED' | 'DISABLED';
  readonly busySweep?: boolean;
  readonly secrets?: number;
  readonly keys?: number;
  readonly alarms?: number;
  readonly dashboards?: number;
  readonly extra?: Readonly<Record<string, CfnResource>>;
  /** The consumers whose functions it holds. @default the project's registry */
  readonly registry?: readonly ConsumerDefinition[];
}

const fn = (service: string, memorySize = 256): CfnResource => ({
  Type: 'AWS::Lambda::Function',
  Properties: {
    MemorySize: memorySize,
    Architectures: ['arm64'],
    TracingConfig: { Mode: 'Active' },
    Environment: { Variables: { POWERTOOLS_SERVICE_NAME: service } },
  },
});

const rule = (expression: string, target: string | readonly string[], state = 'ENABLED'): CfnResource => ({
  Type: 'AWS::Events::Rule',
  Properties: {
    ScheduleExpression: expression,
    State: state,
    Targets: (typeof target === 'string' ? [target] : target).map((t) => ({
      Arn: { 'Fn::GetAtt': [t, 'Arn'] },
    })),
  },
});

const many = (count: number, prefix: string, resource: CfnResource): Record<string, CfnResource> =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [`${prefix}${i}`, resource]));

/** A template of the few resources the model reads, shaped like the pipeline stack's. */
function template(shape: Shape = {}): CfnTemplate {
  const scaling: Record<string, number> = { MinCapacity: shape.minCapacity ?? 0, MaxCapacity: 2 };
  if (shape.autoPause !== undefined) scaling.SecondsUntilAutoPause = shape.autoPause;
  return {
    Resources: {
      Relay: fn(relayServiceName),
      Gauges: fn(inboxGaugesServiceName),
      Audit: fn(deliveryAuditServiceName),
      TasksApi: fn('tasks-api', 512),
      ...Object.fromEntries(
        (shape.registry ?? topology.registry).map((c) => [
          `Consumer${c.name}`,
          fn(consumerServiceName(c.name)),
        ]),
      ),
      // The delivery audit rides the sweep's rule, as the stack wires it.
      RelaySweep: rule(shape.sweep ?? 'rate(1 hour)', ['Relay', 'Audit'], shape.sweepState),
      ...(shape.busySweep ? { BusySweep: rule('rate(1 minute)', 'Relay', 'DISABLED') } : {}),
      GaugeSchedule: rule('rate(5 minutes)', 'Gauges'),
      Cluster: { Type: 'AWS::RDS::DBCluster', Properties: { ServerlessV2ScalingConfiguration: scaling } },
      Writer: {
        Type: 'AWS::RDS::DBInstance',
        Properties: { DBClusterIdentifier: { Ref: 'Cluster' }, DBInstanceClass: 'db.serverless' },
      },
      ...many(shape.secrets ?? 1, 'Secret', { Type: 'AWS::SecretsManager::Secret' }),
      ...many(shape.keys ?? 1, 'Key', { Type: 'AWS::KMS::Key' }),
      ...many(shape.alarms ?? 1, 'Alarm', {
        Type: 'AWS::CloudWatch::Alarm',
        Properties: { MetricName: 'DeadEvents', Period: 60 },
      }),
      ...many(shape.dashboards ?? 0, 'Dashboard', { Type: 'AWS::CloudWatch::Dashboard' }),
      ...shape.extra,
    },
  };
}

const part = (parts: readonly CostPart[], name: string): CostPart => {
  const found = parts.find((p) => p.name === name);
  if (!found) throw new Error(`no part "${name}" in ${parts.map((p) => p.name).join(', ')}`);
  return found;
};

const sumOf = (parts: readonly CostPart[]) => parts.reduce((s, p) => s + p.usd, 0);

/** The awake share of a sweep period: resume + run + the auto-pause interval, at most the period. */
const awakeShare = (period: number, autoPause: number) =>
  Math.min(period, assumptions.auroraResumeSeconds.value + assumptions.relaySweepSeconds.value + autoPause) /
  period;

describe('cost model: Aurora Serverless v2 between sweeps', () => {
  it('a cluster with MinCapacity 0 pauses between sweeps, as long as the sweep period and SecondsUntilAutoPause leave', () => {
    const hourly = idleMonthlyCost(template({ sweep: 'rate(1 hour)', autoPause: 300 }), topology, priceBook);
    const twoHourly = idleMonthlyCost(
      template({ sweep: 'rate(2 hours)', autoPause: 300 }),
      topology,
      priceBook,
    );
    const laterPause = idleMonthlyCost(
      template({ sweep: 'rate(1 hour)', autoPause: 600 }),
      topology,
      priceBook,
    );

    expect(hourly.auroraPausedFraction).toBeCloseTo(1 - awakeShare(3600, 300), 10);
    expect(twoHourly.auroraPausedFraction).toBeCloseTo(1 - awakeShare(7200, 300), 10);
    expect(laterPause.auroraPausedFraction).toBeCloseTo(1 - awakeShare(3600, 600), 10);
    expect(twoHourly.auroraPausedFraction).toBeGreaterThan(hourly.auroraPausedFraction);
    expect(laterPause.auroraPausedFraction).toBeLessThan(hourly.auroraPausedFraction);
    expect(part(hourly.parts, 'Aurora Serverless v2 compute').usd).toBeCloseTo(
      assumptions.auroraActiveAcu.value * hours * awakeShare(3600, 300) * prices.auroraAcuHour.usd,
      10,
    );
  });

  it('a sweep more frequent than resume + run + auto-pause keeps a MinCapacity 0 cluster awake all month', () => {
    const cost = idleMonthlyCost(template({ sweep: 'rate(1 minute)', autoPause: 300 }), topology, priceBook);

    expect(cost.auroraPausedFraction).toBe(0);
    expect(part(cost.parts, 'Aurora Serverless v2 compute').usd).toBeCloseTo(
      assumptions.auroraActiveAcu.value * hours * prices.auroraAcuHour.usd,
      10,
    );
  });

  it('a cluster with MinCapacity 0.5 never pauses and idles at its minimum', () => {
    const cost = idleMonthlyCost(template({ minCapacity: 0.5 }), topology, priceBook);

    expect(cost.auroraPausedFraction).toBe(0);
    expect(part(cost.parts, 'Aurora Serverless v2 compute').usd).toBeCloseTo(
      0.5 * hours * prices.auroraAcuHour.usd,
      10,
    );
  });
});

describe('cost model: what the template holds', () => {
  it('monthly parts scale with the resource counts in the template', () => {
    const small = idleMonthlyCost(
      template({ secrets: 1, keys: 1, alarms: 2, dashboards: 0 }),
      topology,
      priceBook,
    );
    const large = idleMonthlyCost(
      template({ secrets: 5, keys: 3, alarms: 16, dashboards: 2 }),
      topology,
      priceBook,
    );

    for (const [name, count, price] of [
      ['Secrets Manager', 5, prices.secretMonth],
      ['KMS keys', 3, prices.kmsKeyMonth],
      ['CloudWatch alarms', 16, prices.alarmMetricMonth],
      ['CloudWatch dashboards', 2, prices.dashboardMonth],
    ] as const) {
      expect(part(large.parts, name).usd, name).toBeCloseTo(count * price.usd, 10);
    }
    expect(part(small.parts, 'CloudWatch dashboards').usd).toBe(0);
    expect(large.totalUsd - small.totalUsd).toBeCloseTo(
      4 * prices.secretMonth.usd +
        2 * prices.kmsKeyMonth.usd +
        14 * prices.alarmMetricMonth.usd +
        2 * prices.dashboardMonth.usd,
      10,
    );
  });

  it('an SQS event source mapping costs its idle long polls, each one alike; a queue alone costs nothing', () => {
    const queue = { Type: 'AWS::SQS::Queue' };
    const mapping = (q: string): CfnResource => ({
      Type: 'AWS::Lambda::EventSourceMapping',
      Properties: { EventSourceArn: { 'Fn::GetAtt': [q, 'Arn'] }, FunctionName: { Ref: 'Relay' } },
    });
    const none = idleMonthlyCost(template({ extra: { Q1: queue, Q2: queue } }), topology, priceBook);
    const two = idleMonthlyCost(
      template({ extra: { Q1: queue, Q2: queue, M1: mapping('Q1'), M2: mapping('Q2') } }),
      topology,
      priceBook,
    );

    const polls =
      assumptions.sqsMappingIdlePollers.value * (3600 / assumptions.sqsLongPollSeconds.value) * hours;
    expect(part(none.parts, 'SQS (event source mappings polling)').usd).toBe(0);
    expect(part(two.parts, 'SQS (event source mappings polling)').usd).toBeCloseTo(
      (2 * polls * prices.sqsRequestMillion.usd) / 1e6,
      10,
    );
    // 5 pollers (AWS's count for a quiet queue), 3 long polls a minute: 657,000 requests a month
    // per mapping, about $0.26.
    expect(polls).toBe(657_000);
    expect(two.totalUsd - none.totalUsd).toBeCloseTo((2 * polls * prices.sqsRequestMillion.usd) / 1e6, 10);
  });

  it('the idle range: the fewest pollers at its low end (but 5 for a mapping with maximum concurrency), Aurora awake all month at its high end', () => {
    const queue = { Type: 'AWS::SQS::Queue' };
    const mapping = (q: string, maximumConcurrency?: number): CfnResource => ({
      Type: 'AWS::Lambda::EventSourceMapping',
      Properties: {
        EventSourceArn: { 'Fn::GetAtt': [q, 'Arn'] },
        FunctionName: { Ref: 'Relay' },
        ...(maximumConcurrency === undefined
          ? {}
          : { ScalingConfig: { MaximumConcurrency: maximumConcurrency } }),
      },
    });
    const stack = template({ extra: { Q1: queue, Q2: queue, M1: mapping('Q1'), M2: mapping('Q2', 5) } });

    const range = idleMonthlyRange(stack, topology, priceBook);

    const pollsOf = (pollers: number) => pollers * (3600 / assumptions.sqsLongPollSeconds.value) * hours;
    const polling = (cost: { parts: readonly CostPart[] }) =>
      part(cost.parts, 'SQS (event source mappings polling)').usd;
    expect(polling(range.documented)).toBeCloseTo((pollsOf(5 + 5) * prices.sqsRequestMillion.usd) / 1e6, 10);
    expect(polling(range.low)).toBeCloseTo((pollsOf(2 + 5) * prices.sqsRequestMillion.usd) / 1e6, 10);
    expect(range.high.auroraPausedFraction).toBe(0);
    expect(part(range.high.parts, 'Aurora Serverless v2 compute').usd).toBeCloseTo(
      assumptions.auroraActiveAcu.value * hours * prices.auroraAcuHour.usd,
      10,
    );
    expect(range.low.totalUsd).toBeLessThan(range.documented.totalUsd);
    expect(range.documented.totalUsd).toBeLessThan(range.high.totalUsd);
  });

  it('a disabled schedule costs nothing', () => {
    const without = idleMonthlyCost(template(), topology, priceBook);
    const withDisabledBusySweep = idleMonthlyCost(template({ busySweep: true }), topology, priceBook);
    const sweepDisabled = idleMonthlyCost(template({ sweepState: 'DISABLED' }), topology, priceBook);

    expect(withDisabledBusySweep.totalUsd).toBeCloseTo(without.totalUsd, 10);
    expect(sweepDisabled.auroraPausedFraction).toBe(1);
    expect(part(sweepDisabled.parts, 'RDS Data API (sweeps)').usd).toBe(0);
    expect(part(sweepDisabled.parts, 'Aurora Serverless v2 compute').usd).toBe(0);
  });

  it('an enabled schedule the model does not know fails the model instead of costing nothing', () => {
    const unknown = template({
      extra: { Other: fn('other'), OtherSchedule: rule('rate(1 minute)', 'Other') },
    });

    expect(() => idleMonthlyCost(unknown, topology, priceBook)).toThrow(/OtherSchedule targets Other/);
  });

  it('the delivery audit rides the sweep: its runs are priced, and on a schedule of its own it fails the model', () => {
    const cost = idleMonthlyCost(template({ sweep: 'rate(1 hour)' }), topology, priceBook);
    expect(part(cost.parts, 'Lambda (scheduled runs)').detail).toContain('audit 730 x');
    expect(part(cost.parts, 'RDS Data API (sweeps)').detail).toContain(
      `730 audit runs x ${assumptions.auditIdleDataApiCalls.value}`,
    );
    const own = template({
      extra: { AuditSchedule: rule('rate(10 minutes)', 'Audit') },
    });
    const separate = { Resources: { ...own.Resources, RelaySweep: rule('rate(1 hour)', 'Relay') } };
    expect(() => idleMonthlyCost(separate, topology, priceBook)).toThrow(/schedule of its own/);
  });

  it('an idle month bills the two relay gauges an alarm needs, every hour; PendingEvents and the inbox gauges, sent only while above zero, not at all', () => {
    const hourly = idleMonthlyCost(template({ sweep: 'rate(1 hour)' }), topology, priceBook);
    const everyTwoHours = idleMonthlyCost(template({ sweep: 'rate(2 hours)' }), topology, priceBook);

    const metrics = part(hourly.parts, 'CloudWatch custom metrics');
    expect(metrics.usd).toBeCloseTo(2 * prices.customMetricMonth.usd, 10);
    expect(metrics.detail).toMatch(
      new RegExp(`^relay ${relayMetricNames.oldestPendingAge}/${relayMetricNames.dead} \\(100% of hours\\)`),
    );
    expect(metrics.detail).toContain(`relay ${relayMetricNames.pending}, `);
    // A point every two hours leaves every other hour without data, which is not billed.
    expect(part(everyTwoHours.parts, 'CloudWatch custom metrics').usd).toBeCloseTo(
      prices.customMetricMonth.usd,
      10,
    );
  });

  it('reads rate expressions and refuses cron ones', () => {
    expect(ratePeriodSeconds('rate(1 minute)')).toBe(60);
    expect(ratePeriodSeconds('rate(5 minutes)')).toBe(300);
    expect(ratePeriodSeconds('rate(1 hour)')).toBe(3600);
    expect(ratePeriodSeconds('rate(2 days)')).toBe(172_800);
    expect(() => ratePeriodSeconds('cron(0 * * * ? *)')).toThrow(/only rate/);
  });

  it('the total is the sum of the parts', () => {
    const cost = idleMonthlyCost(template({ secrets: 3, alarms: 4 }), topology, priceBook);

    expect(cost.totalUsd).toBeCloseTo(sumOf(cost.parts), 10);
  });
});

describe('cost model: per million approvals', () => {
  const busyExtra = {
    Archive: { Type: 'AWS::Events::Archive', Properties: { RetentionDays: 30 } },
    Stage: { Type: 'AWS::ApiGateway::Stage', Properties: { MethodSettings: [{ MetricsEnabled: true }] } },
  };
  const busy = template({ extra: busyExtra });
  /** The approved consumers of the project's registry that declare a resource of `kind`. */
  const declaring = (kind: ResourceKind) =>
    topology.registry
      .filter((c) => c.subscribes.includes(topology.eventTypes.approved))
      .filter((c) => Object.values(c.resources).some((r) => r.kind === kind))
      .map((c) => c.name);

  it('includes every line of an approval, each with a cost, and totals them', () => {
    const cost = perMillionApprovals(busy, topology, priceBook);

    expect(cost.parts.map((p) => p.name)).toEqual([
      'Task creation (POST /tasks)',
      'API Gateway REST requests',
      'Lambda tasks-api',
      'Lambda relay (nudged runs)',
      'Lambda consumers',
      'RDS Data API',
      'Aurora I/O',
      'Aurora kept awake',
      'EventBridge PutEvents',
      'SQS (consumer queues)',
      'EventBridge archive',
      'DynamoDB writes and reads',
      'DynamoDB storage and PITR',
      'Delivery audit',
      ...declaring('bucket').map((c) => `S3 PUT (${c})`),
      ...declaring('topic').map((c) => `SNS publish (${c})`),
      'CloudWatch Logs ingestion',
      'X-Ray traces',
      'CloudWatch custom metrics while busy',
    ]);
    // Every kind of resource is priced here: the project's consumers declare each.
    expect(declaring('bucket').length * declaring('topic').length).toBeGreaterThan(0);
    for (const p of cost.parts) expect(p.usd, p.name).toBeGreaterThan(0);
    expect(cost.totalUsd).toBeCloseTo(sumOf(cost.parts), 10);
    // The audit reads each approval's key in the inbox of every consumer it goes to once,
    // eventually consistent: half a read unit per key.
    const keys =
      topology.rules.find((r) => r.name === ruleNameOf(topology.eventTypes.approved))?.targets.length ?? 0;
    expect(part(cost.parts, 'Delivery audit').detail).toMatch(
      new RegExp(`^${keys / 2} RRU per approval \\(${keys} inbox keys, eventually consistent\\)`),
    );
    expect(part(cost.parts, 'API Gateway REST requests').usd).toBeCloseTo(
      prices.apiGatewayRestMillion.usd,
      10,
    );
  });

  it("one more consumer moves the cost per approval by exactly its declared table and topic (and its inbox's writes and its logs)", () => {
    const fixture = defineConsumer({
      name: 'fixture',
      description: 'A consumer only this test declares',
      subscribes: [topology.eventTypes.approved],
      folder: new URL('.', import.meta.url),
      resources: {
        fixtureItems: table({
          description: 'Items of 1.5 KB: 2 WRU a put, 1 RRU a get',
          partitionKey: 'id',
          perEvent: { reads: 1, writes: 3, itemKb: 1.5 },
        }),
        fixtureNews: topic({
          description: 'Two messages an event',
          displayName: 'Fixture',
          perEvent: { publishes: 2 },
        }),
      },
    });
    const registry = [...topology.registry, fixture];
    const base = perMillionApprovals(busy, topology, priceBook);
    const variant = perMillionApprovals(
      template({ extra: busyExtra, registry }),
      topologyWith(registry),
      priceBook,
    );
    const moved = (name: string) => part(variant.parts, name).usd - part(base.parts, name).usd;

    // A million approvals: a price per million is the cost of one per approval.
    const inboxWru =
      assumptions.inboxWritesPerConsumer.value * Math.ceil(assumptions.inboxItemKb.value) +
      assumptions.inboxIndexWritesPerConsumer.value;
    expect(moved('DynamoDB writes and reads')).toBeCloseTo(
      (inboxWru + 3 * 2) * prices.dynamoWriteRequestMillion.usd + 1 * prices.dynamoReadRequestMillion.usd,
      10,
    );
    expect(part(variant.parts, 'DynamoDB writes and reads').detail).toContain(
      'fixtureItems of fixture: 3 put x 2 WRU + 1 get x 1 RRU',
    );
    expect(part(variant.parts, 'SNS publish (fixture)').usd).toBeCloseTo(
      2 * prices.snsPublishMillion.usd,
      10,
    );
    expect(variant.parts.some((p) => p.name === 'S3 PUT (fixture)')).toBe(false);
    // Its invocations' log lines, a million of them: one consumer's share, not a fixed count of consumers.
    expect(moved('CloudWatch Logs ingestion')).toBeCloseTo(
      ((1e6 * assumptions.logBytesPerConsumerEvent.value) / 1024 ** 3) * prices.logsIngestGb.usd,
      10,
    );
    // Nothing it does not declare moves: no database call, no object, nothing outside the consumers.
    for (const name of [
      'RDS Data API',
      ...declaring('bucket').map((c) => `S3 PUT (${c})`),
      ...declaring('topic').map((c) => `SNS publish (${c})`),
      'API Gateway REST requests',
      'Lambda tasks-api',
      'EventBridge PutEvents',
    ])
      expect(moved(name), name).toBe(0);
    expect(variant.parts.map((p) => p.name)).toEqual(
      [...base.parts.map((p) => p.name)].toSpliced(
        base.parts.findIndex((p) => p.name === 'CloudWatch Logs ingestion'),
        0,
        'SNS publish (fixture)',
      ),
    );
  });

  it('counts the task each approval decides, and what the tables keep of it: the inbox for its TTL, with PITR', () => {
    const cost = perMillionApprovals(busy, topology, priceBook);
    const approved = topology.registry.filter((c) => c.subscribes.includes(topology.eventTypes.approved));

    const create = part(cost.parts, 'Task creation (POST /tasks)');
    expect(create.usd).toBeGreaterThanOrEqual(
      prices.apiGatewayRestMillion.usd + assumptions.taskCreateDataApiCalls.value * prices.dataApiMillion.usd,
    );
    const gib = 1024 ** 3;
    const itemGb = (assumptions.inboxItemKb.value * 1024 + assumptions.dynamoItemOverheadBytes.value) / gib;
    const inboxGbMonths = approved.reduce(
      (gb, c) =>
        gb +
        1e6 * itemGb * (inboxSettingsFor(topology, c.name as ConsumerName).retentionSeconds / (hours * 3600)),
      0,
    );
    const stored = part(cost.parts, 'DynamoDB storage and PITR');
    // The inbox's share alone: its records outlive a month (their TTL covers every redelivery path).
    expect(stored.usd).toBeGreaterThan(
      inboxGbMonths * (prices.dynamoStorageGbMonth.usd + prices.dynamoPitrGbMonth.usd),
    );
    expect(inboxGbMonths * (prices.dynamoStorageGbMonth.usd + prices.dynamoPitrGbMonth.usd)).toBeGreaterThan(
      3,
    );
  });

  it('a reader in promotion tier 0 or 1 is billed at the writer’s capacity; one in a higher tier is not counted', () => {
    const reader = (tier: number): CfnResource => ({
      Type: 'AWS::RDS::DBInstance',
      Properties: {
        DBClusterIdentifier: { Ref: 'Cluster' },
        DBInstanceClass: 'db.serverless',
        PromotionTier: tier,
      },
    });

    expect(instancesAtWriterCapacity(template())).toBe(1);
    expect(instancesAtWriterCapacity(template({ extra: { Reader: reader(1) } }))).toBe(2);
    expect(instancesAtWriterCapacity(template({ extra: { Reader: reader(2) } }))).toBe(1);
    const idle = idleMonthlyCost(
      template({ minCapacity: 0.5, extra: { Reader: reader(1) } }),
      topology,
      priceBook,
    );
    expect(part(idle.parts, 'Aurora Serverless v2 compute').usd).toBeCloseTo(
      2 * 0.5 * hours * prices.auroraAcuHour.usd,
      10,
    );
  });

  it('a cluster that never pauses costs nothing more to keep awake', () => {
    const idle = idleMonthlyCost(template({ minCapacity: 0.5 }), topology, priceBook);
    const cost = perMillionApprovals(template({ minCapacity: 0.5 }), topology, priceBook);
    const pausing = perMillionApprovals(template({ minCapacity: 0 }), topology, priceBook);

    expect(part(cost.parts, 'Aurora kept awake').usd).toBeCloseTo(0, 10);
    expect(part(pausing.parts, 'Aurora kept awake').usd).toBeCloseTo(
      assumptions.auroraActiveAcu.value * hours * prices.auroraAcuHour.usd -
        part(idleMonthlyCost(template(), topology, priceBook).parts, 'Aurora Serverless v2 compute').usd,
      10,
    );
    expect(part(idle.parts, 'Aurora Serverless v2 compute').usd).toBeGreaterThan(0);
  });
});

describe('cost model on the synthesized sandbox stack', () => {
  it('prices Aurora, secrets, keys and alarms from the template, and the totals add up', () => {
    const { json } = synthPipeline({ stage: 'sandbox' });
    const count = (type: string) => Object.values(json.Resources).filter((r) => r.Type === type).length;

    const idle = idleMonthlyCost(json, topology, priceBook);
    const perMillion = perMillionApprovals(json, topology, priceBook);

    expect(part(idle.parts, 'Aurora Serverless v2 compute').usd).toBeGreaterThan(0);
    expect(part(idle.parts, 'Secrets Manager').usd).toBeCloseTo(
      count('AWS::SecretsManager::Secret') * prices.secretMonth.usd,
      10,
    );
    expect(part(idle.parts, 'KMS keys').usd).toBeCloseTo(count('AWS::KMS::Key') * prices.kmsKeyMonth.usd, 10);
    expect(part(idle.parts, 'CloudWatch alarms').usd).toBeGreaterThanOrEqual(
      count('AWS::CloudWatch::Alarm') * prices.alarmMetricMonth.usd - 1e-9,
    );
    expect(count('AWS::SecretsManager::Secret')).toBeGreaterThan(0);
    expect(count('AWS::CloudWatch::Alarm')).toBeGreaterThan(0);
    expect(idle.auroraPausedFraction).toBeGreaterThan(0);
    expect(idle.auroraPausedFraction).toBeLessThan(1);
    expect(idle.totalUsd).toBeCloseTo(sumOf(idle.parts), 10);
    expect(perMillion.totalUsd).toBeCloseTo(sumOf(perMillion.parts), 10);
    // The goal the report prints: an idle sandbox under $10 a month, Aurora asleep, or the trade
    // shown: what is over is the SQS mappings' polling alone (a queue per consumer, each mapping
    // with maximum concurrency, which Lambda does not scale below five pollers), and docs/aws.md
    // says what they buy.
    const range = idleMonthlyRange(json, topology, priceBook);
    const polling = part(range.low.parts, 'SQS (event source mappings polling)').usd;
    const goalUsd = sandboxIdleGoalUsd(topology.registry.length);
    expect(range.low.totalUsd - polling).toBeLessThanOrEqual(goalUsd);
    if (range.low.totalUsd > goalUsd) {
      const docs = readFileSync(new URL('../../docs/aws.md', import.meta.url), 'utf8');
      const trade = docs.slice(docs.indexOf('**What the idle bill buys.**'));
      expect(trade).toMatch(/queue per consumer/);
      // The figures are the generated section's (its Goal line: over by how much, and that the
      // difference is the polling), which npm run docs writes for whatever consumers there are.
      expect(readSection(docs, 'cost')).toContain('The difference is the polling of the stack');
      expect(readSection(docs, 'cost')).toContain(`$${range.low.totalUsd.toFixed(2)}`);
    }
    expect(idle.auroraPausedFraction).toBeGreaterThanOrEqual(sandboxGoal.auroraPausedFraction);
    expect(range.documented.totalUsd).toBeCloseTo(idle.totalUsd, 10);
  });

  it('prices each SQS mapping the template has, so a queue per consumer is priced as it is added', () => {
    const { json } = synthPipeline({ stage: 'sandbox' });
    const mappings = Object.values(json.Resources).filter(
      (r) => r.Type === 'AWS::Lambda::EventSourceMapping',
    );
    const polling = part(
      idleMonthlyCost(json, topology, priceBook).parts,
      'SQS (event source mappings polling)',
    );

    expect(polling.detail).toMatch(new RegExp(`^${mappings.length} SQS event source mappings? `));
    expect(polling.usd).toBeCloseTo(
      (mappings.length *
        assumptions.sqsMappingIdlePollers.value *
        (3600 / assumptions.sqsLongPollSeconds.value) *
        hours *
        prices.sqsRequestMillion.usd) /
        1e6,
      10,
    );
  });
});
