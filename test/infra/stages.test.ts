import { beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { prodGoalApprovalsPerSec } from '../../infra/aws/capacity/goal';
import { quotas } from '../../infra/aws/capacity/quotas';
import { writeUnitsPerApproval } from '../../infra/aws/capacity/warm-throughput';
import { priceBook } from '../../infra/aws/cost/prices';
import { parseSettings } from '../../infra/aws/settings';
import { tasksApiRoutes } from '../../shared/tasks/tasks-api';
import { resourcesOfType, type Synthesized, synthPipeline } from './support/synth';

describe('the prod stage (-c stage=prod)', () => {
  let s: Synthesized;
  beforeAll(() => {
    s = synthPipeline({ stage: 'prod', dbMinCapacity: '0.5', relayReservedConcurrency: 'none' });
  });

  it('keeps the data stores (the database as a final snapshot) and turns deletion protection on', () => {
    s.template.hasResource('AWS::RDS::DBCluster', {
      DeletionPolicy: 'Snapshot',
      Properties: { DeletionProtection: true },
    });
    for (const [id, table] of resourcesOfType(s, 'AWS::DynamoDB::Table')) {
      expect(table.DeletionPolicy, id).toBe('Retain');
      expect(table.Properties?.DeletionProtectionEnabled, id).toBe(true);
    }
    s.template.hasResource('AWS::S3::Bucket', { DeletionPolicy: 'Retain' });
    expect(resourcesOfType(s, 'Custom::S3AutoDeleteObjects')).toHaveLength(0);
  });

  it('keeps capacity warm and backups longer, sweeps every minute, has a dashboard, and reserves no relay concurrency when told', () => {
    s.template.hasResourceProperties('AWS::RDS::DBCluster', {
      ServerlessV2ScalingConfiguration: { MinCapacity: 0.5, MaxCapacity: 128 },
      BackupRetentionPeriod: 14,
    });
    const relay = s.stack.getLogicalId(s.stack.pipeline.relay.function.node.defaultChild as never);
    expect(s.json.Resources[relay]?.Properties?.ReservedConcurrentExecutions).toBeUndefined();
    s.template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 minute)',
      State: 'ENABLED',
    });
    s.template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
  });

  it('has an Aurora Serverless v2 reader in the second AZ, in promotion tier 1, and the writer in the first', () => {
    const instances = resourcesOfType(s, 'AWS::RDS::DBInstance').map(([, i]) => i.Properties ?? {});
    const az = (i: number) => ({ 'Fn::Select': [i, { 'Fn::GetAZs': '' }] });
    expect(instances).toHaveLength(2);
    expect(instances).toContainEqual(
      expect.objectContaining({
        DBInstanceClass: 'db.serverless',
        PromotionTier: 0,
        AvailabilityZone: az(0),
      }),
    );
    expect(instances).toContainEqual(
      expect.objectContaining({
        DBInstanceClass: 'db.serverless',
        PromotionTier: 1,
        AvailabilityZone: az(1),
      }),
    );
    // Both in the cluster whose isolated subnets span those two AZs.
    const subnets = resourcesOfType(s, 'AWS::EC2::Subnet').map(([, n]) => n.Properties?.AvailabilityZone);
    expect(subnets).toEqual(expect.arrayContaining([az(0), az(1)]));
  });

  it('pre-warms the inbox table and its index for the goal rate, with the write units the capacity model computes', () => {
    const perApproval = writeUnitsPerApproval(topology, priceBook);
    const [, inbox] =
      resourcesOfType(s, 'AWS::DynamoDB::Table').find(([id]) => id.startsWith('InboxEventKeyedTable')) ?? [];
    const table = inbox?.Properties?.WarmThroughput as { WriteUnitsPerSecond: number } | undefined;
    const indexes = (inbox?.Properties?.GlobalSecondaryIndexes ?? []) as {
      WarmThroughput?: { WriteUnitsPerSecond: number };
    }[];
    const index = indexes[0]?.WarmThroughput;
    expect(table?.WriteUnitsPerSecond).toBeGreaterThanOrEqual(
      prodGoalApprovalsPerSec * perApproval.inbox.table,
    );
    expect(index?.WriteUnitsPerSecond).toBeGreaterThanOrEqual(
      prodGoalApprovalsPerSec * perApproval.inbox.index,
    );
    // More than a new on-demand table serves at once, or there would be nothing to pre-warm.
    expect(table?.WriteUnitsPerSecond).toBeGreaterThan(quotas.dynamoNewTableWarmWru.value);
    // The content index takes what a new table serves at the goal rate: nothing to pre-warm there.
    const [, contentIndex] =
      resourcesOfType(s, 'AWS::DynamoDB::Table').find(([id]) => id.startsWith('ContentIndex')) ?? [];
    expect(prodGoalApprovalsPerSec * (perApproval.declared.contentIndex ?? 0)).toBeLessThanOrEqual(
      quotas.dynamoNewTableWarmWru.value,
    );
    expect(contentIndex?.Properties).not.toHaveProperty('WarmThroughput');
  });

  it('draws PendingEvents with its gaps as 0 and each rule’s failed invocations as graphs (no alarm watches them)', () => {
    const [, dashboard] = resourcesOfType(s, 'AWS::CloudWatch::Dashboard')[0] ?? [];
    const body = JSON.stringify(dashboard?.Properties?.DashboardBody);
    // The relay sends PendingEvents only while above zero: FILL draws an hour without a point as 0.
    expect(body).toMatch(/\\"expression\\":\\"FILL\(pending, 0\)\\"/);
    expect(body).toContain('PendingEvents');
    for (const metric of ['FailedInvocations', 'InvocationsFailedToBeSentToDlq']) {
      expect(body, metric).toContain(`\\"AWS/Events\\",\\"${metric}\\"`);
    }
  });

  it('takes at least 1,000 approvals a second before its own throttle answers 429', () => {
    const stage = Object.values(s.json.Resources).find((r) => r.Type === 'AWS::ApiGateway::Stage');
    const approve = ((stage?.Properties?.MethodSettings ?? []) as Record<string, unknown>[]).find(
      (m) => m.ResourcePath === '/~1tasks~1{taskId}~1approve' && m.HttpMethod === 'POST',
    );
    expect(approve?.ThrottlingRateLimit).toBeGreaterThanOrEqual(1_000);
    expect(approve?.ThrottlingBurstLimit).toBeGreaterThanOrEqual(1_000);
  });

  it("raises the tasks routes' throttle with -c apiRatePerSecond", () => {
    const raised = synthPipeline({ stage: 'prod', apiRatePerSecond: '2500' });
    const stage = Object.values(raised.json.Resources).find((r) => r.Type === 'AWS::ApiGateway::Stage');
    const limits = ((stage?.Properties?.MethodSettings ?? []) as Record<string, unknown>[])
      .filter((m) => String(m.ResourcePath).startsWith('/~1tasks'))
      .map((m) => [m.ThrottlingRateLimit, m.ThrottlingBurstLimit]);
    // Every tasks route (create, list, read, approve, reject, withdraw), each its own limit.
    expect(limits).toHaveLength(tasksApiRoutes.length);
    expect(new Set(limits.map((l) => l.join('/')))).toEqual(new Set(['2500/5000']));
  });
});

describe('context settings', () => {
  const parse = (ctx: Record<string, unknown>) => parseSettings((k) => ctx[k]);

  it('rejects a misspelt stage and a bad email in one error, and min capacity above max', () => {
    expect(() => parse({ stage: 'staging', alarmEmail: 'nope' })).toThrow(/stage:.*alarmEmail:/s);
    expect(() => parse({ dbMinCapacity: 9, dbMaxCapacity: 4 })).toThrow(/dbMinCapacity: .*must not exceed/);
  });

  it('accepts capacity 0 (auto-pause) and numbers given as -c strings', () => {
    expect(parse({ dbMinCapacity: '0', dbMaxCapacity: '4' })).toMatchObject({
      dbMinCapacity: 0,
      dbMaxCapacity: 4,
    });
  });
});

// Properties that set a name CloudFormation does not scope to the stack: two stacks setting
// the same value collide (a bus, a rule, an alarm, a function...).
const nameKeys = new Set([
  'Name',
  'AlarmName',
  'DashboardName',
  'FunctionName',
  'LogGroupName',
  'TableName',
  'BucketName',
  'QueueName',
  'TopicName',
  'RoleName',
  'ArchiveName',
  'DBClusterIdentifier',
  'DBInstanceIdentifier',
  'DBSubnetGroupName',
  'AliasName',
  'SecretName',
  'ManagedPolicyName',
  'GroupName',
]);
// Scoped to a parent, not to the account: an API's stage, a role's inline policy.
const scopedTypes = new Set(['AWS::ApiGateway::Stage', 'AWS::IAM::Policy', 'AWS::ApiGateway::Model']);

/** Every literal physical name a stage's template sets, with where it sets it. */
function physicalNames(s: Synthesized): Map<string, string> {
  const names = new Map<string, string>();
  const stackName = s.stack.stackName;
  for (const [id, resource] of Object.entries(s.json.Resources)) {
    if (scopedTypes.has(resource.Type)) continue;
    for (const [key, value] of Object.entries(resource.Properties ?? {})) {
      if (!nameKeys.has(key)) continue;
      // The stack's own name makes a name unique; a reference to a resource does too.
      const text = JSON.stringify(value).replaceAll('{"Ref":"AWS::StackName"}', JSON.stringify(stackName));
      if (/"Ref":"(?!AWS::)|"Fn::GetAtt"/.test(text)) continue;
      names.set(text, `${resource.Type} ${id}.${key}`);
    }
  }
  return names;
}

describe('sandbox and prod in one account and region', () => {
  let sandbox: Synthesized;
  let prod: Synthesized;
  beforeAll(() => {
    sandbox = synthPipeline({ stage: 'sandbox' });
    prod = synthPipeline({ stage: 'prod' });
  });

  it('share no physical name', () => {
    const ours = physicalNames(sandbox);
    const theirs = physicalNames(prod);
    expect(ours.size).toBeGreaterThan(10);
    const shared = [...ours.keys()].filter((name) => theirs.has(name)).map((n) => `${n} (${ours.get(n)})`);
    expect(shared).toEqual([]);
  });

  it('each set the account-level API Gateway logging role to a role of their own, both kept on destroy', () => {
    for (const s of [sandbox, prod]) {
      const accounts = resourcesOfType(s, 'AWS::ApiGateway::Account');
      expect(accounts).toHaveLength(1);
      const account = accounts[0]?.[1];
      expect(account?.DeletionPolicy).toBe('Retain');
      const roleArn = account?.Properties?.CloudWatchRoleArn as
        | { 'Fn::GetAtt': [string, string] }
        | undefined;
      const roleId = roleArn?.['Fn::GetAtt'][0] ?? '';
      expect(s.json.Resources[roleId]?.DeletionPolicy).toBe('Retain');
    }
  });

  it('a sandbox has one Aurora instance and pre-warms no table: it costs what a new account’s sandbox should', () => {
    expect(resourcesOfType(sandbox, 'AWS::RDS::DBInstance')).toHaveLength(1);
    const [, writer] = resourcesOfType(sandbox, 'AWS::RDS::DBInstance')[0] ?? [];
    // Its writer keeps the AZ RDS chose: pinning it would replace a deployed sandbox's writer.
    expect(writer?.Properties).not.toHaveProperty('AvailabilityZone');
    for (const [id, table] of resourcesOfType(sandbox, 'AWS::DynamoDB::Table'))
      expect(table.Properties, id).not.toHaveProperty('WarmThroughput');
  });

  it('a sandbox reserves no concurrency unless asked, so a first deploy fits a new account’s quota', () => {
    for (const [id, fn] of resourcesOfType(sandbox, 'AWS::Lambda::Function'))
      expect(fn.Properties, id).not.toHaveProperty('ReservedConcurrentExecutions');
    const reserved = synthPipeline({ stage: 'sandbox', relayReservedConcurrency: '3' });
    const relay = reserved.stack.getLogicalId(
      reserved.stack.pipeline.relay.function.node.defaultChild as never,
    );
    expect(reserved.json.Resources[relay]?.Properties?.ReservedConcurrentExecutions).toBe(3);
  });

  it('prod reserves concurrency for the tasks API and the relay, within what a default account can reserve', () => {
    const reservedOf = (fn: { node: { defaultChild: unknown } }) =>
      prod.json.Resources[prod.stack.getLogicalId(fn.node.defaultChild as never)]?.Properties
        ?.ReservedConcurrentExecutions;
    const tasksApi = reservedOf(prod.stack.pipeline.tasksApi.function);
    const relay = reservedOf(prod.stack.pipeline.relay.function);
    expect(tasksApi).toBeGreaterThan(0);
    expect(relay).toBeGreaterThanOrEqual(topology.relay.maxRuns);
    const all = resourcesOfType(prod, 'AWS::Lambda::Function').reduce(
      (n, [, fn]) => n + Number(fn.Properties?.ReservedConcurrentExecutions ?? 0),
      0,
    );
    // Lambda keeps 100 of an account's 1,000 (its default quota) unreserved:
    // https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html
    expect(all).toBeLessThanOrEqual(1_000 - 100);
  });
});

describe('rotating the role passwords', () => {
  it('a new roleCredentialsVersion changes the schema resource, so the deploy runs migrate and resets them', () => {
    const props = (version?: string) => {
      const s = synthPipeline(version ? { roleCredentialsVersion: version } : {});
      return resourcesOfType(s, 'Custom::PipelineSchema')[0]?.[1].Properties;
    };
    const before = props();
    const after = props('2');
    expect(before?.CredentialsVersion).toBe('1');
    expect(after?.CredentialsVersion).toBe('2');
    expect(after?.Fingerprint).toEqual(before?.Fingerprint);
  });
});
