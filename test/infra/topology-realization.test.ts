import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import type { ContentPipeline } from '../../infra/aws/content-pipeline';
import { PipelineStack } from '../../infra/aws/pipeline-stack';
import { parseSettings } from '../../infra/aws/settings';
import { type ConsumerName, consumerPolicyOf, type Topology } from '../../shared/topology';
import { cdkJsonContext, resourcesOfType, type Synthesized, synthPipeline } from './support/synth';

interface RealizedRule {
  readonly name: string;
  readonly pattern: unknown;
  readonly targets: ConsumerName[];
}

/** Reads the rules back out of a template: name, pattern, and which consumer each target is. */
function realizedRules(s: Pick<Synthesized, 'json'>, functionIds: Map<string, ConsumerName>): RealizedRule[] {
  return resourcesOfType(s, 'AWS::Events::Rule')
    .filter(([, r]) => r.Properties?.EventPattern !== undefined)
    .map(([, r]) => ({
      name: r.Properties?.Name as string,
      pattern: r.Properties?.EventPattern,
      targets: ((r.Properties?.Targets ?? []) as { Arn: { 'Fn::GetAtt': [string, string] } }[]).map((t) => {
        const consumer = functionIds.get(t.Arn['Fn::GetAtt'][0]);
        if (!consumer) throw new Error(`rule ${String(r.Properties?.Name)} targets a non-consumer`);
        return consumer;
      }),
    }));
}

/** Each consumer's queue's logical id: what its rules target. */
function consumerFunctionIds(stack: PipelineStack): Map<string, ConsumerName> {
  return new Map(
    [...stack.pipeline.consumers.values()].map((c) => [
      stack.getLogicalId(c.queue.node.defaultChild as never),
      c.name,
    ]),
  );
}

/** The rules a stack should have: the topology's, under the stack's stage-qualified names. */
const expected = (t: Pick<Topology, 'rules'>, pipeline: Pick<ContentPipeline, 'ruleName'>): RealizedRule[] =>
  t.rules.map((r) => ({ name: pipeline.ruleName(r.name), pattern: r.pattern, targets: [...r.targets] }));

describe('the AWS stack realizes shared/topology', () => {
  let s: Synthesized;
  beforeAll(() => {
    s = synthPipeline();
  });

  it('has exactly the topology rules: names, patterns and target consumers', () => {
    expect(realizedRules(s, consumerFunctionIds(s.stack))).toEqual(expected(topology, s.stack.pipeline));
  });

  it('has exactly one function per topology consumer, its queue a target of some rule', () => {
    expect([...s.stack.pipeline.consumers.keys()].sort()).toEqual(Object.keys(topology.consumers).sort());
    const targeted = new Set(topology.rules.flatMap((r) => r.targets));
    expect([...targeted].sort()).toEqual(Object.keys(topology.consumers).sort());
  });

  it('has one rule dead-letter queue per consumer a rule targets, and one queue with its DLQ per consumer, every DLQ alarmed', () => {
    const targets = new Set(topology.rules.flatMap((r) => r.targets)).size;
    const consumers = Object.keys(topology.consumers).length;
    // ...and the relay's wake queue, which holds no event (only "run now" or "run then").
    expect(resourcesOfType(s, 'AWS::SQS::Queue')).toHaveLength(targets + 2 * consumers + 1);
    const queueAlarms = resourcesOfType(s, 'AWS::CloudWatch::Alarm').filter(
      ([, a]) => a.Properties?.MetricName === 'ApproximateNumberOfMessagesVisible',
    );
    expect(queueAlarms).toHaveLength(targets + consumers);
    // Every consumer's queue hands what it never got handled to a DLQ of its own.
    const redrives = resourcesOfType(s, 'AWS::SQS::Queue')
      .map(([, q]) =>
        JSON.stringify(
          (q.Properties?.RedrivePolicy as { deadLetterTargetArn?: unknown } | undefined)?.deadLetterTargetArn,
        ),
      )
      .filter((d) => d !== undefined);
    expect(new Set(redrives).size).toBe(consumers);
    expect(
      resourcesOfType(s, 'AWS::Lambda::EventInvokeConfig').map(([, c]) => c.Properties?.DestinationConfig),
    ).toEqual(resourcesOfType(s, 'AWS::Lambda::EventInvokeConfig').map(() => undefined));
  });

  it('gives every rule target a DLQ, so a failed invocation lands where an alarm stays red (no FailedInvocations alarm)', () => {
    const targets = topology.rules.flatMap((r) => r.targets.map((consumer) => ({ rule: r.name, consumer })));
    const rules = resourcesOfType(s, 'AWS::Events::Rule').filter(([, r]) => r.Properties?.EventPattern);
    const ruleTargets = rules.flatMap(([, r]) => (r.Properties?.Targets ?? []) as Record<string, unknown>[]);
    expect(ruleTargets).toHaveLength(targets.length);
    for (const t of ruleTargets) expect(t.DeadLetterConfig, JSON.stringify(t.Id)).toBeDefined();
    const alarms = resourcesOfType(s, 'AWS::CloudWatch::Alarm').map(([, a]) => a.Properties ?? {});
    expect(alarms.filter((a) => a.MetricName === 'FailedInvocations')).toEqual([]);
  });

  it('follows a changed topology: another rule, other targets, other retry figures', () => {
    const variant: Topology = {
      ...topology,
      consumers: {
        ...topology.consumers,
        archive: {
          ...consumerPolicyOf(topology, 'archive'),
          targetRetry: { maximumRetryAttempts: 7, maximumEventAgeSeconds: 3600 },
          queue: { batchSize: 4, maxConcurrency: 7, retentionSeconds: 5 * 24 * 3600 },
        },
      },
      rules: [
        ...topology.rules,
        {
          name: 'content-withdrawn-archive',
          description: 'Keep withdrawals too',
          pattern: { source: [topology.source], 'detail-type': [topology.eventTypes.withdrawn] },
          targets: ['archive'],
        },
      ],
    };
    const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
    const settings = parseSettings((k) => app.node.tryGetContext(k));
    const stack = new PipelineStack(app, 'Variant', { settings, topology: variant });
    const json = Template.fromStack(stack).toJSON() as Synthesized['json'];
    expect(realizedRules({ json }, consumerFunctionIds(stack))).toEqual(expected(variant, stack.pipeline));
    const archiveTarget = JSON.stringify(
      resourcesOfType({ json }, 'AWS::Events::Rule').find(
        ([, r]) => r.Properties?.Name === stack.pipeline.ruleName('content-withdrawn-archive'),
      ),
    );
    expect(archiveTarget).toContain('"MaximumRetryAttempts":7');
    expect(JSON.stringify(resourcesOfType({ json }, 'AWS::Lambda::EventSourceMapping'))).toContain(
      '"BatchSize":4,',
    );
    expect(JSON.stringify(resourcesOfType({ json }, 'AWS::Lambda::EventSourceMapping'))).toContain(
      '"ScalingConfig":{"MaximumConcurrency":7}',
    );
    expect(JSON.stringify(resourcesOfType({ json }, 'AWS::SQS::Queue'))).toContain(
      `"MessageRetentionPeriod":${5 * 24 * 3600}`,
    );
  });
});
