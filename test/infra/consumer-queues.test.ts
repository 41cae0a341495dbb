import { App, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { Consumer } from '../../infra/aws/constructs/consumer';
import { InboxTable } from '../../infra/aws/constructs/inbox-table';
import { PipelineStack } from '../../infra/aws/pipeline-stack';
import { parseSettings } from '../../infra/aws/settings';
import { queueMaxReceiveCount, queueSecondsToDeadLetter } from '../../shared/consumers/queue-delivery';
import { inboxSettingsFor } from '../../shared/inbox/settings';
import { consumerPolicyOf, type Topology } from '../../shared/topology';
import { translate } from '../fixtures/consumers/translate/consumer';
import {
  allows,
  type CfnTemplate,
  conditionsHold,
  type RequestContext,
  type ResolvedStatement,
  roleStatements,
  TemplateResolver,
} from '../rehearsal/template';
import { topologyAdding } from '../support/topology-variants';
import {
  cdkJsonContext,
  propertiesOf,
  resourcesOfType,
  type Synthesized,
  synthPipeline,
} from './support/synth';

// Issue 31: EventBridge -> SQS -> Lambda for each consumer. What the template must hold of each
// consumer's queue, for the sandbox and prod stages and for a topology with a consumer added
// through the registry (test/fixtures/consumers/translate) under a queue policy of its own.

interface Case {
  readonly stack: PipelineStack;
  readonly json: Synthesized['json'];
  readonly topology: Topology;
}

/** The fixture consumer's queue, set apart from the defaults, so a figure read from anywhere else fails. */
const translateQueue = { batchSize: 3, maxConcurrency: 5, retentionSeconds: 6 * 24 * 3600 };

const cases = new Map<string, Case>();
beforeAll(() => {
  for (const stage of ['sandbox', 'prod'] as const) {
    const s = synthPipeline({ stage, alarmEmail: 'ops@example.com' });
    cases.set(stage, { stack: s.stack, json: s.json, topology });
  }
  const withFixture = topologyAdding(translate);
  const variant: Topology = {
    ...withFixture,
    consumers: {
      ...withFixture.consumers,
      translate: { ...translate.policy, queue: translateQueue },
    } as Topology['consumers'],
  };
  const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
  const settings = parseSettings((k) => app.node.tryGetContext(k));
  const stack = new PipelineStack(app, 'WithFixture', { settings, topology: variant });
  cases.set('a topology with an added consumer', {
    stack,
    json: Template.fromStack(stack).toJSON() as Synthesized['json'],
    topology: variant,
  });
});

const caseOf = (name: string): Case => {
  const c = cases.get(name);
  if (!c) throw new Error(`no case ${name}`);
  return c;
};
const idOf = (c: Case, construct: IConstruct) => c.stack.getLogicalId(construct.node.defaultChild as never);
const arnOf = (id: string) => ({ 'Fn::GetAtt': [id, 'Arn'] });
const consumersOf = (c: Case): Consumer[] => [...c.stack.pipeline.consumers.values()];
const roleIdOf = (c: Case, fn: { role?: IConstruct }) => idOf(c, fn.role as IConstruct);
const resolverOf = (c: Case) =>
  new TemplateResolver(c.json as unknown as CfnTemplate, {
    stackName: c.stack.stackName,
    region: 'eu-west-1',
    account: '123456789012',
    queueUrl: (name) => `https://sqs.eu-west-1.amazonaws.com/123456789012/${name}`,
  });

/** The logical ids of the rules the topology has target `consumer`. */
const rulesOf = (c: Case, consumer: string): string[] =>
  c.topology.rules
    .filter((r) => (r.targets as readonly string[]).includes(consumer))
    .map((r) => idOf(c, c.stack.pipeline.fanout.rules.get(r.name) as IConstruct));

/** The statements of the one queue policy on `queueId`. */
function queuePolicyOf(c: Case, queueId: string): Record<string, unknown>[] {
  const policies = resourcesOfType(c, 'AWS::SQS::QueuePolicy').filter(([, p]) =>
    ((p.Properties?.Queues ?? []) as { Ref?: string }[]).some((q) => q.Ref === queueId),
  );
  expect(policies, queueId).toHaveLength(1);
  const document = policies[0]?.[1].Properties?.PolicyDocument as
    | { Statement: Record<string, unknown>[] }
    | undefined;
  return document?.Statement ?? [];
}

const denyStatementOf = (c: Case, queueId: string) => {
  const deny = queuePolicyOf(c, queueId).filter((st) => st.Sid === 'OnlyItsRulesAndRedrivesSend');
  expect(deny, queueId).toHaveLength(1);
  return deny[0] as Record<string, unknown>;
};

/** Every identity statement of the stack: each role's policies and every managed policy. */
function identityStatements(c: Case): { owner: string; statements: ResolvedStatement[] }[] {
  const resolver = resolverOf(c);
  const roles = resourcesOfType(c, 'AWS::IAM::Role').map(([id]) => ({
    owner: id,
    statements: roleStatements(resolver, id),
  }));
  const managed = resourcesOfType(c, 'AWS::IAM::ManagedPolicy').map(([id, p]) => ({
    owner: id,
    statements: (
      (p.Properties?.PolicyDocument as { Statement?: Record<string, unknown>[] } | undefined)?.Statement ?? []
    ).map((st) => ({
      effect: String(st.Effect),
      actions: [st.Action].flat().map(String),
      resources: [resolver.resolve(st.Resource)].flat().map(String),
    })),
  }));
  return [...roles, ...managed];
}

const caseNames = ['sandbox', 'prod', 'a topology with an added consumer'];

describe.each(caseNames)('each consumer’s queue (%s)', (name) => {
  it('is an SQS-encrypted queue that redrives to its own DLQ after queueMaxReceiveCount receives, hides a message six function timeouts, and keeps it as its policy says', () => {
    const c = caseOf(name);
    for (const consumer of consumersOf(c)) {
      const policy = consumerPolicyOf(c.topology, consumer.name);
      const queueId = idOf(c, consumer.queue);
      const dlqId = idOf(c, consumer.deadLetters);
      const queue = c.json.Resources[queueId];
      expect(queue?.Type).toBe('AWS::SQS::Queue');
      const timeout = propertiesOf(c, idOf(c, consumer.function)).Timeout as number;
      expect(timeout).toBeGreaterThan(0);
      expect(queue?.Properties, consumer.name).toEqual({
        SqsManagedSseEnabled: true,
        RedrivePolicy: { deadLetterTargetArn: arnOf(dlqId), maxReceiveCount: queueMaxReceiveCount(policy) },
        // Lambda's advice for an SQS source: at least six times the function's timeout.
        VisibilityTimeout: 6 * timeout,
        MessageRetentionPeriod: policy.queue.retentionSeconds,
      });
      const dlq = propertiesOf(c, dlqId);
      expect(dlq.SqsManagedSseEnabled, consumer.name).toBe(true);
      // A standard queue's DLQ counts its retention from the original enqueue, so it must be longer.
      expect(dlq.MessageRetentionPeriod as number, consumer.name).toBeGreaterThan(
        policy.queue.retentionSeconds,
      );
    }
    if (name !== 'sandbox' && name !== 'prod') {
      const fixture = c.stack.pipeline.consumers.get('translate' as never);
      expect(propertiesOf(c, idOf(c, fixture?.queue as IConstruct)).MessageRetentionPeriod).toBe(
        translateQueue.retentionSeconds,
      );
    }
  });

  it('feeds its consumer’s function, and only it, through one event source mapping with the policy’s batch, concurrency and partial batch responses', () => {
    const c = caseOf(name);
    const mappings = resourcesOfType(c, 'AWS::Lambda::EventSourceMapping');
    for (const consumer of consumersOf(c)) {
      const policy = consumerPolicyOf(c.topology, consumer.name);
      const queueId = idOf(c, consumer.queue);
      const fnId = idOf(c, consumer.function);
      const fromQueue = mappings.filter(
        ([, m]) => JSON.stringify(m.Properties?.EventSourceArn) === JSON.stringify(arnOf(queueId)),
      );
      const toFunction = mappings.filter(
        ([, m]) => JSON.stringify(m.Properties?.FunctionName) === JSON.stringify({ Ref: fnId }),
      );
      expect(fromQueue.map(([id]) => id)).toEqual(toFunction.map(([id]) => id));
      expect(fromQueue.map(([, m]) => m.Properties)).toEqual([
        {
          EventSourceArn: arnOf(queueId),
          FunctionName: { Ref: fnId },
          BatchSize: policy.queue.batchSize,
          ScalingConfig: { MaximumConcurrency: policy.queue.maxConcurrency },
          FunctionResponseTypes: ['ReportBatchItemFailures'],
        },
      ]);
    }
    if (name !== 'sandbox' && name !== 'prod') {
      const fixture = c.stack.pipeline.consumers.get('translate' as never) as Consumer;
      const [, mapping] =
        mappings.find(([, m]) =>
          JSON.stringify(m.Properties?.EventSourceArn).includes(idOf(c, fixture.queue)),
        ) ?? [];
      expect(mapping?.Properties).toMatchObject({
        BatchSize: translateQueue.batchSize,
        ScalingConfig: { MaximumConcurrency: translateQueue.maxConcurrency },
      });
    }
  });

  it('is what each of its content rules targets (never the function), with the rule’s DLQ and the consumer’s retry policy', () => {
    const c = caseOf(name);
    const functionIds = new Set(consumersOf(c).map((k) => idOf(c, k.function)));
    const rules = resourcesOfType(c, 'AWS::Events::Rule').filter(([, r]) => r.Properties?.EventPattern);
    for (const [, rule] of rules) {
      for (const target of (rule.Properties?.Targets ?? []) as { Arn: { 'Fn::GetAtt': string[] } }[]) {
        expect(functionIds.has(target.Arn['Fn::GetAtt'][0] as string)).toBe(false);
      }
    }
    for (const consumer of consumersOf(c)) {
      const policy = consumerPolicyOf(c.topology, consumer.name);
      const queueId = idOf(c, consumer.queue);
      const expected = rulesOf(c, consumer.name);
      expect(expected.length, consumer.name).toBeGreaterThan(0);
      const targeting = rules.flatMap(([ruleId, r]) =>
        ((r.Properties?.Targets ?? []) as Record<string, unknown>[])
          .filter((t) => JSON.stringify(t.Arn) === JSON.stringify(arnOf(queueId)))
          .map((t) => ({ ruleId, target: t })),
      );
      expect(targeting.map((t) => t.ruleId).sort(), consumer.name).toEqual([...expected].sort());
      for (const { ruleId, target } of targeting) {
        const ruleName = [...c.stack.pipeline.fanout.rules].find(([, r]) => idOf(c, r) === ruleId)?.[0];
        const dlq = c.stack.pipeline.fanout.targets.find(
          (t) => t.rule === ruleName && t.consumer === consumer.name,
        )?.deadLetterQueue as IConstruct;
        expect(target.DeadLetterConfig).toEqual({ Arn: arnOf(idOf(c, dlq)) });
        expect(target.RetryPolicy).toEqual({
          MaximumRetryAttempts: policy.targetRetry.maximumRetryAttempts,
          MaximumEventAgeInSeconds: policy.targetRetry.maximumEventAgeSeconds,
        });
      }
    }
  });

  it('lets EventBridge send only from its own rules, and denies SendMessage to all but those rules, the ops API and the delivery audit', () => {
    const c = caseOf(name);
    const opsRole = roleIdOf(c, c.stack.pipeline.opsApi.function);
    const auditRole = roleIdOf(c, c.stack.pipeline.audit.function);
    for (const consumer of consumersOf(c)) {
      const queueId = idOf(c, consumer.queue);
      const rules = rulesOf(c, consumer.name);
      const statements = queuePolicyOf(c, queueId);
      const allows = statements.filter((st) => st.Effect === 'Allow');
      expect(allows.length, consumer.name).toBe(rules.length);
      for (const st of allows) {
        expect(st.Principal, consumer.name).toEqual({ Service: 'events.amazonaws.com' });
        expect([st.Action].flat(), consumer.name).toContain('sqs:SendMessage');
        expect(st.Resource).toEqual(arnOf(queueId));
        expect(Object.keys(st.Condition as object)).toEqual(['ArnEquals']);
      }
      expect(
        allows
          .map(
            (st) => (st.Condition as { ArnEquals: { 'aws:SourceArn': unknown } }).ArnEquals['aws:SourceArn'],
          )
          .map((arn) => (arn as { 'Fn::GetAtt': string[] })['Fn::GetAtt'][0])
          .sort(),
        consumer.name,
      ).toEqual([...rules].sort());

      const deny = denyStatementOf(c, queueId);
      expect({ ...deny, Condition: undefined }).toEqual({
        Sid: 'OnlyItsRulesAndRedrivesSend',
        Effect: 'Deny',
        Principal: { AWS: '*' },
        Action: 'sqs:SendMessage',
        Resource: arnOf(queueId),
        Condition: undefined,
      });
      const condition = deny.Condition as Record<string, Record<string, unknown[]>>;
      expect(Object.keys(condition).sort()).toEqual(['ArnNotEquals', 'ArnNotLike']);
      expect(Object.keys(condition.ArnNotEquals ?? {})).toEqual(['aws:SourceArn']);
      expect(Object.keys(condition.ArnNotLike ?? {})).toEqual(['aws:PrincipalArn']);
      expect(
        [condition.ArnNotEquals?.['aws:SourceArn']]
          .flat()
          .map((a) => (a as { 'Fn::GetAtt': string[] })['Fn::GetAtt'][0])
          .sort(),
      ).toEqual([...rules].sort());
      expect(condition.ArnNotLike?.['aws:PrincipalArn']).toEqual([arnOf(opsRole), arnOf(auditRole)]);
    }
  });

  it('has no Lambda permission, no async-invoke config and no identity policy that lets anyone invoke a consumer’s function', () => {
    const c = caseOf(name);
    const resolver = resolverOf(c);
    const everyone = identityStatements(c);
    expect(everyone.length).toBeGreaterThan(0);
    for (const consumer of consumersOf(c)) {
      const fnId = idOf(c, consumer.function);
      for (const type of ['AWS::Lambda::Permission', 'AWS::Lambda::EventInvokeConfig']) {
        const naming = resourcesOfType(c, type).filter(([, r]) =>
          JSON.stringify(r.Properties?.FunctionName).includes(`"${fnId}"`),
        );
        expect(naming, `${type} of ${consumer.name}`).toEqual([]);
      }
      const fnArn = resolver.getAtt(fnId, 'Arn');
      for (const { owner, statements } of everyone) {
        // Conditions dropped: a conditioned grant would still be a grant.
        const bare = statements.map(({ conditions: _conditions, ...st }) => st);
        for (const arn of [fnArn, `${fnArn}:$LATEST`]) {
          expect(allows(bare, 'lambda:InvokeFunction', arn), `${owner} on ${consumer.name}`).toBe(false);
        }
      }
    }
  });

  it('may be sent to by the ops API and the delivery audit, and read (receive, delete, change visibility) by its consumer’s role only', () => {
    const c = caseOf(name);
    const resolver = resolverOf(c);
    const ops = roleStatements(resolver, roleIdOf(c, c.stack.pipeline.opsApi.function));
    const audit = roleStatements(resolver, roleIdOf(c, c.stack.pipeline.audit.function));
    const reads = ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility'];
    const allQueues = resourcesOfType(c, 'AWS::SQS::Queue').map(([id]) => id);
    for (const consumer of consumersOf(c)) {
      const queueArn = resolver.getAtt(idOf(c, consumer.queue), 'Arn');
      expect(allows(ops, 'sqs:SendMessage', queueArn), `ops API -> ${consumer.name}`).toBe(true);
      expect(allows(audit, 'sqs:SendMessage', queueArn), `audit -> ${consumer.name}`).toBe(true);
      const own = roleStatements(resolver, roleIdOf(c, consumer.function));
      for (const queueId of allQueues) {
        const arn = resolver.getAtt(queueId, 'Arn');
        for (const action of reads) {
          expect(allows(own, action, arn), `${consumer.name} ${action} on ${queueId}`).toBe(
            queueId === idOf(c, consumer.queue),
          );
        }
      }
    }
  });

  it('has its DLQ alarmed once, as queue-not-empty-<consumer>-dead-letters', () => {
    const c = caseOf(name);
    const alarms = resourcesOfType(c, 'AWS::CloudWatch::Alarm');
    for (const consumer of consumersOf(c)) {
      const dlqId = idOf(c, consumer.deadLetters);
      const onDlq = alarms.filter(([, a]) =>
        JSON.stringify(a.Properties?.Dimensions ?? []).includes(`"${dlqId}"`),
      );
      expect(onDlq.map(([, a]) => a.Properties?.AlarmName)).toEqual([
        `${c.stack.stackName}-queue-not-empty-${consumer.name}-dead-letters`,
      ]);
      expect(onDlq[0]?.[1].Properties).toMatchObject({
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateNumberOfMessagesVisible',
      });
    }
  });
});

describe('the consumers’ share of the account’s concurrency (prod)', () => {
  it('leaves at least 100 of the default 1,000 unreserved: the mappings’ maximum concurrency plus the tasks API’s and the relay’s reserved', () => {
    const c = caseOf('prod');
    const reserved = (fn: IConstruct) => propertiesOf(c, idOf(c, fn)).ReservedConcurrentExecutions as number;
    const tasksApi = reserved(c.stack.pipeline.tasksApi.function);
    const relay = reserved(c.stack.pipeline.relay.function);
    // Both are reserved in prod, so the sum is not vacuous.
    expect(tasksApi).toBeGreaterThan(0);
    expect(relay).toBeGreaterThan(0);
    const consumerMax = resourcesOfType(c, 'AWS::Lambda::EventSourceMapping')
      .filter(([, m]) =>
        consumersOf(c).some(
          (k) => JSON.stringify(m.Properties?.FunctionName) === JSON.stringify({ Ref: idOf(c, k.function) }),
        ),
      )
      .map(([, m]) =>
        Number(
          (m.Properties?.ScalingConfig as { MaximumConcurrency?: number } | undefined)?.MaximumConcurrency,
        ),
      );
    // Each mapping is bounded: one without a maximum could take every unreserved execution.
    expect(consumerMax).toHaveLength(consumersOf(c).length);
    for (const max of consumerMax) expect(Number.isInteger(max)).toBe(true);
    // Any other function that reserves concurrency counts too.
    const allReserved = resourcesOfType(c, 'AWS::Lambda::Function')
      .map(([, f]) => (f.Properties?.ReservedConcurrentExecutions as number | undefined) ?? 0)
      .reduce((a, b) => a + b, 0);
    expect(allReserved).toBeGreaterThanOrEqual(tasksApi + relay);
    // The account's default concurrency and what Lambda keeps unreserved (quotas.lambdaConcurrency,
    // quotas.lambdaUnreservedMinimum): the mappings at their maximum and every reservation leave
    // the other functions (ops API, gauges, audit, migration) that much.
    const held = consumerMax.reduce((a, b) => a + b, 0) + allReserved;
    expect(1_000 - held).toBeGreaterThanOrEqual(100);
  });
});

describe('the Deny that keeps a consumer’s queue to its rules and redrives, evaluated as IAM does', () => {
  // Condition keys of one statement are ANDed, and a negated operator on a key the request
  // lacks holds (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html).
  const denied = (name: string, consumerName: string, context: RequestContext) => {
    const c = caseOf(name);
    const consumer = c.stack.pipeline.consumers.get(consumerName as never) as Consumer;
    const deny = denyStatementOf(c, idOf(c, consumer.queue));
    const resolver = resolverOf(c);
    const conditions = Object.fromEntries(
      Object.entries(deny.Condition as Record<string, Record<string, unknown>>).map(([operator, keys]) => [
        operator,
        Object.fromEntries(
          Object.entries(keys).map(([key, values]) => [key, [resolver.resolve(values)].flat().map(String)]),
        ),
      ]),
    );
    return conditionsHold(conditions, context);
  };
  const ruleArn = (name: string, rule: string) => {
    const c = caseOf(name);
    return resolverOf(c).getAtt(idOf(c, c.stack.pipeline.fanout.rules.get(rule) as IConstruct), 'Arn');
  };
  const roleArn = (name: string, fn: (c: Case) => { role?: IConstruct }) => {
    const c = caseOf(name);
    return resolverOf(c).getAtt(roleIdOf(c, fn(c)), 'Arn');
  };
  // archive takes content.approved only; content.rejected is notify's rule.
  const own = topology.rules.find((r) => (r.targets as readonly string[]).includes('archive'))
    ?.name as string;
  const other = topology.rules.find((r) => !(r.targets as readonly string[]).includes('archive'))
    ?.name as string;

  it.each(['sandbox', 'prod'])(
    '%s: EventBridge delivering for the queue’s own rule is not denied',
    (name) => {
      expect(own).toBeDefined();
      expect(denied(name, 'archive', { 'aws:SourceArn': [ruleArn(name, own)] })).toBe(false);
    },
  );

  it.each(['sandbox', 'prod'])('%s: the ops API’s and the delivery audit’s roles are not denied', (name) => {
    const ops = roleArn(name, (c) => c.stack.pipeline.opsApi.function);
    const audit = roleArn(name, (c) => c.stack.pipeline.audit.function);
    expect(denied(name, 'archive', { 'aws:PrincipalArn': [ops] })).toBe(false);
    expect(denied(name, 'archive', { 'aws:PrincipalArn': [audit] })).toBe(false);
  });

  it.each(['sandbox', 'prod'])('%s: another role of the account, with no source ARN, is denied', (name) => {
    const tasksApi = roleArn(name, (c) => c.stack.pipeline.tasksApi.function);
    expect(denied(name, 'archive', { 'aws:PrincipalArn': [tasksApi] })).toBe(true);
    expect(denied(name, 'archive', { 'aws:PrincipalArn': ['arn:aws:iam::123456789012:role/Admin'] })).toBe(
      true,
    );
  });

  it.each(['sandbox', 'prod'])('%s: EventBridge delivering for another rule is denied', (name) => {
    expect(other).toBeDefined();
    expect(denied(name, 'archive', { 'aws:SourceArn': [ruleArn(name, other)] })).toBe(true);
    expect(
      denied(name, 'archive', {
        'aws:SourceArn': ['arn:aws:events:eu-west-1:123456789012:rule/someone-elses'],
      }),
    ).toBe(true);
  });
});

describe('a consumer given a longer function timeout', () => {
  /** A Consumer on its own, in a stack of its own, with `timeoutSeconds` and the fixture's policy. */
  function build(timeoutSeconds: number) {
    const stack = new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Alone');
    return new Consumer(stack, 'Translate', {
      definition: translate,
      policy: translate.policy,
      inboxSettings: { ...inboxSettingsFor(topologyAdding(translate), 'translate'), openIndexShards: 4 },
      inbox: new InboxTable(stack, 'Inbox', {
        removalPolicy: RemovalPolicy.DESTROY,
        deletionProtection: false,
      }),
      effect: { environment: {}, grant: () => {} },
      timeout: Duration.seconds(timeoutSeconds),
      logRetention: RetentionDays.ONE_WEEK,
      removalPolicy: RemovalPolicy.DESTROY,
    });
  }

  it('is refused when its receives, spaced by the longer run and visibility, outlast its queue’s retention', () => {
    // 60 s: the policy's own check; 300 s: six times it is a 30-minute visibility per receive.
    expect(queueSecondsToDeadLetter(translate.policy, 300)).toBeGreaterThan(
      translate.policy.queue.retentionSeconds,
    );
    expect(() => build(60)).not.toThrow();
    expect(() => build(300)).toThrow(
      /consumer translate: its queue keeps a message 604800 s, less than the \d+ s/,
    );
  });
});
