import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { inboxSettingsFor } from '../../shared/inbox/settings';
import { type ConsumerName, consumerNames, topology } from '../../shared/topology';
import { propertiesOf, resourcesOfType, type Synthesized, synthPipeline } from './support/synth';

const day = 24 * 3600;

let s: Synthesized;
beforeAll(() => {
  s = synthPipeline({ stage: 'sandbox', alarmEmail: 'ops@example.com' });
});

const logicalId = (c: IConstruct) => s.stack.getLogicalId(c.node.defaultChild as never);

/** The numbers the deployed stack keeps a delivery by, for one consumer, read from the template. */
function realizedPaths(consumer: ConsumerName) {
  const c = s.stack.pipeline.consumers.get(consumer);
  if (!c) throw new Error(`no ${consumer} consumer`);
  const queueSeconds = [
    logicalId(s.stack.pipeline.retries.deadLetters),
    ...s.stack.pipeline.fanout.targets
      .filter((t) => t.consumer === consumer)
      .map((t) => logicalId(t.deadLetterQueue)),
  ].map((id) => propertiesOf(s, id).MessageRetentionPeriod as number);
  const invokeConfig = resourcesOfType(s, 'AWS::Lambda::EventInvokeConfig').find(
    ([, r]) => (r.Properties?.FunctionName as { Ref?: string } | undefined)?.Ref === logicalId(c.function),
  );
  const targetAges = resourcesOfType(s, 'AWS::Events::Rule').flatMap(([, r]) =>
    (
      (r.Properties?.Targets ?? []) as {
        Arn: { 'Fn::GetAtt': string[] };
        RetryPolicy: Record<string, number>;
      }[]
    )
      .filter((t) => t.Arn['Fn::GetAtt'][0] === logicalId(c.function))
      .map((t) => t.RetryPolicy.MaximumEventAgeInSeconds as number),
  );
  const archives = resourcesOfType(s, 'AWS::Events::Archive').map(
    ([, r]) => r.Properties?.RetentionDays as number,
  );
  return {
    queueSeconds,
    lambdaAge: invokeConfig?.[1].Properties?.MaximumEventAgeInSeconds as number,
    targetAge: Math.max(...targetAges),
    archiveSeconds: Math.max(...archives) * day,
  };
}

describe('the inbox retention covers what the stack deploys', () => {
  it('every DLQ and on-failure queue keeps messages as long as its consumer policy says, the archive as the topology says', () => {
    for (const consumer of consumerNames) {
      const { queueSeconds } = realizedPaths(consumer);
      expect(queueSeconds.length).toBeGreaterThan(1);
      for (const seconds of queueSeconds)
        expect(seconds).toBe(topology.consumers[consumer].deadLetterRetentionSeconds);
    }
    for (const [, archive] of resourcesOfType(s, 'AWS::Events::Archive')) {
      expect(archive.Properties?.RetentionDays).toBe(topology.archiveRetentionDays);
    }
  });

  it("a processed record outlives an archive replay's delivery redriven from its queue at the last moment", () => {
    for (const consumer of consumerNames) {
      const p = realizedPaths(consumer);
      const longest =
        topology.relay.maxEventAgeSeconds +
        p.archiveSeconds +
        p.targetAge +
        // the consumer retries' day (plus a backoff), their last re-invoke's wait in Lambda's queue
        topology.consumers[consumer].maxEventAgeSeconds +
        topology.consumers[consumer].backoff.maxMs / 1000 +
        p.lambdaAge +
        Math.max(...p.queueSeconds);
      expect(inboxSettingsFor(consumer).retentionSeconds, consumer).toBeGreaterThanOrEqual(longest);
    }
  });
});
