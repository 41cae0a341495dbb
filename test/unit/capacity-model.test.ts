import { describe, expect, it } from 'vitest';
import { topology, topologyWith } from '../../functions/topology';
import {
  type CapacityReport,
  type CapacityTopology,
  capacityAssumptions,
  capacityModel,
  type MeasuredCosts,
} from '../../infra/aws/capacity/model';
import { quotas, quotasIn, type Region, regions } from '../../infra/aws/capacity/quotas';
import { warmWritesFor, writeUnitsPerApproval } from '../../infra/aws/capacity/warm-throughput';
import type { CfnResource, CfnTemplate } from '../../infra/aws/cost/model';
import { priceBook } from '../../infra/aws/cost/prices';
import { consumerServiceName, inboxGaugesServiceName } from '../../shared/consumers/contract';
import { type ConsumerDefinition, defineConsumer } from '../../shared/consumers/define-consumer';
import { database, resourceConstructId, table } from '../../shared/consumers/resources';
import { relayServiceName } from '../../shared/outbox/relay-metrics';

const a = capacityAssumptions;
const rates = [10, 100, 1_000, 10_000];

/** Round figures, so a test can say what each limit comes to. */
const measured: MeasuredCosts = {
  dbCpuMs: {
    approve: 1,
    relayDrainPerEvent: 0,
    taskRead: 0,
    purgePerRow: 0,
    relayNudge: 0,
    relayNudgeSkipped: 0,
  },
  relayEventsPerSecPerRun: 3_000,
  relayDataApiCallsPer1000: 2,
};

type Key = readonly [hash: string, range?: string];

interface Shape {
  /** The stage's `/*` `*` method setting's rate; none when undefined. */
  readonly stageThrottle?: number;
  /** A method setting of the approve route's own. */
  readonly routeThrottle?: number;
  readonly inboxKey?: Key;
  /** The open-records index's key; no index when null. */
  readonly indexKey?: Key | null;
  readonly relayReserved?: number;
  readonly tasksApiReserved?: number;
  /** Every table's and index's WarmThroughput.WriteUnitsPerSecond; none when undefined. */
  readonly warmWrites?: number;
  readonly relayMayToggleRules?: boolean;
  readonly maxCapacity?: number;
  readonly minCapacity?: number;
  /** The consumers whose functions, grants and resources it holds. @default the project's registry */
  readonly registry?: readonly ConsumerDefinition[];
}

const fn = (service: string, extra: Record<string, unknown> = {}): CfnResource => ({
  Type: 'AWS::Lambda::Function',
  Properties: {
    MemorySize: 256,
    Architectures: ['arm64'],
    TracingConfig: { Mode: 'Active' },
    Environment: { Variables: { POWERTOOLS_SERVICE_NAME: service } },
    Role: { 'Fn::GetAtt': [`${service}Role`, 'Arn'] },
    ...extra,
  },
});

/** A function's role policy: actions on resources (logical ids), as CDK writes grants. */
const policy = (service: string, grants: readonly [actions: string[], on?: string][]): CfnResource => ({
  Type: 'AWS::IAM::Policy',
  Properties: {
    Roles: [{ Ref: `${service}Role` }],
    PolicyDocument: {
      Statement: grants.map(([actions, on]) => ({
        Effect: 'Allow',
        Action: actions.length === 1 ? actions[0] : actions,
        Resource: on ? { 'Fn::GetAtt': [on, 'Arn'] } : '*',
      })),
    },
  },
});

/** A table's or index's WarmThroughput, as the stack writes it. */
const warm = (shape: Shape) =>
  shape.warmWrites === undefined ? {} : { WarmThroughput: { WriteUnitsPerSecond: shape.warmWrites } };

const keySchema = ([hash, range]: Key) => [
  { AttributeName: hash, KeyType: 'HASH' },
  ...(range ? [{ AttributeName: range, KeyType: 'RANGE' }] : []),
];

const consumers = Object.keys(topology.consumers);
const dataApi = ['rds-data:ExecuteStatement'];
const inboxWrites = ['dynamodb:PutItem', 'dynamodb:UpdateItem'];

/** What each kind of resource lets its consumer's function do, as the stack grants it. */
const resourceActions = {
  table: ['dynamodb:GetItem', 'dynamodb:PutItem'],
  topic: ['sns:Publish'],
  bucket: ['s3:PutObject'],
} as const;

/** Each consumer's function and grants, and its resources (tables with their name's output), as the stack makes them. */
function consumerResources(
  registry: readonly ConsumerDefinition[],
  tableProps: Record<string, unknown> = {},
) {
  const resources: Record<string, CfnResource> = {};
  const outputs: Record<string, unknown> = {};
  for (const c of registry) {
    const service = consumerServiceName(c.name);
    const grants: [string[], string?][] = [[inboxWrites, 'Inbox']];
    for (const [key, spec] of Object.entries(c.resources)) {
      const id = resourceConstructId(key);
      if (spec.kind === 'database') {
        grants.push([dataApi, 'Cluster']);
        continue;
      }
      grants.push([[...resourceActions[spec.kind]], id]);
      if (spec.kind === 'table') {
        resources[id] = {
          Type: 'AWS::DynamoDB::Table',
          Properties: { KeySchema: keySchema([spec.partitionKey]), ...tableProps },
        };
        outputs[`${id}TableName`] = { Value: { Ref: id } };
      }
    }
    resources[`Consumer${c.name}`] = fn(service);
    resources[`Consumer${c.name}Policy`] = policy(service, grants);
  }
  return { resources, outputs };
}

/** A template of the few resources the capacity model reads, shaped like the pipeline stack's. */
function template(shape: Shape = {}): CfnTemplate {
  const settings = [
    ...(shape.stageThrottle === undefined
      ? []
      : [{ ResourcePath: '/*', HttpMethod: '*', ThrottlingRateLimit: shape.stageThrottle }]),
    ...(shape.routeThrottle === undefined
      ? []
      : [
          {
            ResourcePath: '/~1tasks~1{taskId}~1approve',
            HttpMethod: 'POST',
            ThrottlingRateLimit: shape.routeThrottle,
          },
        ]),
  ];
  const indexKey = shape.indexKey === undefined ? (['openKey', 'eventId'] as const) : shape.indexKey;
  const registry = shape.registry ?? topology.registry;
  const approved = registry.filter((c) => c.subscribes.includes(topology.eventTypes.approved));
  const ofConsumers = consumerResources(registry, warm(shape));
  return {
    Resources: {
      TasksApi: fn(
        'tasks-api',
        shape.tasksApiReserved === undefined ? {} : { ReservedConcurrentExecutions: shape.tasksApiReserved },
      ),
      TasksApiPolicy: policy('tasks-api', [
        [dataApi, 'Cluster'],
        [['lambda:InvokeFunction'], 'Relay'],
      ]),
      Relay: fn(
        relayServiceName,
        shape.relayReserved === undefined ? {} : { ReservedConcurrentExecutions: shape.relayReserved },
      ),
      RelayPolicy: policy(relayServiceName, [
        [dataApi, 'Cluster'],
        [['events:PutEvents'], 'Bus'],
        ...(shape.relayMayToggleRules ? [[['events:EnableRule', 'events:DisableRule']] as [string[]]] : []),
      ]),
      Gauges: fn(inboxGaugesServiceName),
      ...ofConsumers.resources,
      Approved: {
        Type: 'AWS::Events::Rule',
        Properties: {
          EventPattern: { source: [topology.source], 'detail-type': [topology.eventTypes.approved] },
          Targets: approved.map((c) => ({ Arn: { 'Fn::GetAtt': [`Consumer${c.name}`, 'Arn'] } })),
        },
      },
      Stage: { Type: 'AWS::ApiGateway::Stage', Properties: { StageName: 'v1', MethodSettings: settings } },
      Inbox: {
        Type: 'AWS::DynamoDB::Table',
        Properties: {
          KeySchema: keySchema(shape.inboxKey ?? ['consumer', 'eventId']),
          GlobalSecondaryIndexes: indexKey
            ? [{ IndexName: 'open-records', KeySchema: keySchema(indexKey), ...warm(shape) }]
            : [],
          ...warm(shape),
        },
      },
      Cluster: {
        Type: 'AWS::RDS::DBCluster',
        Properties: {
          ServerlessV2ScalingConfiguration: {
            MinCapacity: shape.minCapacity ?? 0.5,
            MaxCapacity: shape.maxCapacity ?? 256,
          },
        },
      },
      Writer: {
        Type: 'AWS::RDS::DBInstance',
        Properties: { DBClusterIdentifier: { Ref: 'Cluster' }, DBInstanceClass: 'db.serverless' },
      },
    },
    Outputs: {
      InboxTableName: { Value: { Ref: 'Inbox' } },
      ...ofConsumers.outputs,
    },
  } as CfnTemplate;
}

/** Nothing of ours in the way: a generous route throttle, a key per event, a sharded index, warm tables. */
const spread: Shape = {
  routeThrottle: 20_000,
  inboxKey: ['pk'],
  maxCapacity: 256,
  warmWrites: 1_000_000,
};
const spreadTopology: CapacityTopology = { ...topology, inbox: { ...topology.inbox, openIndexShards: 64 } };

const model = (
  shape: Shape,
  options: { topology?: CapacityTopology; measured?: MeasuredCosts } = {},
): CapacityReport =>
  capacityModel(
    {
      template: template(shape),
      topology: options.topology ?? topology,
      quotas,
      prices: priceBook,
      measured: options.measured ?? measured,
    },
    rates,
  );

function component(report: CapacityReport, name: string) {
  const found = report.components.find((c) => c.name === name);
  if (!found) throw new Error(`no component "${name}" in ${report.components.map((c) => c.name).join(', ')}`);
  return found;
}

/** Data API calls per approval the consumers declare (their database resources), over the approved ones. */
const declaredDatabaseCalls = (registry: readonly ConsumerDefinition[]) =>
  registry
    .filter((c) => c.subscribes.includes(topology.eventTypes.approved))
    .flatMap((c) => Object.values(c.resources))
    .reduce((calls, r) => calls + (r.kind === 'database' ? r.perEvent.calls : 0), 0);

/** WCU of one inbox write: the price book's item size, rounded up to whole KB. */
const inboxWcu = Math.ceil(priceBook.assumptions.inboxItemKb.value);

describe('capacity model: API Gateway throttles', () => {
  it('a stage throttle of 20/s is the first limit of ours at 20/s, named', () => {
    const report = model(
      { ...spread, routeThrottle: undefined, stageThrottle: 20 },
      { topology: spreadTopology },
    );

    expect(report.firstOwnLimit).toEqual({
      component: 'API Gateway throttle, POST /tasks/{taskId}/approve',
      kind: 'own',
      approvalsPerSec: 20,
    });
    expect(report.firstLimit?.approvalsPerSec).toBe(20);
    expect(component(report, 'API Gateway throttle, POST /tasks/{taskId}/approve').limitFrom).toMatch(
      /MethodSettings \/\*\/\*.*rate 20\/s/,
    );
    expect(report.byRate[1]?.ownReached).toContain('API Gateway throttle, POST /tasks/{taskId}/approve');
  });

  it("the approve route's own throttle applies instead of the stage-wide one", () => {
    const report = model(
      { ...spread, stageThrottle: 20, routeThrottle: 1_500 },
      { topology: spreadTopology },
    );

    const throttle = component(report, 'API Gateway throttle, POST /tasks/{taskId}/approve');
    expect(throttle.limit).toBe(1_500);
    expect(throttle.limitApprovalsPerSec).toBe(1_500);
  });

  it('without a throttle of ours only the account quota limits the requests', () => {
    const report = model({ ...spread, routeThrottle: undefined }, { topology: spreadTopology });

    expect(report.components.some((c) => c.name.startsWith('API Gateway throttle'))).toBe(false);
    expect(component(report, 'API Gateway account throttle')).toMatchObject({
      kind: 'quota',
      limitApprovalsPerSec: quotas.apiGatewayAccountRps.value,
    });
  });
});

describe('capacity model: DynamoDB keys', () => {
  it('an inbox partitioned by consumer alone is one hot key: 1,000 WCU over the WCU one event writes to it', () => {
    const report = model({ ...spread, inboxKey: ['consumer', 'eventId'] }, { topology: spreadTopology });

    const hot = component(report, 'DynamoDB partition, inbox table (key consumer)');
    const expected = quotas.dynamoPartitionWcu.value / (a.inboxWritesPerEvent.table * inboxWcu);
    expect(hot.kind).toBe('design');
    expect(hot.limitApprovalsPerSec).toBeCloseTo(expected, 6);
    expect(expected).toBe(250);
    expect(report.firstOwnLimit).toMatchObject({ component: hot.name, approvalsPerSec: expected });
  });

  it('a partition key per event lifts the limit: its writes never add up', () => {
    const report = model(spread, { topology: spreadTopology });

    const key = component(report, 'DynamoDB partition, inbox table (key pk)');
    expect(key.limitApprovalsPerSec).toBe(Number.POSITIVE_INFINITY);
    expect(key.shares.every((s) => s === 0)).toBe(true);
  });

  it('the open-records index is one hot key per consumer and status unless sharded; shards multiply its limit', () => {
    const unsharded = model(spread, {
      topology: { ...topology, inbox: { ...topology.inbox, openIndexShards: 1 } },
    });
    const sharded = model(spread, {
      topology: { ...topology, inbox: { ...topology.inbox, openIndexShards: 8 } },
    });

    const name = 'DynamoDB partition, inbox index open-records (key openKey)';
    const one = quotas.dynamoPartitionWcu.value / (a.inboxWritesPerEvent.index * inboxWcu);
    expect(component(unsharded, name).limitApprovalsPerSec).toBeCloseTo(one, 6);
    expect(component(sharded, name).limitApprovalsPerSec).toBeCloseTo(8 * one, 6);
    expect(unsharded.firstOwnLimit?.component).toBe(name);
  });

  it('refuses a key attribute it cannot read rather than guess whether a stream shares it', () => {
    expect(() => model({ ...spread, inboxKey: ['pk', 'sk'] })).toThrow(/"pk".*keyValueParts/);
  });

  it('counts the write units per table against the on-demand table quota, an account quota', () => {
    const report = model(spread, { topology: spreadTopology });

    const table = component(report, 'DynamoDB on-demand table, inbox');
    expect(table.kind).toBe('quota');
    expect(table.perApproval).toBe(consumers.length * a.inboxWritesPerEvent.table * inboxWcu);
  });
});

describe('capacity model: Lambda', () => {
  /** Seconds of relay execution per approval: a nudge's Data API call, and its share of a draining run. */
  const relaySeconds =
    (a.nudgeDataApiCalls * a.dataApiCallMs + a.handlerMs) / 1000 + 1 / measured.relayEventsPerSecPerRun;

  it('a reserved concurrency limits its function at the reservation over its execution seconds per approval', () => {
    const report = model({ ...spread, tasksApiReserved: 50 }, { topology: spreadTopology });

    const reserved = component(report, 'Lambda concurrency, tasks-api (reserved)');
    const tasksApiSeconds =
      ((a.dataApiCallsPerRequest['POST /tasks/{taskId}/approve'] ?? 0) * a.dataApiCallMs +
        a.invokeCallMs +
        a.handlerMs) /
      1000;
    expect(reserved.kind).toBe('own');
    expect(reserved.limitApprovalsPerSec).toBeCloseTo(50 / tasksApiSeconds, 6);
    expect(report.firstOwnLimit).toMatchObject({ component: reserved.name });
    expect(component(report, 'Lambda concurrency, account').limit).toBe(quotas.lambdaConcurrency.value - 50);
  });

  it('the relay’s reservation holds its draining runs, not its nudges (throttled, Lambda retries them): it bounds the runs', () => {
    const report = model({ ...spread, relayReserved: 3 }, { topology: spreadTopology });

    const reserved = component(report, 'Lambda concurrency, outbox-relay (reserved)');
    expect(reserved.limitApprovalsPerSec).toBeCloseTo(3 * measured.relayEventsPerSecPerRun, 6);
    // Fewer reserved executions than the run lease has slots: the reservation bounds the drain.
    expect(component(report, 'Relay runs draining at once').limit).toBe(Math.min(3, topology.relay.maxRuns));
    expect(component(report, 'Lambda concurrency, account').limit).toBe(quotas.lambdaConcurrency.value - 3);
  });

  it('without reservations every function on the path shares the account quota: rate x execution time', () => {
    const report = model(spread, { topology: spreadTopology });

    const account = component(report, 'Lambda concurrency, account');
    const tasksApi = (a.dataApiCallsPerRequest['POST /tasks/{taskId}/approve'] ?? 0) * a.dataApiCallMs;
    const consumer = a.inboxCallsPerEvent * a.dynamoCallMs + a.effectCallMs + a.handlerMs;
    // A consumer that declares the database waits for each of its calls.
    const databaseCalls = declaredDatabaseCalls(topology.registry);
    expect(databaseCalls).toBeGreaterThan(0);
    const expectedSeconds =
      (tasksApi + a.invokeCallMs + a.handlerMs) / 1000 +
      relaySeconds +
      (consumers.length * consumer + databaseCalls * a.dataApiCallMs) / 1000;
    expect(account.kind).toBe('quota');
    expect(account.perApproval).toBeCloseTo(expectedSeconds, 9);
    expect(account.limit).toBe(quotas.lambdaConcurrency.value);
  });

  it('a bound on relay runs limits the drain at runs x the measured events per run', () => {
    const report = model(spread, {
      topology: { ...spreadTopology, relay: { ...topology.relay, maxRuns: 2 } },
    });

    expect(component(report, 'Relay runs draining at once').limitApprovalsPerSec).toBeCloseTo(
      2 * measured.relayEventsPerSecPerRun,
      6,
    );
  });
});

describe('capacity model: the database', () => {
  it("Aurora's MaxCapacity limits at MaxCapacity over the ACU one approval needs, from the measured statement costs", () => {
    const base = model({ ...spread, maxCapacity: 8 }, { topology: spreadTopology });
    const dearer = model(
      { ...spread, maxCapacity: 8 },
      { topology: spreadTopology, measured: { ...measured, dbCpuMs: { ...measured.dbCpuMs, approve: 2 } } },
    );

    // 1 ms of database CPU per approval at a quarter vCPU per ACU: 0.004 ACU per approval/s.
    expect(component(base, 'Aurora capacity').limitApprovalsPerSec).toBeCloseTo(8 / 0.004, 6);
    expect(component(dearer, 'Aurora capacity').limitApprovalsPerSec).toBeCloseTo(8 / 0.008, 6);
    expect(base.byRate[2]?.auroraAcu).toBeCloseTo(4, 9);
  });

  it('counts the Data API calls of the approve route, the nudge, the consumers that read and the drain', () => {
    const report = model(spread, { topology: spreadTopology });

    expect(component(report, 'RDS Data API requests').perApproval).toBeCloseTo(
      (a.dataApiCallsPerRequest['POST /tasks/{taskId}/approve'] ?? 0) +
        a.nudgeDataApiCalls +
        declaredDatabaseCalls(topology.registry) +
        measured.relayDataApiCallsPer1000 / 1000 +
        1 / topology.relay.purge.batchSize,
      9,
    );
  });
});

describe('capacity model: EventBridge', () => {
  it('a relay that may toggle its busy sweep spends the fixed control-plane rate, one call a nudge', () => {
    const toggling = model({ ...spread, relayMayToggleRules: true }, { topology: spreadTopology });
    const not = model(spread, { topology: spreadTopology });

    expect(component(toggling, 'EventBridge control plane (EnableRule/DisableRule)')).toMatchObject({
      kind: 'design',
      limitApprovalsPerSec: quotas.eventBridgeControlPlaneTps.value,
    });
    expect(not.components.some((c) => c.name.startsWith('EventBridge control plane'))).toBe(false);
  });

  it('PutEvents counts requests of up to ten entries; invocations one per target of the approved rule', () => {
    const report = model(spread, { topology: spreadTopology });

    expect(component(report, 'EventBridge PutEvents').perApproval).toBe(
      1 / topology.relay.putEventsMaxEntries,
    );
    expect(component(report, 'EventBridge target invocations').perApproval).toBe(consumers.length);
  });
});

describe('capacity model: the goals', () => {
  it('with nothing of ours in the way, 10,000/s names the quota increases and no limit of ours', () => {
    const report = model(spread, { topology: spreadTopology });
    const top = report.byRate[3];

    expect(report.firstOwnLimit?.approvalsPerSec ?? Number.POSITIVE_INFINITY).toBeGreaterThan(10_000);
    expect(top?.ownReached).toEqual([]);
    expect(top?.quotaIncreases).toEqual(
      expect.arrayContaining([
        'Lambda concurrency, account',
        'EventBridge target invocations',
        'DynamoDB on-demand table, inbox',
      ]),
    );
  });

  it("spreads the month's fixed bill over more approvals as the rate grows", () => {
    const report = model({ ...spread, minCapacity: 4 }, { topology: spreadTopology });
    const [low, , , high] = report.byRate;

    expect(low?.costPerMillionUsd).toBeGreaterThan(high?.costPerMillionUsd ?? Number.POSITIVE_INFINITY);
    expect(high?.costPerMillionUsd).toBeGreaterThan(0);
  });
});

describe('capacity model: a new stack’s tables (warm throughput)', () => {
  it('a table without WarmThroughput serves a new on-demand table’s 4,000 WRU/s at first: a limit of ours at 4,000 over its writes per approval', () => {
    const report = model({ ...spread, warmWrites: undefined }, { topology: spreadTopology });

    const inbox = component(report, 'DynamoDB new table, inbox, warm writes');
    const perApproval = writeUnitsPerApproval(topology, priceBook);
    expect(inbox.kind).toBe('launch');
    expect(inbox.limit).toBe(quotas.dynamoNewTableWarmWru.value);
    expect(inbox.perApproval).toBe(perApproval.inbox.table);
    // What the review found: about 333 approvals a second on a fresh stack.
    expect(Math.floor(inbox.limitApprovalsPerSec)).toBe(Math.floor(4_000 / perApproval.inbox.table));
    expect(report.firstOwnLimit?.component).toBe(inbox.name);
  });

  it('the template’s WarmThroughput is the limit; warmWritesFor sizes it for a rate from the same write units', () => {
    const perApproval = writeUnitsPerApproval(topology, priceBook);
    const warmFor1000 = warmWritesFor(1_000, perApproval, quotas);
    const report = model({ ...spread, warmWrites: warmFor1000.inbox.table }, { topology: spreadTopology });

    const inbox = component(report, 'DynamoDB new table, inbox, warm writes');
    expect(inbox.limit).toBe(warmFor1000.inbox.table);
    expect(inbox.limitApprovalsPerSec).toBeGreaterThanOrEqual(1_000);
    // What a new table serves anyway gets no warm throughput of its own.
    expect(warmWritesFor(10, perApproval, quotas).inbox.table).toBeUndefined();
  });
});

describe('capacity model: by Region', () => {
  it('holds the same template against each Region’s defaults: EventBridge’s target invocations limit sa-east-1 at 1,100 over the targets', () => {
    const inRegion = (region: Region) =>
      capacityModel(
        {
          template: template(spread),
          topology: spreadTopology,
          quotas: quotasIn(region),
          prices: priceBook,
          measured,
        },
        rates,
      );
    const targets = topology.registry.filter((c) =>
      c.subscribes.includes(topology.eventTypes.approved),
    ).length;

    const invocations = (region: Region) => component(inRegion(region), 'EventBridge target invocations');
    expect(invocations('us-east-1').limit).toBe(18_750);
    expect(invocations('eu-west-1').limit).toBe(18_750);
    expect(invocations('sa-east-1').limit).toBe(1_100);
    expect(invocations('sa-east-1').limitApprovalsPerSec).toBeCloseTo(1_100 / targets, 6);
    expect(invocations('sa-east-1').limitFrom).toMatch(/eb-quota\.html \(read \d{4}-\d{2}-\d{2}\)/);
    expect(component(inRegion('eu-south-1'), 'API Gateway account throttle').limit).toBe(2_500);
    expect(inRegion('sa-east-1').firstLimit).toMatchObject({
      component: 'EventBridge target invocations',
      kind: 'quota',
    });
    // The Regions the report covers: the two largest and smaller ones.
    expect(regions).toEqual(expect.arrayContaining(['us-east-1', 'eu-west-1', 'sa-east-1']));
  });
});

describe('capacity model: the consumers as the registry declares them', () => {
  const fixture = defineConsumer({
    name: 'fixture',
    description: 'A consumer only this test declares',
    subscribes: [topology.eventTypes.approved],
    folder: new URL('.', import.meta.url),
    resources: {
      fixtureItems: table({
        description: 'Items of 1.5 KB, put twice an event',
        partitionKey: 'id',
        perEvent: { reads: 1, writes: 2, itemKb: 1.5 },
      }),
      tasks: database({ description: 'Reads twice an event', role: 'taskReader', perEvent: { calls: 2 } }),
    },
  });
  const registry = [...topology.registry, fixture];
  const variant: CapacityTopology = { ...topologyWith(registry), inbox: spreadTopology.inbox };
  const base = model(spread, { topology: spreadTopology });
  const withFixture = capacityModel(
    { template: template({ ...spread, registry }), topology: variant, quotas, prices: priceBook, measured },
    rates,
  );

  it("a consumer's declared table is a component of its own: its writes x the WCU of its items", () => {
    expect(component(withFixture, 'DynamoDB on-demand table, fixture items')).toMatchObject({
      perApproval: 2 * 2,
      detail: '1 consumer(s) x 2 writes x 2 WCU',
    });
    expect(
      component(withFixture, 'DynamoDB partition, fixture items table (key id)').limitApprovalsPerSec,
    ).toBe(Number.POSITIVE_INFINITY);
    expect(base.components.some((c) => c.name.includes('fixture'))).toBe(false);
  });

  it('its declared database calls add to the Data API requests, and its function to the targets', () => {
    const calls = (r: CapacityReport) => component(r, 'RDS Data API requests').perApproval;
    expect(calls(withFixture) - calls(base)).toBeCloseTo(2, 9);
    expect(component(withFixture, 'EventBridge target invocations').perApproval).toBe(consumers.length + 1);
  });

  it('refuses a table the consumers write that is neither the inbox nor declared, rather than guess its items', () => {
    const stray = template({ ...spread, registry }) as CfnTemplate & { Outputs: Record<string, unknown> };
    const { FixtureItemsTableName: _, ...outputs } = stray.Outputs;

    expect(() =>
      capacityModel(
        {
          template: { ...stray, Outputs: outputs } as CfnTemplate,
          topology: variant,
          quotas,
          prices: priceBook,
          measured,
        },
        rates,
      ),
    ).toThrow(/FixtureItems, which is neither the inbox nor a table a consumer declares/);
  });
});
