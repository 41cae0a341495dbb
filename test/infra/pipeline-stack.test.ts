import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { Match } from 'aws-cdk-lib/assertions';
import type { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { topology } from '../../functions/topology';
import {
  ConsumerBucket,
  type ConsumerResource,
  ConsumerTable,
  ConsumerTopic,
} from '../../infra/aws/constructs/consumer-resources';
import type { AuroraDatabase } from '../../infra/aws/constructs/database';
import { inboxActions } from '../../infra/aws/constructs/inbox-table';
import { esmRequireBanner, projectRoot } from '../../infra/aws/constructs/pipeline-function';
import { emitAuditGauges } from '../../shared/audit/audit-gauges';
import {
  auditMetricNames,
  consumerEnv,
  consumerQueueEnv,
  deliveryAuditServiceName,
  inboxGaugeMetricNames,
  inboxGaugesServiceName,
} from '../../shared/consumers/contract';
import { queueMaxReceiveCount } from '../../shared/consumers/queue-delivery';
import {
  type DatabaseResource,
  resourceConstructId,
  resourceEnvName,
} from '../../shared/consumers/resources';
import { allFunctionRoles, type FunctionRole } from '../../shared/db/roles';
import { inboxTableSchema, openKeys, recordKey } from '../../shared/inbox/dynamo-inbox-table';
import { emitInboxGauges } from '../../shared/inbox/inbox-gauges';
import { inboxHealthThresholds } from '../../shared/inbox/settings';
import { opsApiRoutes } from '../../shared/ops/ops-api';
import { metricsNamespace, relayMetricNames, relayServiceName } from '../../shared/outbox/relay-metrics';
import { tasksApiRoutes } from '../../shared/tasks/tasks-api';
import { type ConsumerName, consumerPolicyOf } from '../../shared/topology';
import { propertiesOf, resourcesOfType, type Synthesized, synthPipeline } from './support/synth';

// One real synthesis for the whole file, as `cdk synth` does it (esbuild bundles, CloudFormation
// template validation, cdk-nag): the sandbox stage on AWS.
let s: Synthesized;
beforeAll(() => {
  s = synthPipeline(
    { stage: 'sandbox', alarmEmail: 'ops@example.com' },
    { bundle: true, cfnValidation: true },
  );
});

interface EmfDocument {
  readonly _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][] }[] };
  readonly [key: string]: unknown;
}

const consumerNames = Object.keys(topology.consumers) as ConsumerName[];
const logicalId = (c: IConstruct) => s.stack.getLogicalId(c.node.defaultChild as CfnFunction);
const ref = (c: IConstruct) => ({ Ref: logicalId(c) });
const arnOf = (c: IConstruct) => ({ 'Fn::GetAtt': [logicalId(c), 'Arn'] });
const envOf = (c: IConstruct) =>
  (propertiesOf(s, logicalId(c)).Environment as { Variables: Record<string, unknown> }).Variables;
const pipelineFunctions = () => [
  s.stack.pipeline.tasksApi.function,
  s.stack.pipeline.opsApi.function,
  s.stack.pipeline.relay.function,
  s.stack.pipeline.migration.function,
  s.stack.pipeline.inboxGauges.function,
  s.stack.pipeline.audit.function,
  ...[...s.stack.pipeline.consumers.values()].map((c) => c.function),
];
const aurora = () => s.stack.pipeline.database as AuroraDatabase;
const consumerFunction = (name: string) =>
  s.stack.pipeline.consumers.get(name as ConsumerName)?.function as IConstruct;
const consumerOf = (name: string) => {
  const c = s.stack.pipeline.consumers.get(name as ConsumerName);
  if (!c) throw new Error(`no ${name} consumer`);
  return c;
};
const consumerQueue = (name: string): IConstruct => consumerOf(name).queue;
const byJson = (a: unknown, b: unknown) => JSON.stringify(a).localeCompare(JSON.stringify(b));
/** The database resource `name` declares, if any: the role its function logs in as. */
const databaseOf = (name: string) =>
  Object.values(topology.registry.find((c) => c.name === name)?.resources ?? {}).find(
    (r): r is DatabaseResource => r.kind === 'database',
  );
/** The table, topic or bucket a consumer resource made. */
const madeOf = (resource: ConsumerResource): IConstruct => {
  if (resource instanceof ConsumerTable) return resource.table;
  if (resource instanceof ConsumerTopic) return resource.topic;
  if (resource instanceof ConsumerBucket) return resource.bucket;
  throw new Error(`unknown resource ${resource.spec.kind}`);
};
/** Every table, topic and bucket the consumers declare, as the stack made it, with its consumer and key. */
const declared = () =>
  [...s.stack.pipeline.consumerResources].flatMap(([consumer, resources]) =>
    [...resources].map(([key, resource]) => ({ consumer, key, resource })),
  );
/** The statements of every policy attached to `fn`'s role. */
/** The API stage's method settings (throttles, logging), as the template has them. */
const methodSettingsOf = (synth: typeof s) => {
  const stage = Object.values(synth.json.Resources).find((r) => r.Type === 'AWS::ApiGateway::Stage');
  return (stage?.Properties?.MethodSettings ?? []) as Record<string, unknown>[];
};

const statementsOf = (fn: IConstruct) => {
  const role = logicalId((fn as unknown as { role: IConstruct }).role);
  return resourcesOfType(s, 'AWS::IAM::Policy')
    .filter(([, p]) => ((p.Properties?.Roles ?? []) as { Ref: string }[]).some((r) => r.Ref === role))
    .flatMap(
      ([, p]) =>
        (p.Properties?.PolicyDocument as { Statement: Record<string, unknown>[] } | undefined)?.Statement ??
        [],
    );
};

/** The dimensions of every alarm of ours on `metricName`. */
const alarmsOn = (metricName: string) =>
  resourcesOfType(s, 'AWS::CloudWatch::Alarm')
    .map(([, a]) => a.Properties ?? {})
    .filter((p) => p.Namespace === metricsNamespace && p.MetricName === metricName)
    .map((p) =>
      Object.fromEntries((p.Dimensions as { Name: string; Value: string }[]).map((d) => [d.Name, d.Value])),
    );

describe('database', () => {
  it('is Aurora PostgreSQL 17 Serverless v2 with the Data API, IAM auth, encryption and backups', () => {
    s.template.hasResourceProperties('AWS::RDS::DBCluster', {
      Engine: 'aurora-postgresql',
      EngineVersion: Match.stringLikeRegexp('^17\\.'),
      EnableHttpEndpoint: true,
      EnableIAMDatabaseAuthentication: true,
      StorageEncrypted: true,
      BackupRetentionPeriod: Match.anyValue(),
      DeletionProtection: false,
      ServerlessV2ScalingConfiguration: { MinCapacity: 0, MaxCapacity: 2, SecondsUntilAutoPause: 300 },
      MasterUserPassword: Match.objectLike({ 'Fn::Join': Match.anyValue() }),
    });
    s.template.hasResource('AWS::RDS::DBCluster', { DeletionPolicy: 'Delete' });
    s.template.hasResourceProperties('AWS::RDS::DBInstance', {
      DBInstanceClass: 'db.serverless',
      PubliclyAccessible: false,
    });
    // The master login and one per function role.
    s.template.resourceCountIs('AWS::SecretsManager::Secret', 1 + allFunctionRoles.length);
  });

  it('gives each function its own database role: its own secret, and a grant on that secret only', () => {
    const owned: [IConstruct, FunctionRole][] = [
      [s.stack.pipeline.tasksApi.function, 'tasksApi'],
      [s.stack.pipeline.opsApi.function, 'ops'],
      [s.stack.pipeline.relay.function, 'relay'],
      [s.stack.pipeline.audit.function, 'audit'],
      // Each consumer that declares the database, as the role it declares.
      ...consumerNames.flatMap((name): [IConstruct, FunctionRole][] => {
        const db = databaseOf(name);
        return db ? [[consumerFunction(name), db.role]] : [];
      }),
    ];
    expect(owned.length).toBeGreaterThan(4);
    for (const [fn, role] of owned) {
      const secret = ref(aurora().roleSecrets.get(role) as unknown as IConstruct);
      expect(envOf(fn).DB_SECRET_ARN, role).toEqual(secret);
      const secretGrants = statementsOf(fn).filter((st) =>
        JSON.stringify(st.Action).includes('secretsmanager:GetSecretValue'),
      );
      expect(
        secretGrants.map((st) => st.Resource),
        role,
      ).toEqual([secret]);
      const sqlGrants = statementsOf(fn).filter((st) => JSON.stringify(st.Action).includes('rds-data:'));
      expect(
        sqlGrants.map((st) => st.Resource),
        role,
      ).toEqual([s.stack.resolve(aurora().cluster.clusterArn)]);
    }
    const withoutDatabase = consumerNames.filter((name) => !databaseOf(name));
    expect(withoutDatabase).not.toEqual([]);
    for (const name of withoutDatabase) {
      expect(JSON.stringify(statementsOf(consumerFunction(name))), name).not.toMatch(
        /secretsmanager|rds-data/,
      );
    }
  });

  it('lets the migrate function log in as the owner and read every role secret, whose passwords it sets', () => {
    const migrate = s.stack.pipeline.migration.function;
    expect(envOf(migrate).DB_SECRET_ARN).toEqual(ref(aurora().secret as unknown as IConstruct));
    const roleSecrets = JSON.stringify(envOf(migrate).DB_ROLE_SECRETS);
    for (const role of allFunctionRoles) {
      expect(roleSecrets).toContain(logicalId(aurora().roleSecrets.get(role) as unknown as IConstruct));
    }
    const read = statementsOf(migrate).find((st) => JSON.stringify(st.Action).includes('GetSecretValue'));
    expect(read?.Resource).toHaveLength(1 + allFunctionRoles.length);
  });

  it('sits in isolated subnets only: no internet or NAT gateway, no ingress', () => {
    s.template.resourceCountIs('AWS::EC2::NatGateway', 0);
    s.template.resourceCountIs('AWS::EC2::InternetGateway', 0);
    for (const [, subnet] of resourcesOfType(s, 'AWS::EC2::Subnet')) {
      expect(subnet.Properties?.MapPublicIpOnLaunch).toBe(false);
    }
    s.template.resourceCountIs('AWS::EC2::SecurityGroupIngress', 0);
    s.template.hasResourceProperties('AWS::RDS::DBSubnetGroup', { SubnetIds: Match.anyValue() });
  });

  it('is reached by every function through the Data API only (no function runs in the VPC)', () => {
    for (const fn of pipelineFunctions()) {
      expect(s.json.Resources[logicalId(fn)]?.Properties?.VpcConfig).toBeUndefined();
    }
    for (const fn of [
      s.stack.pipeline.tasksApi.function,
      s.stack.pipeline.opsApi.function,
      s.stack.pipeline.relay.function,
      s.stack.pipeline.migration.function,
    ]) {
      expect(Object.keys(envOf(fn))).toEqual(
        expect.arrayContaining(['DB_CLUSTER_ARN', 'DB_SECRET_ARN', 'DB_NAME']),
      );
      expect(envOf(fn)).not.toHaveProperty('DATABASE_URL');
    }
  });
});

describe('schema migration', () => {
  it('runs the migrate function through the Provider framework after the cluster exists', () => {
    const schema = resourcesOfType(s, 'Custom::PipelineSchema');
    expect(schema).toHaveLength(1);
    const resource = schema[0]?.[1];
    const writer = resourcesOfType(s, 'AWS::RDS::DBInstance')[0]?.[0];
    expect(resource?.DependsOn).toEqual(expect.arrayContaining([writer]));
    s.template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: { USER_ON_EVENT_FUNCTION_ARN: arnOf(s.stack.pipeline.migration.function) } },
    });
    // Enough time for an auto-paused cluster to resume inside the Data API client's retries.
    expect(s.json.Resources[logicalId(s.stack.pipeline.migration.function)]?.Properties?.Timeout).toBe(300);
  });
});

describe('tasks API', () => {
  it('routes exactly the tasks and ops route tables, every method IAM-authorized and validated', () => {
    const methods = resourcesOfType(s, 'AWS::ApiGateway::Method');
    expect(methods).toHaveLength(tasksApiRoutes.length + opsApiRoutes(topology.consumerNames).length);
    expect(methods.map(([, m]) => m.Properties?.HttpMethod).sort()).toEqual(
      [...tasksApiRoutes, ...opsApiRoutes(topology.consumerNames)].map((r) => r.method).sort(),
    );
    const validator = resourcesOfType(s, 'AWS::ApiGateway::RequestValidator')[0];
    expect(validator?.[1].Properties).toMatchObject({
      ValidateRequestBody: true,
      ValidateRequestParameters: true,
    });
    for (const [, method] of methods) {
      expect(method.Properties).toMatchObject({
        AuthorizationType: 'AWS_IAM',
        RequestValidatorId: { Ref: validator?.[0] },
        Integration: { Type: 'AWS_PROXY' },
      });
      if (method.Properties?.HttpMethod === 'POST') expect(method.Properties.RequestModels).toBeDefined();
    }
    const parts = new Set(
      [...tasksApiRoutes, ...opsApiRoutes(topology.consumerNames)].flatMap((r) =>
        r.resource.split('/').filter(Boolean),
      ),
    );
    expect(
      new Set(resourcesOfType(s, 'AWS::ApiGateway::Resource').map(([, r]) => r.Properties?.PathPart)),
    ).toEqual(parts);
  });

  it('routes GET /tasks with its optional query parameters, POST /tasks with its optional Idempotency-Key header and POST /tasks/{taskId}/reject with a reason required', () => {
    const methods = resourcesOfType(s, 'AWS::ApiGateway::Method').map(([, m]) => m.Properties ?? {});
    const resources = Object.fromEntries(resourcesOfType(s, 'AWS::ApiGateway::Resource'));
    const pathPart = (ref: unknown) =>
      resources[(ref as { Ref?: string } | undefined)?.Ref ?? '']?.Properties?.PathPart;
    const list = methods.find((m) => m.HttpMethod === 'GET' && pathPart(m.ResourceId) === 'tasks');
    expect(list?.RequestParameters).toEqual({
      'method.request.querystring.status': false,
      'method.request.querystring.limit': false,
      'method.request.querystring.cursor': false,
    });
    // The create's Idempotency-Key is declared, optional: a proxy integration passes it on.
    const create = methods.find((m) => m.HttpMethod === 'POST' && pathPart(m.ResourceId) === 'tasks');
    expect(create?.RequestParameters).toEqual({ 'method.request.header.idempotency-key': false });
    const reject = methods.find((m) => m.HttpMethod === 'POST' && pathPart(m.ResourceId) === 'reject');
    expect(reject?.RequestParameters).toEqual({ 'method.request.path.taskId': true });
    const modelRef = (reject?.RequestModels as Record<string, { Ref: string }> | undefined)?.[
      'application/json'
    ];
    const model = resourcesOfType(s, 'AWS::ApiGateway::Model').find(([id]) => id === modelRef?.Ref)?.[1];
    expect(model?.Properties?.Schema).toMatchObject({
      type: 'object',
      additionalProperties: false,
      required: ['reason'],
      properties: { reason: { type: 'string' } },
    });
  });

  it('sends the ops routes to the ops function and the tasks routes to the tasks function', () => {
    const target = (method: Record<string, unknown>) => JSON.stringify(method.Integration);
    const byFunction = (fn: IConstruct) =>
      resourcesOfType(s, 'AWS::ApiGateway::Method').filter(([, m]) =>
        target(m.Properties ?? {}).includes(logicalId(fn)),
      ).length;
    expect(byFunction(s.stack.pipeline.opsApi.function)).toBe(opsApiRoutes(topology.consumerNames).length);
    expect(byFunction(s.stack.pipeline.tasksApi.function)).toBe(tasksApiRoutes.length);
  });

  it('throttles, access-logs in JSON, traces, and keeps bodies out of the execution logs', () => {
    s.template.hasResourceProperties('AWS::ApiGateway::Stage', {
      StageName: 'v1',
      TracingEnabled: true,
      AccessLogSetting: { DestinationArn: Match.anyValue(), Format: Match.stringLikeRegexp('"requestId"') },
      MethodSettings: Match.arrayWith([
        Match.objectLike({
          ThrottlingRateLimit: Match.anyValue(),
          ThrottlingBurstLimit: Match.anyValue(),
          LoggingLevel: 'ERROR',
          DataTraceEnabled: false,
        }),
      ]),
    });
  });

  it('throttles each tasks route on its own, at the stage setting (sandbox 100/s), every other method at the ops rate', () => {
    const settings = methodSettingsOf(s);
    for (const route of tasksApiRoutes) {
      expect(settings).toContainEqual({
        ResourcePath: `/${route.resource.replaceAll('/', '~1')}`,
        HttpMethod: route.method,
        ThrottlingRateLimit: 100,
        ThrottlingBurstLimit: 200,
      });
    }
    expect(settings).toContainEqual(
      expect.objectContaining({
        ResourcePath: '/*',
        HttpMethod: '*',
        ThrottlingRateLimit: 20,
        ThrottlingBurstLimit: 40,
      }),
    );
    expect(settings.filter((m) => m.ResourcePath !== '/*')).toHaveLength(tasksApiRoutes.length);
  });

  it("answers a throttled call 429 with Retry-After, in the API's error shape", () => {
    s.template.hasResourceProperties('AWS::ApiGateway::GatewayResponse', {
      ResponseType: 'THROTTLED',
      StatusCode: '429',
      ResponseParameters: { 'gatewayresponse.header.Retry-After': "'1'" },
      ResponseTemplates: { 'application/json': '{"error":$context.error.messageString}' },
    });
  });

  it('lets the tasks-api nudge the relay by name and nothing else', () => {
    expect(envOf(s.stack.pipeline.tasksApi.function).RELAY_FUNCTION_NAME).toEqual(
      ref(s.stack.pipeline.relay.function),
    );
    s.template.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          {
            Action: 'lambda:InvokeFunction',
            Effect: 'Allow',
            Resource: arnOf(s.stack.pipeline.relay.function),
          },
        ]),
      },
    });
  });
});

describe('outbox relay', () => {
  it('is swept hourly in a sandbox, reserves no concurrency by default, and retries a failed run', () => {
    s.template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 hour)',
      State: 'ENABLED',
      Targets: Match.arrayWith([
        Match.objectLike({
          Arn: arnOf(s.stack.pipeline.relay.function),
          RetryPolicy: { MaximumRetryAttempts: 2 },
        }),
      ]),
    });
    expect(topology.relay.sweepSeconds).toBe(3600); // the literal above is this value, spelt as EventBridge does
    const props = s.json.Resources[logicalId(s.stack.pipeline.relay.function)]?.Properties;
    expect(props?.Timeout).toBe(topology.relay.timeoutSeconds);
    expect(props).not.toHaveProperty('ReservedConcurrentExecutions');
    s.template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
      FunctionName: ref(s.stack.pipeline.relay.function),
      MaximumRetryAttempts: 2,
    });
    expect(envOf(s.stack.pipeline.relay.function).EVENT_BUS_NAME).toEqual(ref(s.stack.pipeline.fanout.bus));
  });

  it('wakes itself through a queue it may only send to, never by switching a rule (no control-plane call per run)', () => {
    const queue = s.stack.pipeline.relay.wakeQueue;
    expect(envOf(s.stack.pipeline.relay.function).RELAY_WAKE_QUEUE_URL).toEqual(ref(queue));
    s.template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: ref(s.stack.pipeline.relay.function),
      EventSourceArn: arnOf(queue),
      BatchSize: 1,
    });
    const relayActions = statementsOf(s.stack.pipeline.relay.function).flatMap((st) => [st.Action].flat());
    expect(relayActions).toContain('sqs:SendMessage');
    expect(
      relayActions.filter((a) => /^events:(Enable|Disable|Put)Rule|^events:.*Target/.test(String(a))),
    ).toEqual([]);
    // Every rule of the stack is enabled at deploy and stays so: none is switched at run time.
    const rules = Object.values(s.json.Resources).filter((r) => r.Type === 'AWS::Events::Rule');
    expect(rules.every((r) => r.Properties?.State !== 'DISABLED')).toBe(true);
    // Its visibility timeout covers six runs, as Lambda advises for an SQS event source.
    expect(propertiesOf(s, logicalId(queue))?.VisibilityTimeout).toBe(6 * topology.relay.timeoutSeconds);
  });

  it('may put events on the pipeline bus only', () => {
    s.template.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          { Action: 'events:PutEvents', Effect: 'Allow', Resource: arnOf(s.stack.pipeline.fanout.bus) },
        ]),
      },
    });
  });
});

describe('delivery audit', () => {
  it('runs on the relay’s sweep rule, so an idle Aurora wakes once per period for both; a failed run waits for the next tick', () => {
    const sweeps = resourcesOfType(s, 'AWS::Events::Rule').filter(
      ([, r]) => r.Properties?.ScheduleExpression === 'rate(1 hour)',
    );
    expect(sweeps).toHaveLength(1);
    const targets = (sweeps[0]?.[1].Properties?.Targets ?? []) as Record<string, unknown>[];
    expect(targets.map((t) => t.Arn)).toEqual([
      arnOf(s.stack.pipeline.relay.function),
      arnOf(s.stack.pipeline.audit.function),
    ]);
    expect(targets[1]).toMatchObject({ RetryPolicy: { MaximumRetryAttempts: 0 } });
    // No schedule of its own: every rule that targets the audit is the sweep.
    const targeting = resourcesOfType(s, 'AWS::Events::Rule').filter(([, r]) =>
      JSON.stringify(r.Properties?.Targets ?? []).includes(logicalId(s.stack.pipeline.audit.function)),
    );
    expect(targeting.map(([id]) => id)).toEqual([sweeps[0]?.[0]]);
    expect(propertiesOf(s, logicalId(s.stack.pipeline.audit.function))?.Timeout).toBe(
      topology.audit.timeoutSeconds,
    );
    s.template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
      FunctionName: ref(s.stack.pipeline.audit.function),
      MaximumRetryAttempts: 0,
    });
  });

  it('may read which inbox records exist by key (BatchGetItem), the open records of the index (Query), re-send to the consumers’ queues (SendMessage), its own database role and its own alarms, nothing more', () => {
    const statements = statementsOf(s.stack.pipeline.audit.function).filter(
      (st) => !JSON.stringify(st.Action).includes('xray:') && !JSON.stringify(st.Action).includes('logs:'),
    );
    const actions = statements.flatMap((st) => [st.Action].flat()).sort();
    expect(actions).toEqual(
      [
        'cloudwatch:DescribeAlarms',
        'dynamodb:BatchGetItem',
        'dynamodb:Query',
        'rds-data:BeginTransaction',
        'rds-data:CommitTransaction',
        'rds-data:ExecuteStatement',
        'rds-data:RollbackTransaction',
        'secretsmanager:GetSecretValue',
        'sqs:SendMessage',
      ].sort(),
    );
    expect(statements.find((st) => st.Action === 'dynamodb:BatchGetItem')).toEqual({
      Action: 'dynamodb:BatchGetItem',
      Effect: 'Allow',
      Resource: arnOf(s.stack.pipeline.inbox.table),
    });
    // SendMessage to each consumer's queue, nothing else of SQS.
    const sends = statements.filter((st) => JSON.stringify(st.Action).includes('sqs:SendMessage'));
    expect(sends.flatMap((st) => [st.Resource].flat()).sort(byJson)).toEqual(
      consumerNames.map((c) => arnOf(consumerQueue(c))).sort(byJson),
    );
    // The consumers' queues, as the ops API is told them (its redrive re-sends the same way).
    expect(envOf(s.stack.pipeline.audit.function).CONSUMER_QUEUES).toEqual(
      envOf(s.stack.pipeline.opsApi.function).CONSUMER_QUEUES,
    );
    const alarms = statements.find((st) => st.Action === 'cloudwatch:DescribeAlarms');
    expect(JSON.stringify(alarms?.Resource)).toMatch(/:alarm:ContentPipeline-sandbox-undelivered"\]\]\}$/);
    expect(JSON.parse(String(envOf(s.stack.pipeline.audit.function).GAUGE_ALARMS))).toEqual({
      undelivered: 'ContentPipeline-sandbox-undelivered',
    });
    expect(envOf(s.stack.pipeline.audit.function)[consumerEnv.inboxTable]).toEqual(
      ref(s.stack.pipeline.inbox.table),
    );
  });

  it('alarms on UndeliveredToConsumer of all consumers with the dimensions the audit writes, and on its own errors', async () => {
    const handler = readFileSync(join(projectRoot, 'functions/delivery-audit/handler.ts'), 'utf8');
    expect(handler).toMatch(/new Metrics\(\{[^}]*serviceName: deliveryAuditServiceName/);
    const lines: string[] = [];
    const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      await emitAuditGauges({
        undelivered: { index: 2, notify: 1, archive: 4 },
        metrics: new Metrics({ namespace: metricsNamespace, serviceName: deliveryAuditServiceName }),
      });
    } finally {
      write.mockRestore();
    }
    const docs = lines
      .flatMap((l) => l.split('\n'))
      .filter((l) => l.includes('_aws'))
      .map((l) => JSON.parse(l) as EmfDocument);
    // Each consumer's for the dashboard, then all of them together for the alarm.
    expect(docs.map((d) => [d.Consumer ?? 'all', d[auditMetricNames.undelivered]])).toEqual([
      ['index', 2],
      ['notify', 1],
      ['archive', 4],
      ['all', 7],
    ]);
    const all = docs.at(-1) as EmfDocument;
    const emitted = Object.fromEntries(
      (all._aws.CloudWatchMetrics[0]?.Dimensions[0] ?? []).map((k) => [k, all[k]]),
    );
    expect(alarmsOn(auditMetricNames.undelivered)).toEqual([emitted]);
    s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'ContentPipeline-sandbox-undelivered',
      Namespace: metricsNamespace,
      MetricName: auditMetricNames.undelivered,
      Dimensions: [{ Name: 'service', Value: deliveryAuditServiceName }],
      Statistic: 'Maximum',
      Threshold: topology.alarms.undeliveredEvents,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      TreatMissingData: 'ignore',
      AlarmActions: [ref(s.stack.pipeline.alarms.topic)],
    });
    s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'ContentPipeline-sandbox-delivery-audit-errors',
      Namespace: 'AWS/Lambda',
      MetricName: 'Errors',
      Dimensions: [{ Name: 'FunctionName', Value: ref(s.stack.pipeline.audit.function) }],
      AlarmActions: [ref(s.stack.pipeline.alarms.topic)],
    });
  });
});

describe('event fan-out', () => {
  it('archives every pipeline event of the custom bus', () => {
    s.template.hasResourceProperties('AWS::Events::EventBus', { Name: `${topology.busName}-sandbox` });
    s.template.hasResourceProperties('AWS::Events::Archive', {
      SourceArn: arnOf(s.stack.pipeline.fanout.bus),
      EventPattern: { source: [topology.source] },
      RetentionDays: 30,
    });
  });

  it("gives each rule target the consumer retry policy and the consumer's encrypted dead-letter queue, one per consumer whichever rule", () => {
    const dlqOf = new Map<string, string>();
    for (const spec of topology.rules) {
      const rule = resourcesOfType(s, 'AWS::Events::Rule').find(
        ([, r]) => r.Properties?.Name === s.stack.pipeline.ruleName(spec.name),
      );
      const targets = rule?.[1].Properties?.Targets as Record<string, { 'Fn::GetAtt': string[] }>[];
      for (const [i, target] of targets.entries()) {
        const consumer = spec.targets[i] as string;
        const dlq = target.DeadLetterConfig as unknown as { Arn: { 'Fn::GetAtt': string[] } };
        const dlqId = dlq.Arn['Fn::GetAtt'][0] as string;
        expect(dlqOf.get(consumer) ?? dlqId).toBe(dlqId);
        dlqOf.set(consumer, dlqId);
        expect(s.json.Resources[dlqId]?.Properties).toMatchObject({ SqsManagedSseEnabled: true });
      }
      expect(targets.map((t) => t.RetryPolicy)).toEqual(
        spec.targets.map((c) => ({
          MaximumRetryAttempts: consumerPolicyOf(topology, c).targetRetry.maximumRetryAttempts,
          MaximumEventAgeInSeconds: consumerPolicyOf(topology, c).targetRetry.maximumEventAgeSeconds,
        })),
      );
    }
    // No two consumers share one.
    expect(new Set(dlqOf.values()).size).toBe(dlqOf.size);
  });

  it('lets EventBridge write to each DLQ only from its own rule, over TLS only', () => {
    for (const target of s.stack.pipeline.fanout.targets) {
      s.template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [ref(target.deadLetterQueue)],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
            Match.objectLike({
              Action: 'sqs:SendMessage',
              Principal: { Service: 'events.amazonaws.com' },
              Condition: { ArnEquals: { 'aws:SourceArn': Match.anyValue() } },
            }),
          ]),
        },
      });
    }
  });
});

describe('consumers', () => {
  it('each read their own queue through an event source mapping sized by their policy, reporting each message on its own', () => {
    for (const name of consumerNames) {
      const consumer = consumerOf(name);
      const policy = consumerPolicyOf(topology, name);
      s.template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
        FunctionName: ref(consumer.function),
        EventSourceArn: arnOf(consumer.queue),
        BatchSize: policy.queue.batchSize,
        ScalingConfig: { MaximumConcurrency: policy.queue.maxConcurrency },
        FunctionResponseTypes: ['ReportBatchItemFailures'],
      });
      const timeout = propertiesOf(s, logicalId(consumer.function)).Timeout as number;
      expect(propertiesOf(s, logicalId(consumer.queue))).toMatchObject({
        SqsManagedSseEnabled: true,
        // Six times the function's timeout, as Lambda advises for an SQS source.
        VisibilityTimeout: timeout * 6,
        MessageRetentionPeriod: policy.queue.retentionSeconds,
        RedrivePolicy: {
          deadLetterTargetArn: arnOf(consumer.deadLetters),
          maxReceiveCount: queueMaxReceiveCount(policy),
        },
      });
      expect(propertiesOf(s, logicalId(consumer.deadLetters)).MessageRetentionPeriod).toBe(
        policy.deadLetterRetentionSeconds,
      );
      expect(envOf(consumer.function)).toMatchObject({
        [consumerEnv.consumerName]: name,
        [consumerEnv.inboxTable]: ref(s.stack.pipeline.inbox.table),
        [consumerQueueEnv.url]: ref(consumer.queue),
        [consumerQueueEnv.arn]: arnOf(consumer.queue),
        [consumerQueueEnv.visibilityTimeoutSeconds]: String(timeout * 6),
      });
      // Its mapping's grants: receive, delete and change visibility on its own queue, no other.
      const onQueues = statementsOf(consumer.function).filter((st) =>
        JSON.stringify(st.Action).includes('sqs:'),
      );
      expect(onQueues.map((st) => st.Resource)).toEqual([arnOf(consumer.queue)]);
      expect([onQueues[0]?.Action].flat()).toEqual(
        expect.arrayContaining(['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility']),
      );
    }
  });

  it('are invoked by nothing but their mappings: no invoke configuration, no resource policy, no role may invoke them', () => {
    const consumerIds = new Set(consumerNames.map((n) => logicalId(consumerFunction(n))));
    const names = (r: { Properties?: Record<string, unknown> }) =>
      JSON.stringify(r.Properties?.FunctionName ?? null);
    for (const type of ['AWS::Lambda::EventInvokeConfig', 'AWS::Lambda::Permission'])
      for (const [id, r] of resourcesOfType(s, type))
        for (const c of consumerIds) expect(names(r), `${type} ${id}`).not.toContain(`"${c}"`);
    for (const [id, policy] of resourcesOfType(s, 'AWS::IAM::Policy')) {
      const document = policy.Properties?.PolicyDocument as { Statement: Record<string, unknown>[] };
      for (const st of document.Statement.filter((x) => JSON.stringify(x.Action).includes('lambda:Invoke')))
        for (const c of consumerIds) expect(JSON.stringify(st.Resource), id).not.toContain(`"${c}"`);
    }
  });

  it('each take messages only from their own rules and the two redrives: every other sender is denied', () => {
    const redrivers = [s.stack.pipeline.opsApi.function, s.stack.pipeline.audit.function].map((f) =>
      arnOf((f as unknown as { role: IConstruct }).role),
    );
    for (const name of consumerNames) {
      const consumer = consumerOf(name);
      const rules = s.stack.pipeline.fanout.targets
        .filter((t) => t.consumer === name)
        .map((t) => s.stack.pipeline.fanout.rules.get(t.rule) as IConstruct);
      const policies = resourcesOfType(s, 'AWS::SQS::QueuePolicy').filter(
        ([, p]) => JSON.stringify(p.Properties?.Queues) === JSON.stringify([ref(consumer.queue)]),
      );
      expect(policies).toHaveLength(1);
      const document = policies[0]?.[1].Properties?.PolicyDocument as {
        Statement: Record<string, unknown>[];
      };
      const statements = document.Statement;
      const allows = statements.filter((st) => st.Effect === 'Allow');
      // EventBridge, each statement for one of its rules.
      expect(allows.map((st) => st.Principal)).toEqual(
        allows.map(() => ({ Service: 'events.amazonaws.com' })),
      );
      expect(allows.map((st) => (st.Condition as { ArnEquals: Record<string, unknown> }).ArnEquals)).toEqual(
        rules.map((r) => ({ 'aws:SourceArn': arnOf(r) })),
      );
      expect(statements).toContainEqual({
        Sid: 'OnlyItsRulesAndRedrivesSend',
        Effect: 'Deny',
        Principal: { AWS: '*' },
        Action: 'sqs:SendMessage',
        Resource: arnOf(consumer.queue),
        Condition: {
          ArnNotEquals: { 'aws:SourceArn': rules.map((r) => arnOf(r)) },
          ArnNotLike: { 'aws:PrincipalArn': redrivers },
        },
      });
      for (const fn of [s.stack.pipeline.opsApi.function, s.stack.pipeline.audit.function]) {
        const sends = statementsOf(fn).filter((st) => JSON.stringify(st.Action).includes('sqs:SendMessage'));
        expect(sends.flatMap((st) => [st.Resource].flat())).toContainEqual(arnOf(consumer.queue));
      }
    }
  });

  it('each have their queue’s DLQ alarmed and listed by the ops API as the consumer’s', () => {
    // A Fn::Join of the queues' JSON, with their URLs as Refs.
    const queues = envOf(s.stack.pipeline.opsApi.function).DEAD_LETTER_QUEUES;
    for (const name of consumerNames) {
      const consumer = consumerOf(name);
      expect(JSON.stringify(queues)).toContain(
        `${JSON.stringify(ref(consumer.deadLetters))},"\\",\\"consumer\\":\\"${name}\\",\\"rule\\":\\"consumer-queue\\"}`,
      );
      const alarms = resourcesOfType(s, 'AWS::CloudWatch::Alarm').filter(([, a]) =>
        JSON.stringify(a.Properties?.Dimensions ?? a.Properties?.Metrics ?? []).includes(
          logicalId(consumer.deadLetters),
        ),
      );
      expect(alarms.map(([, a]) => a.Properties?.AlarmName)).toContainEqual(
        `ContentPipeline-sandbox-queue-not-empty-${name}-dead-letters`,
      );
    }
  });

  it('each get the resources they declare by their variables, and the database only if they declare it', () => {
    const made = declared();
    expect(new Set(made.map((r) => r.resource.spec.kind))).toEqual(new Set(['table', 'topic', 'bucket']));
    for (const { consumer, key, resource } of made) {
      expect(envOf(consumerFunction(consumer))[resourceEnvName(key, resource.spec.kind)], key).toEqual(
        ref(madeOf(resource)),
      );
    }
    for (const name of consumerNames) {
      const variables = Object.keys(envOf(consumerFunction(name)));
      if (databaseOf(name))
        expect(variables, name).toEqual(
          expect.arrayContaining(['DB_CLUSTER_ARN', 'DB_SECRET_ARN', 'DB_NAME']),
        );
      else expect(variables, name).not.toContain('DB_CLUSTER_ARN');
    }
  });

  it('may do with each resource what its kind needs: GetItem and PutItem on a table, Publish to a topic, PutObject in a bucket', () => {
    for (const { consumer, key, resource } of declared()) {
      const made = madeOf(resource);
      const expected = {
        table: { Action: ['dynamodb:GetItem', 'dynamodb:PutItem'], Resource: arnOf(made) },
        topic: { Action: 'sns:Publish', Resource: ref(made) },
        bucket: { Action: 's3:PutObject', Resource: { 'Fn::Join': ['', [arnOf(made), '/*']] } },
      }[resource.spec.kind];
      // Every statement of every function that names the resource: its consumer's one grant.
      const onIt = pipelineFunctions().flatMap((fn) =>
        statementsOf(fn)
          .filter((st) => JSON.stringify(st.Resource).includes(`"${logicalId(made)}"`))
          .map((st) => ({ fn, st })),
      );
      expect(
        onIt.map((o) => o.fn),
        key,
      ).toEqual([consumerFunction(consumer)]);
      expect(onIt[0]?.st, key).toEqual({ ...expected, Effect: 'Allow' });
    }
  });

  it('touch only their own inbox records: every key they name starts with their name and #', () => {
    for (const name of consumerNames) {
      const inbox = statementsOf(s.stack.pipeline.consumers.get(name)?.function as IConstruct).filter((st) =>
        JSON.stringify(st.Resource).includes(logicalId(s.stack.pipeline.inbox.table)),
      );
      expect(inbox, name).toEqual([
        {
          Action: [...inboxActions].sort(),
          Effect: 'Allow',
          Resource: arnOf(s.stack.pipeline.inbox.table),
          Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [`${name}#*`] } },
        },
      ]);
      // The pattern matches exactly the keys the store writes for this consumer.
      expect(recordKey({ consumer: name, eventId: 'e' }).startsWith(`${name}#`)).toBe(true);
    }
  });
});

describe('stores', () => {
  it('can all be destroyed in the sandbox stage: deleted on stack deletion, the bucket emptied first', () => {
    for (const [id, table] of resourcesOfType(s, 'AWS::DynamoDB::Table'))
      expect(table.DeletionPolicy, id).toBe('Delete');
    s.template.hasResource('AWS::S3::Bucket', { DeletionPolicy: 'Delete' });
    // One emptying of each bucket a consumer declares.
    const buckets = topology.registry.flatMap((c) =>
      Object.values(c.resources).filter((r) => r.kind === 'bucket'),
    );
    expect(resourcesOfType(s, 'Custom::S3AutoDeleteObjects')).toHaveLength(buckets.length);
  });

  it('inbox: one partition key per record, <consumer>#<eventId>; TTL expiresAt, point-in-time recovery', () => {
    expect(s.json.Resources[logicalId(s.stack.pipeline.inbox.table)]?.Properties).toMatchObject({
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      BillingMode: 'PAY_PER_REQUEST',
    });
    expect(inboxTableSchema.partitionKey).toBe('pk');
    expect(recordKey({ consumer: 'index', eventId: 'e-1' })).toBe('index#e-1');
  });

  it('inbox: the operator’s index holds keys only, under sharded <consumer>#<status>#<shard> keys sorted by time', () => {
    const table = s.json.Resources[logicalId(s.stack.pipeline.inbox.table)]?.Properties ?? {};
    expect(table.GlobalSecondaryIndexes).toEqual([
      {
        IndexName: 'open-records',
        KeySchema: [
          { AttributeName: 'openKey', KeyType: 'HASH' },
          { AttributeName: 'openSince', KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'KEYS_ONLY' },
      },
    ]);
    expect(table.AttributeDefinitions).toEqual(
      expect.arrayContaining([
        { AttributeName: 'pk', AttributeType: 'S' },
        { AttributeName: 'openKey', AttributeType: 'S' },
        { AttributeName: 'openSince', AttributeType: 'S' },
      ]),
    );
    // Two index writes a record (in at begin, out at complete) of one write unit each: a key value's
    // partition (1,000 write units a second) takes 500 events a second, so the shards must carry
    // 10,000 events a second of one consumer.
    expect(topology.inbox.openIndexShards * (1_000 / 2)).toBeGreaterThanOrEqual(10_000);
    expect(openKeys('index', 'PROCESSING', topology.inbox.openIndexShards)).toHaveLength(
      topology.inbox.openIndexShards,
    );
  });

  it('inbox: a table of its own, so a stack that had the one keyed by consumer creates it anew', () => {
    // A key schema cannot change in place; the old table's logical id was Inbox/Table.
    expect(logicalId(s.stack.pipeline.inbox.table)).toMatch(/^InboxEventKeyedTable[0-9A-F]{8}$/);
    expect(resourcesOfType(s, 'AWS::DynamoDB::Table').map(([id]) => id)).not.toContainEqual(
      expect.stringMatching(/^InboxTable[0-9A-F]{8}$/),
    );
    // Named by CloudFormation from the logical id: a new id is a new table, never a clash.
    expect(s.json.Resources[logicalId(s.stack.pipeline.inbox.table)]?.Properties?.TableName).toBeUndefined();
  });

  it('inbox: the ops API queries the index and reads records by key, never a scan', () => {
    const inbox = statementsOf(s.stack.pipeline.opsApi.function).filter((st) =>
      JSON.stringify(st.Resource).includes(logicalId(s.stack.pipeline.inbox.table)),
    );
    expect(inbox).toEqual([
      {
        Action: 'dynamodb:Query',
        Effect: 'Allow',
        Resource: { 'Fn::Join': ['', [arnOf(s.stack.pipeline.inbox.table), '/index/open-records']] },
      },
      {
        Action: ['dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:UpdateItem'],
        Effect: 'Allow',
        Resource: arnOf(s.stack.pipeline.inbox.table),
      },
    ]);
  });

  it('tables: keyed by the partition key their declaration names', () => {
    const tables = declared().flatMap(({ resource }) =>
      resource instanceof ConsumerTable ? [resource] : [],
    );
    expect(tables).not.toEqual([]);
    for (const table of tables) {
      const key = table.spec.partitionKey;
      expect(s.json.Resources[logicalId(table.table)]?.Properties).toMatchObject({
        KeySchema: [{ AttributeName: key, KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: key, AttributeType: 'S' }],
      });
    }
  });

  it('buckets: encrypted, versioned, public access blocked, TLS only', () => {
    const buckets = declared().flatMap(({ resource }) =>
      resource instanceof ConsumerBucket ? [resource] : [],
    );
    expect(buckets).not.toEqual([]);
    for (const { bucket } of buckets) {
      expect(s.json.Resources[logicalId(bucket)]?.Properties).toMatchObject({
        BucketEncryption: {
          ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
        },
        VersioningConfiguration: { Status: 'Enabled' },
        PublicAccessBlockConfiguration: {
          BlockPublicAcls: true,
          BlockPublicPolicy: true,
          IgnorePublicAcls: true,
          RestrictPublicBuckets: true,
        },
      });
      s.template.hasResourceProperties('AWS::S3::BucketPolicy', {
        Bucket: ref(bucket),
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
          ]),
        },
      });
    }
  });

  it('topics: encrypted, publishable by their own consumer only', () => {
    const topics = declared().filter(({ resource }) => resource instanceof ConsumerTopic);
    expect(topics).not.toEqual([]);
    const publishers = resourcesOfType(s, 'AWS::IAM::Policy').filter(([, p]) =>
      JSON.stringify(p.Properties?.PolicyDocument).includes('"sns:Publish"'),
    );
    expect(publishers).toHaveLength(topics.length);
    for (const { consumer, resource } of topics) {
      const topic = madeOf(resource);
      expect(s.json.Resources[logicalId(topic)]?.Properties).toMatchObject({
        KmsMasterKeyId: expect.anything(),
      });
      const [, policy] =
        publishers.find(([, p]) =>
          JSON.stringify(p.Properties?.PolicyDocument).includes(`"${logicalId(topic)}"`),
        ) ?? [];
      const role = (consumerFunction(consumer) as unknown as { role: IConstruct }).role;
      expect(policy?.Properties?.Roles, consumer).toEqual([ref(role)]);
    }
  });
});

describe('functions', () => {
  it('run Node 22 on ARM64 with X-Ray, a log group with retention and the Powertools environment', () => {
    for (const fn of pipelineFunctions()) {
      const props = s.json.Resources[logicalId(fn)]?.Properties ?? {};
      expect(props).toMatchObject({
        Runtime: 'nodejs22.x',
        Architectures: ['arm64'],
        Handler: 'index.handler',
        TracingConfig: { Mode: 'Active' },
        LoggingConfig: { LogGroup: { Ref: expect.any(String) } },
      });
      expect(envOf(fn)).toMatchObject({
        POWERTOOLS_SERVICE_NAME: expect.any(String),
        POWERTOOLS_METRICS_NAMESPACE: metricsNamespace,
      });
      const logGroupId = (props.LoggingConfig as { LogGroup: { Ref: string } }).LogGroup.Ref;
      expect(s.json.Resources[logGroupId]?.Properties?.RetentionInDays).toBe(14);
    }
  });

  it('are real esbuild ESM bundles that define require for their CommonJS dependencies', () => {
    const assetsDir = s.assembly.directory;
    for (const fn of pipelineFunctions()) {
      const code = s.json.Resources[logicalId(fn)]?.Properties?.Code as { S3Key: string };
      const hash = code.S3Key.replace(/\.zip$/, '');
      const bundle = join(assetsDir, `asset.${hash}`, 'index.mjs');
      expect(existsSync(bundle), bundle).toBe(true);
      expect(statSync(bundle).size).toBeGreaterThan(10_000);
      expect(readFileSync(bundle, 'utf8').startsWith(esmRequireBanner)).toBe(true);
    }
  });

  it('have no wildcard action, and "*" resources only for actions that take no resource (X-Ray, GetMetricData)', () => {
    // docs.aws.amazon.com/service-authorization/latest/reference: these actions have no resource types.
    const xray = new Set(['xray:PutTraceSegments', 'xray:PutTelemetryRecords', 'cloudwatch:GetMetricData']);
    const ours = new Set(pipelineFunctions().map((fn) => logicalId(fn.role as unknown as IConstruct)));
    let checked = 0;
    for (const [, policy] of resourcesOfType(s, 'AWS::IAM::Policy')) {
      const roles = ((policy.Properties?.Roles ?? []) as { Ref: string }[]).map((r) => r.Ref);
      if (!roles.some((r) => ours.has(r))) continue;
      const document = policy.Properties?.PolicyDocument as
        | { Statement: Record<string, unknown>[] }
        | undefined;
      const statements = document?.Statement ?? [];
      for (const st of statements) {
        const actions = [st.Action].flat() as string[];
        for (const action of actions) expect(action, JSON.stringify(st)).not.toContain('*');
        if (JSON.stringify(st.Resource).includes('"*"')) {
          expect(
            actions.every((a) => xray.has(a)),
            JSON.stringify(st),
          ).toBe(true);
        }
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(pipelineFunctions().length);
  });
});

// An alarm whose dimensions differ from what the code emits watches nothing: it never fires
// (or, missing data breaching, always fires). These compare the alarms with what is emitted.
describe('alarm dimensions match what the functions emit', () => {
  it('inbox gauges: each inbox alarm has the dimensions and metric the gauge function writes for its consumer', async () => {
    const handler = readFileSync(join(projectRoot, 'functions/inbox-gauges/handler.ts'), 'utf8');
    expect(handler).toMatch(/new Metrics\(\{[^}]*serviceName: inboxGaugesServiceName/);
    const lines: string[] = [];
    const now = Date.parse('2026-11-30T12:00:00Z');
    const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      await emitInboxGauges({
        inbox: {
          openFigures: async () => ({
            PROCESSING: { count: 1, oldestSince: now - 400_000 },
            FAILED: { count: 1, oldestSince: now - 30_000_000 },
            DEAD: { count: 2, oldestSince: now - 1_000 },
          }),
        },
        metrics: new Metrics({ namespace: metricsNamespace, serviceName: inboxGaugesServiceName }),
        consumers: consumerNames,
        clock: () => now,
      });
    } finally {
      write.mockRestore();
    }
    const docs = lines
      .flatMap((l) => l.split('\n'))
      .filter((l) => l.includes('_aws'))
      .map((l) => JSON.parse(l) as EmfDocument);
    // One document per consumer, then one for all of them (no Consumer dimension).
    expect(docs).toHaveLength(consumerNames.length + 1);
    const dimensionsOf = (emf: EmfDocument) =>
      Object.fromEntries((emf._aws.CloudWatchMetrics[0]?.Dimensions[0] ?? []).map((k) => [k, emf[k]]));
    for (const emf of docs.slice(0, consumerNames.length)) {
      expect(emf._aws.CloudWatchMetrics[0]?.Namespace).toBe(metricsNamespace);
      expect(emf[inboxGaugeMetricNames.dead]).toBe(2);
      expect(emf[inboxGaugeMetricNames.oldestLease]).toBe(400);
      // Each consumer's figure is for the dashboard: no alarm watches a Consumer dimension.
      expect(alarmsOn(inboxGaugeMetricNames.dead)).not.toContainEqual(dimensionsOf(emf));
    }
    const all = docs.at(-1) as EmfDocument;
    expect(all[inboxGaugeMetricNames.dead]).toBe(2 * consumerNames.length);
    expect(all[inboxGaugeMetricNames.oldestLease]).toBe(400);
    expect(all[inboxGaugeMetricNames.retryAge]).toBe(30_000);
    // One alarm each for every consumer, on the document without the Consumer dimension.
    for (const metric of [
      inboxGaugeMetricNames.dead,
      inboxGaugeMetricNames.oldestLease,
      inboxGaugeMetricNames.retryAge,
    ]) {
      expect(alarmsOn(metric), metric).toEqual([dimensionsOf(all)]);
    }
    expect(dimensionsOf(all)).toEqual({ service: inboxGaugesServiceName });
  });

  it('relay: the age and dead alarms use the service name the relay handler gives Powertools', () => {
    const handler = readFileSync(join(projectRoot, 'functions/outbox-relay/handler.ts'), 'utf8');
    // The handler names its service with the constant the alarms read, not a literal of its own.
    expect(handler).toMatch(/new Metrics\(\{[^}]*serviceName: relayServiceName \}\)/);
    expect(handler).toMatch(
      /import \{[^}]*relayServiceName[^}]*\} from '..\/..\/shared\/outbox\/relay-metrics'/,
    );
    for (const metric of [relayMetricNames.oldestPendingAge, relayMetricNames.dead]) {
      const dimensions = alarmsOn(metric);
      expect(dimensions.length).toBeGreaterThan(0);
      for (const d of dimensions) expect(d).toEqual({ service: relayServiceName });
    }
  });
});

describe('alarms', () => {
  it('alarm on the oldest pending age, keeping their state between the relay’s reports', () => {
    s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: metricsNamespace,
      MetricName: relayMetricNames.oldestPendingAge,
      Dimensions: [{ Name: 'service', Value: 'outbox-relay' }],
      Statistic: 'Maximum',
      Period: topology.alarms.periodSeconds,
      Threshold: topology.alarms.oldestPendingAgeSeconds,
      ComparisonOperator: 'GreaterThanThreshold',
      EvaluationPeriods: topology.alarms.evaluationPeriods,
      DatapointsToAlarm: topology.alarms.datapointsToAlarm,
      TreatMissingData: 'ignore',
      AlarmActions: [ref(s.stack.pipeline.alarms.topic)],
    });
  });

  it('alarm when the relay stops reporting for two sweep periods, missing data breaching', () => {
    s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'ContentPipeline-sandbox-relay-silent',
      Namespace: metricsNamespace,
      MetricName: relayMetricNames.oldestPendingAge,
      Dimensions: [{ Name: 'service', Value: 'outbox-relay' }],
      Statistic: 'SampleCount',
      Period: topology.relay.sweepSeconds,
      Threshold: 1,
      ComparisonOperator: 'LessThanThreshold',
      EvaluationPeriods: topology.alarms.relaySilentSweeps,
      TreatMissingData: 'breaching',
    });
  });

  it('keep dead-record and queue alarms red until a data point below the threshold (missing data ignored)', () => {
    const alarms = resourcesOfType(s, 'AWS::CloudWatch::Alarm').map(([, a]) => a.Properties ?? {});
    const on = (metric: string) => alarms.filter((a) => a.MetricName === metric);
    for (const metric of [
      inboxGaugeMetricNames.dead,
      relayMetricNames.dead,
      'ApproximateNumberOfMessagesVisible',
    ]) {
      expect(on(metric).length, metric).toBeGreaterThan(0);
      for (const a of on(metric)) expect(a.TreatMissingData, metric).toBe('ignore');
    }
    for (const a of on(inboxGaugeMetricNames.dead)) expect(a.Period).toBe(topology.alarms.gaugePeriodSeconds);
  });

  it('alarm once for every consumer on the oldest PROCESSING lease and the oldest retry age, at the topology’s thresholds', () => {
    const limits = inboxHealthThresholds(topology);
    expect(limits).toEqual({
      oldestLeaseSeconds: topology.alarms.oldestLeasePeriods * 30,
      retryAgeSeconds: 6 * 3600,
    });
    for (const [id, metric, threshold] of [
      ['inbox-oldest-lease', inboxGaugeMetricNames.oldestLease, limits.oldestLeaseSeconds],
      ['inbox-retry-age', inboxGaugeMetricNames.retryAge, limits.retryAgeSeconds],
    ] as const) {
      s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        AlarmName: `ContentPipeline-sandbox-${id}`,
        Namespace: metricsNamespace,
        MetricName: metric,
        Dimensions: [{ Name: 'service', Value: inboxGaugesServiceName }],
        Statistic: 'Maximum',
        Period: topology.alarms.gaugePeriodSeconds,
        Threshold: threshold,
        ComparisonOperator: 'GreaterThanThreshold',
        TreatMissingData: 'ignore',
        AlarmActions: [ref(s.stack.pipeline.alarms.topic)],
      });
    }
  });

  it('alarm once for every consumer on DEAD inbox records, watching the sum the gauges send without the Consumer dimension', () => {
    s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'ContentPipeline-sandbox-inbox-dead',
      Namespace: metricsNamespace,
      MetricName: inboxGaugeMetricNames.dead,
      Dimensions: [{ Name: 'service', Value: inboxGaugesServiceName }],
      Statistic: 'Maximum',
      Period: topology.alarms.gaugePeriodSeconds,
      Threshold: topology.alarms.inboxDeadRecords,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      TreatMissingData: 'ignore',
      AlarmActions: [ref(s.stack.pipeline.alarms.topic)],
      OKActions: [ref(s.stack.pipeline.alarms.topic)],
    });
    const names = resourcesOfType(s, 'AWS::CloudWatch::Alarm').map(([, a]) =>
      String(a.Properties?.AlarmName),
    );
    expect(names.filter((n) => n.includes('inbox-dead'))).toEqual(['ContentPipeline-sandbox-inbox-dead']);
  });

  it('set no alarm on a rule’s FailedInvocations: its rule DLQ’s alarm and the delivery audit’s page for it', () => {
    const alarms = resourcesOfType(s, 'AWS::CloudWatch::Alarm').map(([, a]) => a.Properties ?? {});
    expect(alarms.length).toBeGreaterThan(0);
    for (const a of alarms) {
      expect(a.Namespace, String(a.AlarmName)).not.toBe('AWS/Events');
      expect(a.MetricName, String(a.AlarmName)).not.toBe('FailedInvocations');
      expect(String(a.AlarmName)).not.toContain('failed-invocations');
    }
    // What pages instead: every consumer's rule DLQ (shared by its rules, named after its
    // first) has its not-empty alarm, and `undelivered`.
    for (const consumer of Object.keys(topology.consumers)) {
      const first = topology.rules.find((r) => (r.targets as readonly string[]).includes(consumer));
      if (!first) continue;
      expect(alarms.map((a) => a.AlarmName)).toContain(
        `ContentPipeline-sandbox-queue-not-empty-dlq-${first.name}-${consumer}`,
      );
    }
    expect(alarms.map((a) => a.AlarmName)).toContain('ContentPipeline-sandbox-undelivered');
  });

  it('count DEAD inbox records on a schedule from the operator’s index, never the database', () => {
    s.template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(5 minutes)',
      Targets: [Match.objectLike({ Arn: arnOf(s.stack.pipeline.inboxGauges.function) })],
    });
    expect(topology.alarms.gaugePeriodSeconds).toBe(300);
    const statements = statementsOf(s.stack.pipeline.inboxGauges.function).filter(
      (st) => !JSON.stringify(st.Action).includes('xray:') && !JSON.stringify(st.Action).includes('logs:'),
    );
    expect(statements).toHaveLength(2);
    expect(statements[0]).toEqual({
      Action: 'dynamodb:Query',
      Effect: 'Allow',
      Resource: { 'Fn::Join': ['', [arnOf(s.stack.pipeline.inbox.table), '/index/open-records']] },
    });
    // It reads its own alarms' states (a zero is sent only while one is not OK), nothing else.
    expect(statements[1]?.Action).toBe('cloudwatch:DescribeAlarms');
    const alarmArns = JSON.stringify(statements[1]?.Resource);
    const fed = ['inbox-dead', 'inbox-oldest-lease', 'inbox-retry-age'];
    expect(statements[1]?.Resource).toHaveLength(fed.length);
    for (const id of fed) expect(alarmArns).toContain(`:alarm:ContentPipeline-sandbox-${id}"`);
    expect(JSON.parse(String(envOf(s.stack.pipeline.inboxGauges.function).GAUGE_ALARMS))).toEqual(
      Object.fromEntries(fed.map((id) => [id, `ContentPipeline-sandbox-${id}`])),
    );
    expect(Object.keys(envOf(s.stack.pipeline.inboxGauges.function))).not.toContain('DB_CLUSTER_ARN');
  });

  it('may reach a person: CloudWatch may publish to the topic and use its key, for this stack’s alarms only', () => {
    const ourAlarms = {
      StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
      ArnLike: {
        'aws:SourceArn': {
          'Fn::Join': [
            '',
            [
              'arn:',
              { Ref: 'AWS::Partition' },
              ':cloudwatch:',
              { Ref: 'AWS::Region' },
              ':',
              { Ref: 'AWS::AccountId' },
              ':alarm:ContentPipeline-sandbox-*',
            ],
          ],
        },
      },
    };
    s.template.hasResourceProperties('AWS::SNS::TopicPolicy', {
      Topics: [ref(s.stack.pipeline.alarms.topic)],
      PolicyDocument: {
        Statement: Match.arrayWith([
          {
            Sid: 'CloudWatchAlarmsOfThisStack',
            Effect: 'Allow',
            Principal: { Service: 'cloudwatch.amazonaws.com' },
            Action: 'sns:Publish',
            Resource: ref(s.stack.pipeline.alarms.topic),
            Condition: ourAlarms,
          },
        ]),
      },
    });
    const key = resourcesOfType(s, 'AWS::KMS::Key')[0]?.[1];
    const statements =
      (key?.Properties?.KeyPolicy as { Statement: Record<string, unknown>[] } | undefined)?.Statement ?? [];
    const forServices = statements.filter((st) => JSON.stringify(st.Principal).includes('"Service"'));
    expect(forServices.length).toBeGreaterThan(0);
    for (const st of forServices) expect(st.Condition).toEqual(ourAlarms);
  });

  it('alarm on dead outbox events and relay errors', () => {
    s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: metricsNamespace,
      MetricName: relayMetricNames.dead,
      Threshold: topology.alarms.deadEvents,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
    });
    s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/Lambda',
      MetricName: 'Errors',
      Dimensions: [{ Name: 'FunctionName', Value: ref(s.stack.pipeline.relay.function) }],
      Threshold: topology.alarms.relayErrors,
    });
  });

  it('send to an encrypted alarm topic with the email subscription', () => {
    s.template.hasResourceProperties('AWS::SNS::Subscription', {
      Protocol: 'email',
      Endpoint: 'ops@example.com',
      TopicArn: ref(s.stack.pipeline.alarms.topic),
    });
    s.template.hasResource('AWS::KMS::Key', { DeletionPolicy: 'Delete' }); // sandbox: no $1/month leftover
    s.template.hasResourceProperties('AWS::KMS::Key', {
      EnableKeyRotation: true,
      PendingWindowInDays: 7,
      KeyPolicy: {
        Statement: Match.arrayWith([
          Match.objectLike({ Principal: { Service: 'cloudwatch.amazonaws.com' } }),
        ]),
      },
    });
  });

  it('come with the outputs an operator needs, and no dashboard in a sandbox unless asked (-c dashboard=true)', () => {
    s.template.resourceCountIs('AWS::CloudWatch::Dashboard', 0);
    const outputs = Object.keys(s.json.Outputs ?? {});
    expect(outputs).toEqual(
      expect.arrayContaining([
        'ApiUrl',
        'EventBusName',
        'ClusterArn',
        'SecretArn',
        'InboxTableName',
        'AlarmNamePrefix',
      ]),
    );
  });

  it('export each table, topic and bucket a consumer declares, named after its key and described as declared', () => {
    const suffix = { table: 'TableName', topic: 'TopicArn', bucket: 'BucketName' } as const;
    const made = declared();
    expect(made).not.toEqual([]);
    for (const { key, resource } of made) {
      expect(s.json.Outputs?.[`${resourceConstructId(key)}${suffix[resource.spec.kind]}`], key).toEqual({
        Description: resource.spec.description,
        Value: ref(madeOf(resource)),
      });
    }
    // The names deployed stacks export them by (docs/aws.md).
    expect(Object.keys(s.json.Outputs ?? {})).toEqual(
      expect.arrayContaining(['ContentIndexTableName', 'ArchiveBucketName', 'NotificationsTopicArn']),
    );
  });
});
