import { describe, expect, it } from 'vitest';
import { consumerNames, topology } from '../../functions/topology';
import { leaseLength } from '../../shared/inbox/process-once';
import { inboxDefaults, inboxSettingsFor } from '../../shared/inbox/settings';
import { type ConsumerName, consumerPolicyOf, type Topology } from '../../shared/topology';

const day = 24 * 3600;

type RetentionTopology = Pick<Topology, 'consumers' | 'relay' | 'archiveRetentionDays'>;

/**
 * Every path by which a delivery of an event can come back to a consumer after the event was
 * first published, with (a lower bound of) the longest it can take, in seconds. Stated here on
 * its own, from the topology's numbers, so the test checks the derivation rather than repeat it:
 * - the relay re-publishes an event whose PutEvents answer was lost, until its maximum age;
 * - EventBridge retries a delivery to the consumer's queue up to the target's maximum event age,
 *   then puts the event in the rule's DLQ, where an ops redrive can take it for its retention;
 * - the consumer's queue hands a message over again and again while it keeps it (its retention),
 *   then (or once it was received as often as its redrive policy allows) its DLQ keeps it,
 *   redrivable for the DLQ's retention;
 * - the bus archive keeps every event for replay for its retention, and a replayed delivery can
 *   take every path above again.
 */
function redeliveryPaths(consumer: ConsumerName, t: RetentionTopology): [string, number][] {
  const c = consumerPolicyOf(t, consumer);
  const relay = t.relay.maxEventAgeSeconds;
  const target = c.targetRetry.maximumEventAgeSeconds;
  const consumerQueue = c.queue.retentionSeconds;
  const queue = c.deadLetterRetentionSeconds;
  const archive = t.archiveRetentionDays * day;
  return [
    ['relay re-publish', relay],
    ['EventBridge target retries', relay + target],
    ['rule DLQ redrive', relay + target + queue],
    ["the consumer's queue", relay + target + consumerQueue],
    ["the consumer's queue's DLQ redrive", relay + target + consumerQueue + queue],
    ['archive replay', relay + archive + target + consumerQueue + queue],
  ];
}

function expectRetentionCovers(t: RetentionTopology, label: string): void {
  for (const consumer of consumerNames) {
    const settings = inboxSettingsFor(t, consumer);
    for (const [path, seconds] of redeliveryPaths(consumer, t)) {
      expect(settings.retentionSeconds, `${label}: ${consumer} PROCESSED vs ${path}`).toBeGreaterThanOrEqual(
        seconds,
      );
      // A late copy of a DEAD event must find it DEAD, not start it afresh.
      expect(settings.deadRetentionSeconds, `${label}: ${consumer} DEAD vs ${path}`).toBeGreaterThanOrEqual(
        seconds,
      );
    }
  }
}

describe('inbox retention, derived from the topology', () => {
  it('keeps a PROCESSED record at least as long as every path a delivery can come back by', () => {
    expectRetentionCovers(topology, 'topology');
    // Today: 14 days of queue retention and 30 of archive put it past six weeks.
    expect(inboxSettingsFor(topology, 'index').retentionSeconds).toBeGreaterThanOrEqual(44 * day);
  });

  it('follows each path: lengthen any one and the retention still covers them all', () => {
    const stretch = (patch: (t: Mutable) => void): RetentionTopology => {
      const t = structuredClone({
        consumers: topology.consumers,
        relay: topology.relay,
        archiveRetentionDays: topology.archiveRetentionDays,
      }) as unknown as Mutable;
      patch(t);
      return t as unknown as RetentionTopology;
    };
    const longer: Record<string, RetentionTopology> = {
      'relay max age': stretch((t) => {
        t.relay.maxEventAgeSeconds *= 10;
      }),
      'archive retention': stretch((t) => {
        t.archiveRetentionDays *= 10;
      }),
      'target max event age': stretch((t) => {
        for (const c of Object.values(t.consumers)) c.targetRetry.maximumEventAgeSeconds *= 10;
      }),
      "consumer's queue retention": stretch((t) => {
        for (const c of Object.values(t.consumers)) c.queue.retentionSeconds *= 3;
      }),
      'dead-letter queue retention': stretch((t) => {
        for (const c of Object.values(t.consumers)) c.deadLetterRetentionSeconds *= 10;
      }),
    };
    for (const [label, t] of Object.entries(longer)) expectRetentionCovers(t, `longer ${label}`);
  });

  it('takes the failure limits and backoff from the topology, the rest from defaults, overrides last', () => {
    const settings = inboxSettingsFor(topology, 'archive', { leaseMs: 5_000 });
    expect(settings).toMatchObject({
      maxPermanentAttempts: consumerPolicyOf(topology, 'archive').maxPermanentAttempts,
      maxEventAgeMs: consumerPolicyOf(topology, 'archive').maxEventAgeSeconds * 1000,
      backoff: consumerPolicyOf(topology, 'archive').backoff,
      leaseMs: 5_000,
      leaseGraceMs: inboxDefaults.leaseGraceMs,
    });
  });

  it('sizes a lease from the time the invocation has left, capped at the maximum lease', () => {
    const settings = inboxSettingsFor(topology, 'index', { leaseMs: 30_000, leaseGraceMs: 2_000 });
    expect(leaseLength(settings, 1_000, 1_000 + 5_000)).toBe(7_000);
    expect(leaseLength(settings, 1_000, 1_000 + 900_000)).toBe(30_000);
    expect(leaseLength(settings, 1_000, 500)).toBe(2_000);
    expect(leaseLength(settings, 1_000)).toBe(30_000);
  });
});

interface Mutable {
  relay: { maxEventAgeSeconds: number };
  archiveRetentionDays: number;
  consumers: Record<
    ConsumerName,
    {
      targetRetry: { maximumEventAgeSeconds: number };
      queue: { retentionSeconds: number };
      deadLetterRetentionSeconds: number;
    }
  >;
}
