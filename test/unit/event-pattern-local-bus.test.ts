import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { FaultInjector, noFaults } from '../../infra/local/faults';
import { LocalBus } from '../../infra/local/local-bus';
import { assertValidRules, InvalidEventPatternError } from '../../shared/events/event-pattern';
import type { RuleSpec } from '../../shared/topology';

// EventBridge refuses a rule whose pattern it does not accept (PutRule answers
// InvalidEventPatternException); the local bus refuses it when it starts, before it opens
// its journal or listens, so a bad topology fails at once instead of routing wrongly.

const parents: string[] = [];
afterEach(() => {
  for (const dir of parents.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function busWith(rules: readonly RuleSpec[]) {
  const parent = mkdtempSync(join(tmpdir(), 'bus-pattern-'));
  parents.push(parent);
  const dir = join(parent, 'bus');
  const bus = new LocalBus({
    busName: topology.busName,
    rules,
    retry: () => ({ maxAttempts: 1, baseMs: 1, maxMs: 1, maxAgeMs: 1_000 }),
    maxRequestBytes: topology.relay.maxRequestBytes,
    faults: new FaultInjector(noFaults, 1),
    dir,
    invoke: async () => undefined,
  });
  return { bus, dir };
}

const badRule: RuleSpec = {
  name: 'bad-rule',
  description: 'a rule EventBridge would refuse',
  pattern: { source: [topology.source], detail: { count: [{ numeric: ['>', 10, '<', 1] }] } },
  targets: ['index'],
};

describe('the local bus checks the topology rules at start', () => {
  it('refuses to start with a rule EventBridge would refuse, with its message, and creates nothing', async () => {
    const { bus, dir } = busWith([...topology.rules, badRule]);
    const started = bus.start();
    await expect(started).rejects.toBeInstanceOf(InvalidEventPatternError);
    await expect(started).rejects.toThrow(
      'Event pattern is not valid. Reason: Bottom must be less than top (rule bad-rule)',
    );
    expect(bus.endpoint).toBe('');
    expect(existsSync(dir)).toBe(false);
  });

  it('starts with the topology rules, which EventBridge accepts', async () => {
    expect(() => assertValidRules(topology.rules)).not.toThrow();
    const { bus } = busWith(topology.rules);
    await expect(bus.start()).resolves.toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await bus.stop(100);
  });
});
