import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { ConsumerBucket } from '../../infra/aws/constructs/consumer-resources';
import { pipelineSourceFamily } from '../../infra/aws/constructs/event-fanout';
import { projectRoot } from '../../infra/aws/constructs/pipeline-function';
import { apiStageName } from '../../infra/aws/constructs/tasks-api';
import { PipelineStack } from '../../infra/aws/pipeline-stack';
import { parseSettings } from '../../infra/aws/settings';
import { opsApiRoutes } from '../../shared/ops/ops-api';
import { tasksApiRoutes } from '../../shared/tasks/tasks-api';
import { consumerPolicyOf, type Topology } from '../../shared/topology';
import { deletedWithStack, referencedIds } from '../rehearsal/deploy-order';
import {
  allows,
  type CfnTemplate,
  type ResolvedStatement,
  resourcePolicyStatements,
  TemplateResolver,
} from '../rehearsal/template';
import { cdkJsonContext, resourcesOfType, type Synthesized, synthPipeline } from './support/synth';

// What the stack promises beyond its parts: who may call what, a bus only the relay publishes
// pipeline events to, a destroy that finishes, an update that resets nothing, and the smaller
// defects of the AWS review (issue 17), each on the synthesized templates of both stages.
let sandbox: Synthesized;
let prod: Synthesized;
beforeAll(() => {
  sandbox = synthPipeline({ stage: 'sandbox', alarmEmail: 'ops@example.com' });
  prod = synthPipeline({ stage: 'prod', alarmEmail: 'ops@example.com' });
});

const deployment = { region: 'us-east-1', account: '123456789012', queueUrl: (n: string) => n };
const resolverOf = (s: Synthesized) =>
  new TemplateResolver(s.json as unknown as CfnTemplate, { ...deployment, stackName: s.stack.stackName });
const stages = () =>
  [
    ['sandbox', sandbox],
    ['prod', prod],
  ] as const;

/** The statements of one managed policy, resolved. */
function managedPolicyStatements(s: Synthesized, id: string): ResolvedStatement[] {
  const resolver = resolverOf(s);
  const doc = s.json.Resources[id]?.Properties?.PolicyDocument as { Statement: Record<string, unknown>[] };
  return doc.Statement.map((st) => ({
    effect: String(st.Effect),
    actions: [st.Action].flat().map(String),
    resources: [resolver.resolve(st.Resource)].flat().map(String),
  }));
}

/** The execute-api ARN API Gateway authorizes a call of `route` against (path parameters filled in). */
function invokeArn(s: Synthesized, route: { resource: string; method: string }): string {
  const [apiId] = resourcesOfType(s, 'AWS::ApiGateway::RestApi')[0] ?? [''];
  const path = route.resource
    .replace('{taskId}', '0b9c3a52-4f5e-4a8e-9d55-7d2f0f3c1e11')
    .replace('{consumer}', 'notify');
  return `arn:aws:execute-api:us-east-1:123456789012:${apiId}/${apiStageName}/${route.method}${path}`;
}

describe('who may do what', () => {
  const policyId = (s: Synthesized, name: 'Reviewer' | 'Operator') => {
    const found = resourcesOfType(s, 'AWS::IAM::ManagedPolicy').find(([id]) =>
      id.startsWith(`ApiAccess${name}`),
    );
    if (!found) throw new Error(`no ${name} managed policy`);
    return found[0];
  };

  it.each([
    ['Reviewer', tasksApiRoutes, opsApiRoutes(topology.consumerNames)],
    ['Operator', opsApiRoutes(topology.consumerNames), tasksApiRoutes],
  ] as const)(
    'the %s policy allows exactly its own routes, and none of the other job’s',
    (name, own, other) => {
      for (const [stage, s] of stages()) {
        const statements = managedPolicyStatements(s, policyId(s, name));
        expect(
          statements.flatMap((st) => st.actions),
          stage,
        ).toEqual(['execute-api:Invoke']);
        for (const route of own) {
          expect(
            allows(statements, 'execute-api:Invoke', invokeArn(s, route)),
            `${stage} ${route.method} ${route.resource}`,
          ).toBe(true);
        }
        for (const route of other) {
          expect(
            allows(statements, 'execute-api:Invoke', invokeArn(s, route)),
            `${stage} ${route.method} ${route.resource}`,
          ).toBe(false);
        }
        // Nor any other method or path of the API.
        expect(
          allows(
            statements,
            'execute-api:Invoke',
            invokeArn(s, { method: 'DELETE', resource: '/tasks/{taskId}' }),
          ),
        ).toBe(false);
      }
    },
  );

  it('lets a reviewer list and reject tasks, and an operator do neither', () => {
    const list = { method: 'GET', resource: '/tasks' };
    const reject = { method: 'POST', resource: '/tasks/{taskId}/reject' };
    for (const [stage, s] of stages()) {
      const reviewer = managedPolicyStatements(s, policyId(s, 'Reviewer'));
      const operator = managedPolicyStatements(s, policyId(s, 'Operator'));
      for (const route of [list, reject]) {
        const arn = invokeArn(s, route);
        expect(
          allows(reviewer, 'execute-api:Invoke', arn),
          `${stage} ${route.method} ${route.resource}`,
        ).toBe(true);
        expect(
          allows(operator, 'execute-api:Invoke', arn),
          `${stage} ${route.method} ${route.resource}`,
        ).toBe(false);
      }
    }
  });

  it('outputs both policies’ ARNs, for attaching them to people and roles', () => {
    for (const [, s] of stages()) {
      const outputs = s.json.Outputs as Record<string, { Value: unknown }>;
      expect(outputs.ReviewerPolicyArn?.Value).toEqual({ Ref: policyId(s, 'Reviewer') });
      expect(outputs.OperatorPolicyArn?.Value).toEqual({ Ref: policyId(s, 'Operator') });
    }
  });

  it('takes no reviewer, rejecter or withdrawer from the request body: the caller is the one recorded', () => {
    for (const [, s] of stages()) {
      const models = resourcesOfType(s, 'AWS::ApiGateway::Model').map(([, m]) =>
        JSON.stringify(m.Properties?.Schema),
      );
      // A model may name one only to refuse it: `not: {}` is a schema no value satisfies.
      const refused = /"(approvedBy|withdrawnBy|rejectedBy)":\{"not":\{\}\}/;
      const all = models.join('\n');
      expect(all).toMatch(refused);
      expect(all.replaceAll(new RegExp(refused, 'g'), '')).not.toMatch(/approvedBy|withdrawnBy|rejectedBy/);
    }
  });

  it('lets only the relay’s role put pipeline events on the bus: anyone else is denied, whatever their IAM says', () => {
    for (const [stage, s] of stages()) {
      const resolver = resolverOf(s);
      const [busId] = resourcesOfType(s, 'AWS::Events::EventBus')[0] ?? [''];
      const busArn = resolver.getAtt(busId, 'Arn');
      const statements = resourcePolicyStatements(resolver, busArn);
      const relayRole = resolver.getAtt(
        s.stack.getLogicalId(s.stack.pipeline.relay.function.role?.node.defaultChild as never),
        'Arn',
      );
      const someoneElse = 'arn:aws:iam::123456789012:role/admin';
      const denied = (principal: string, source: string) =>
        statements.some(
          (st) =>
            st.effect === 'Deny' &&
            allows([{ ...st, effect: 'Allow' }], 'events:PutEvents', busArn, {
              'events:source': [source],
              'aws:PrincipalArn': [principal],
            }),
        );
      expect(denied(someoneElse, topology.source), stage).toBe(true);
      expect(denied(someoneElse, 'content.forged'), stage).toBe(true);
      expect(denied(relayRole, topology.source), stage).toBe(false);
      // Other sources are not ours to police: no rule of ours matches them.
      expect(denied(someoneElse, 'billing.invoices'), stage).toBe(false);
      expect(pipelineSourceFamily(topology.source)).toBe('content.*');
    }
  });
});

describe('a destroy that finishes, an update that resets nothing', () => {
  it('retains nothing that refers to a resource the stack deletes (so nothing deleted is still in use)', () => {
    for (const [stage, s] of stages()) {
      const resources = s.json.Resources;
      const dangling = Object.entries(resources)
        .filter(([, r]) => !deletedWithStack(r))
        .flatMap(([id, r]) =>
          // A log group's name may spell another resource's id (API Gateway's execution logs):
          // a name, which outlives what it names; anything else referred to is in use.
          [...referencedIds({ ...r.Properties, LogGroupName: undefined })]
            .filter((ref) => resources[ref] && deletedWithStack(resources[ref]))
            .map((ref) => `${id} (${r.Type}) -> ${ref} (${resources[ref]?.Type})`),
        );
      expect(dangling, stage).toEqual([]);
    }
  });

  it('prod keeps its database as a final snapshot, behind deletion protection; a sandbox deletes it', () => {
    const clusterOf = (s: Synthesized) => resourcesOfType(s, 'AWS::RDS::DBCluster')[0]?.[1];
    expect(clusterOf(prod)).toMatchObject({
      DeletionPolicy: 'Snapshot',
      Properties: { DeletionProtection: true },
    });
    expect(clusterOf(sandbox)).toMatchObject({ DeletionPolicy: 'Delete' });
    // The cluster's network and credentials go with it: nothing retained is left without them.
    for (const type of [
      'AWS::EC2::VPC',
      'AWS::RDS::DBSubnetGroup',
      'AWS::SecretsManager::Secret',
      'AWS::RDS::DBInstance',
    ]) {
      for (const [id, r] of resourcesOfType(prod, type))
        expect(deletedWithStack(r), `${type} ${id}`).toBe(true);
    }
  });

  it('an update that changes settings replaces no stateful resource and changes none of its properties', () => {
    const updated = synthPipeline({
      stage: 'sandbox',
      alarmEmail: 'ops@example.com',
      roleCredentialsVersion: '2',
      apiRatePerSecond: 250,
      relaySweepMinutes: 30,
    });
    const stateful = [
      'AWS::SQS::Queue',
      'AWS::DynamoDB::Table',
      'AWS::RDS::DBCluster',
      'AWS::Events::EventBus',
      'AWS::Events::Archive',
      'AWS::S3::Bucket',
      'AWS::Lambda::EventSourceMapping',
      'AWS::SecretsManager::Secret',
    ];
    for (const type of stateful) {
      const before = Object.fromEntries(resourcesOfType(sandbox, type));
      const after = Object.fromEntries(resourcesOfType(updated, type));
      expect(Object.keys(after).sort(), type).toEqual(Object.keys(before).sort());
      for (const id of Object.keys(before)) expect(after[id], `${type} ${id}`).toEqual(before[id]);
    }
    // Nothing in the template holds the relay's runtime state: the run lease lives in PostgreSQL
    // (relay_lease), wake-ups in the queue above; no rule's State is switched at run time.
    for (const [, rule] of resourcesOfType(updated, 'AWS::Events::Rule')) {
      expect(rule.Properties?.State ?? 'ENABLED').toBe('ENABLED');
    }
  });

  it('keeps cdk.context.json (a deploy writes it: account lookups) out of git', () => {
    const ignored = readFileSync(join(projectRoot, '.gitignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim());
    expect(ignored).toContain('cdk.context.json');
  });
});

describe('retries a person need not watch', () => {
  it('refuses to build a consumer whose queue would forget a message before its retries end', () => {
    const variant: Topology = {
      ...topology,
      consumers: {
        ...topology.consumers,
        notify: {
          ...consumerPolicyOf(topology, 'notify'),
          queue: { ...consumerPolicyOf(topology, 'notify').queue, retentionSeconds: 3_600 },
        },
      },
    };
    const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
    const settings = parseSettings((k) => app.node.tryGetContext(k));

    expect(() => new PipelineStack(app, 'ForgetfulQueue', { settings, topology: variant })).toThrow(
      /consumer notify: its queue.retentionSeconds 3600 must cover the longest a failing message takes to reach its DLQ/,
    );
  });
});

describe('smaller defects of the AWS review', () => {
  it('gives the bus archive no empty KmsKeyIdentifier (some Regions refuse "")', () => {
    for (const [, s] of stages()) {
      const [, archive] = resourcesOfType(s, 'AWS::Events::Archive')[0] ?? [];
      expect(archive?.Properties).not.toHaveProperty('KmsKeyIdentifier');
    }
  });

  it('grants no action no function calls (rds-data:BatchExecuteStatement, secretsmanager:DescribeSecret)', () => {
    for (const [, s] of stages()) {
      const actions = resourcesOfType(s, 'AWS::IAM::Policy').flatMap(([, p]) =>
        (
          (p.Properties?.PolicyDocument as { Statement?: { Action: unknown }[] } | undefined)?.Statement ?? []
        ).flatMap((st) => [st.Action].flat()),
      );
      expect(actions).toContain('rds-data:ExecuteStatement');
      expect(actions).not.toContain('rds-data:BatchExecuteStatement');
      expect(actions).not.toContain('secretsmanager:DescribeSecret');
    }
  });

  it('sends every function’s logs, CDK’s own handlers included, to a log group with a retention', () => {
    for (const [stage, s] of stages()) {
      const groups = Object.fromEntries(resourcesOfType(s, 'AWS::Logs::LogGroup'));
      for (const [id, fn] of resourcesOfType(s, 'AWS::Lambda::Function')) {
        const target = (fn.Properties?.LoggingConfig as { LogGroup?: { Ref?: string } } | undefined)?.LogGroup
          ?.Ref;
        expect(target, `${stage} ${id} logs to a group of the stack`).toBeDefined();
        expect(groups[target as string]?.Properties?.RetentionInDays, `${stage} ${id}`).toBeGreaterThan(0);
      }
    }
  });

  it('creates the API’s execution-log group, with a retention, before the stage that writes to it', () => {
    for (const [stage, s] of stages()) {
      const [apiId] = resourcesOfType(s, 'AWS::ApiGateway::RestApi')[0] ?? [''];
      const found = resourcesOfType(s, 'AWS::Logs::LogGroup').find(([, g]) =>
        String(JSON.stringify(g.Properties?.LogGroupName)).includes('API-Gateway-Execution-Logs_'),
      );
      expect(found, stage).toBeDefined();
      const [groupId, group] = found as NonNullable<typeof found>;
      expect(group.Properties?.LogGroupName).toEqual({
        'Fn::Join': ['', ['API-Gateway-Execution-Logs_', { Ref: apiId }, `/${apiStageName}`]],
      });
      expect(group.Properties?.RetentionInDays).toBeGreaterThan(0);
      const [, stageResource] = resourcesOfType(s, 'AWS::ApiGateway::Stage')[0] ?? [];
      expect(stageResource?.DependsOn, stage).toContain(groupId);
    }
  });

  it('says truly what records a consumer bucket’s object calls (CloudTrail data events, off by default)', () => {
    const buckets = [...sandbox.stack.pipeline.consumerResources.values()].flatMap((resources) =>
      [...resources.values()].flatMap((r) => (r instanceof ConsumerBucket ? [r.bucket as IConstruct] : [])),
    );
    expect(buckets).not.toEqual([]);
    for (const bucket of buckets) {
      const reasons = bucket.node.metadata
        .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
        .flatMap((m) => Object.entries(m.data as Record<string, string>))
        .filter(([id]) => id.includes('AwsSolutions-S1'))
        .map(([, reason]) => reason);
      expect(reasons).toHaveLength(1);
      expect(reasons[0]).toMatch(/data events/);
      expect(reasons[0]).toMatch(/off by default/);
      expect(reasons[0]).not.toMatch(/CloudTrail records the API calls\./);
    }
  });
});
