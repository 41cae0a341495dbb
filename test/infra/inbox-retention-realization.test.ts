import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { consumerNames, topology } from '../../functions/topology';
import { inboxSettingsVariable } from '../../shared/consumers/consumer-deps';
import { consumerEnv } from '../../shared/consumers/contract';
import { inboxSettingsFor } from '../../shared/inbox/settings';
import { type ConsumerName, consumerPolicyOf } from '../../shared/topology';
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
    logicalId(c.deadLetters),
    ...s.stack.pipeline.fanout.targets
      .filter((t) => t.consumer === consumer)
      .map((t) => logicalId(t.deadLetterQueue)),
  ].map((id) => propertiesOf(s, id).MessageRetentionPeriod as number);
  const targetAges = resourcesOfType(s, 'AWS::Events::Rule').flatMap(([, r]) =>
    (
      (r.Properties?.Targets ?? []) as {
        Arn: { 'Fn::GetAtt': string[] };
        RetryPolicy: Record<string, number>;
      }[]
    )
      .filter((t) => t.Arn['Fn::GetAtt'][0] === logicalId(c.queue))
      .map((t) => t.RetryPolicy.MaximumEventAgeInSeconds as number),
  );
  const archives = resourcesOfType(s, 'AWS::Events::Archive').map(
    ([, r]) => r.Properties?.RetentionDays as number,
  );
  return {
    queueSeconds,
    consumerQueueSeconds: propertiesOf(s, logicalId(c.queue)).MessageRetentionPeriod as number,
    targetAge: Math.max(...targetAges),
    archiveSeconds: Math.max(...archives) * day,
  };
}

describe('the inbox retention covers what the stack deploys', () => {
  it('every DLQ (its queue’s and its rule targets’) keeps messages as long as its consumer policy says, the archive as the topology says', () => {
    for (const consumer of consumerNames) {
      const { queueSeconds } = realizedPaths(consumer);
      expect(queueSeconds.length).toBeGreaterThan(1);
      for (const seconds of queueSeconds)
        expect(seconds).toBe(consumerPolicyOf(topology, consumer).deadLetterRetentionSeconds);
    }
    for (const [, archive] of resourcesOfType(s, 'AWS::Events::Archive')) {
      expect(archive.Properties?.RetentionDays).toBe(topology.archiveRetentionDays);
    }
  });

  it('a consumer’s queue keeps a message past its retry budget, and its DLQ keeps one longer than the queue', () => {
    for (const consumer of consumerNames) {
      const p = realizedPaths(consumer);
      const policy = consumerPolicyOf(topology, consumer);
      expect(p.consumerQueueSeconds).toBeGreaterThanOrEqual(
        policy.maxEventAgeSeconds + policy.backoff.maxMs / 1000,
      );
      // SQS keeps a standard queue's message in its DLQ by its first enqueue time (AWS's advice:
      // a DLQ's retention longer than its queue's).
      expect(p.queueSeconds[0]).toBeGreaterThan(p.consumerQueueSeconds);
    }
  });

  it("a processed record outlives an archive replay's delivery redriven from its queue at the last moment", () => {
    for (const consumer of consumerNames) {
      const p = realizedPaths(consumer);
      const longest =
        topology.relay.maxEventAgeSeconds +
        p.archiveSeconds +
        p.targetAge +
        // the longest the consumer's queue keeps a message it hands over again and again
        p.consumerQueueSeconds +
        Math.max(...p.queueSeconds);
      expect(inboxSettingsFor(topology, consumer).retentionSeconds, consumer).toBeGreaterThanOrEqual(longest);
    }
  });
});

describe('each consumer function’s inbox settings', () => {
  it('are its topology’s, written into INBOX_SETTINGS by the stack, with the inbox index’s shards', () => {
    for (const consumer of consumerNames) {
      const c = s.stack.pipeline.consumers.get(consumer);
      if (!c) throw new Error(`no ${consumer} consumer`);
      const env = (
        propertiesOf(s, logicalId(c.function)).Environment as { Variables: Record<string, string> }
      ).Variables;
      expect(JSON.parse(env[consumerEnv.inboxSettings] ?? 'null'), consumer).toEqual({
        ...inboxSettingsFor(topology, consumer),
        openIndexShards: topology.inbox.openIndexShards,
      });
      // What the function parses from it at its cold start.
      expect(inboxSettingsVariable.safeParse(env[consumerEnv.inboxSettings]).success, consumer).toBe(true);
    }
  });
});
