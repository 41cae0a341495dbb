import { describe, expect, it } from 'vitest';
import { leaseLength } from '../../shared/inbox/process-once';
import { inboxDefaults, inboxSettingsFor, longestRedeliveryWindowSeconds } from '../../shared/inbox/settings';
import { topology } from '../../shared/topology';

describe('inbox retention and leases', () => {
  it('keeps processed records (TTL) longer than the longest redelivery window of the topology', () => {
    const window = longestRedeliveryWindowSeconds(topology);
    // Target retry (24 h) then Lambda async retries (6 h), plus the relay's re-publish schedule.
    expect(window).toBeGreaterThanOrEqual(30 * 3600);
    expect(inboxDefaults.retentionSeconds).toBe(8 * 24 * 3600);
    expect(inboxDefaults.retentionSeconds).toBeGreaterThan(window);
    for (const consumer of ['index', 'notify', 'archive'] as const) {
      expect(inboxSettingsFor(consumer).retentionSeconds).toBeGreaterThan(window);
    }
  });

  it('the window follows the topology: a longer retry policy outgrows the retention', () => {
    const stretched = {
      relay: topology.relay,
      consumers: {
        ...topology.consumers,
        notify: {
          ...topology.consumers.notify,
          targetRetry: { maximumRetryAttempts: 185, maximumEventAgeSeconds: 8 * 24 * 3600 },
        },
      },
    };
    expect(longestRedeliveryWindowSeconds(stretched)).toBeGreaterThan(inboxDefaults.retentionSeconds);
  });

  it('takes attempts and backoff from the topology, the rest from defaults, overrides last', () => {
    const settings = inboxSettingsFor('archive', { leaseMs: 5_000 });
    expect(settings).toMatchObject({
      maxAttempts: topology.consumers.archive.maxAttempts,
      backoff: topology.consumers.archive.backoff,
      leaseMs: 5_000,
      leaseGraceMs: inboxDefaults.leaseGraceMs,
      deadRetentionSeconds: inboxDefaults.deadRetentionSeconds,
    });
  });

  it('sizes a lease from the time the invocation has left, capped at the maximum lease', () => {
    const settings = inboxSettingsFor('index', { leaseMs: 30_000, leaseGraceMs: 2_000 });
    expect(leaseLength(settings, 1_000, 1_000 + 5_000)).toBe(7_000);
    expect(leaseLength(settings, 1_000, 1_000 + 900_000)).toBe(30_000);
    expect(leaseLength(settings, 1_000, 500)).toBe(2_000);
    expect(leaseLength(settings, 1_000)).toBe(30_000);
  });
});
