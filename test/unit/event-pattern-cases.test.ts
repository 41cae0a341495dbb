import { describe, expect, it } from 'vitest';
import {
  compileEventPattern,
  InvalidEventPatternError,
  matchesPattern,
} from '../../shared/events/event-pattern';
import type { RulePattern } from '../../shared/topology';
import cidrTest from '../fixtures/event-ruler/cidr-test.json';
import docs from '../fixtures/event-ruler/eventbridge-docs.json';
import recorded from '../fixtures/event-ruler/eventbridge-recorded.json';
import compilerTest from '../fixtures/event-ruler/json-rule-compiler-test.json';
import rulerTest from '../fixtures/event-ruler/ruler-test.json';

// Table-driven cases transcribed from AWS's matcher (aws/event-ruler), from runs against
// EventBridge itself (LocalStack's parity suite) and from the EventBridge User Guide. Each
// fixture file names its source; each case names its test, template or page.

/** The reason EventBridge gives for refusing `pattern`, or undefined when it accepts it. */
function refusal(pattern: unknown): string | undefined {
  try {
    compileEventPattern(pattern);
    return undefined;
  } catch (err) {
    if (!(err instanceof InvalidEventPatternError)) throw err;
    expect(err.message).toBe(`Event pattern is not valid. Reason: ${err.reason}`);
    return err.reason;
  }
}

const asPattern = (p: unknown) => p as RulePattern;

describe('cases recorded against EventBridge (localstack/localstack event_pattern_templates)', () => {
  it.each(recorded.matching.map((c) => [c.name, c] as const))('%s', (_, c) => {
    expect(matchesPattern(asPattern(c.pattern), c.event)).toBe(c.match);
  });

  it.each(recorded.invalid.map((c) => [c.name, c] as const))('%s is refused with its reason', (_, c) => {
    expect(refusal(c.pattern)).toBe(c.reason);
  });
});

describe('event-ruler RulerTest.java', () => {
  const events = rulerTest.events as Record<string, unknown>;

  it.each(rulerTest.cases.map((c, i) => [`${i}: ${c.test}`, c] as const))('%s', (_, c) => {
    expect(matchesPattern(asPattern(c.pattern), events[c.event])).toBe(c.match);
  });

  for (const group of [rulerTest.anythingBut, rulerTest.equalsIgnoreCase, rulerTest.wildcard]) {
    it.each(group.events.map((e, i) => [i, e] as const))(`${group.test}: event %i`, (_, e) => {
      expect(matchesPattern(asPattern(group.pattern), e.event)).toBe(e.match);
    });
  }
});

describe('event-ruler JsonRuleCompilerTest.java and CIDRTest.java: what EventBridge accepts', () => {
  it.each(compilerTest.valid.map((c) => [JSON.stringify(c.pattern), c] as const))('accepts %s', (_, c) => {
    expect(refusal(c.pattern)).toBeUndefined();
  });

  it.each(compilerTest.invalid.map((c) => [JSON.stringify(c.pattern), c] as const))('refuses %s', (_, c) => {
    expect(refusal(c.pattern)).toBe(c.reason);
  });
});

/** An address from its hexadecimal form in CIDRTest: 8 digits are IPv4, 32 are IPv6. */
function address(hex: string): string {
  if (hex.length === 8) return (hex.match(/../g) ?? []).map((b) => Number.parseInt(b, 16)).join('.');
  return (hex.match(/.{4}/g) ?? []).join(':');
}

/** The address `delta` away from `hex`, or undefined past either end of its family. */
function neighbour(hex: string, delta: 1n | -1n): string | undefined {
  const next = BigInt(`0x${hex}`) + delta;
  if (next < 0n || next >= 1n << BigInt(hex.length * 4)) return undefined;
  return address(next.toString(16).padStart(hex.length, '0'));
}

describe('event-ruler CIDRTest.java: cidr ranges and IP-address values', () => {
  it.each(cidrTest.ranges.map((r) => [r.cidr, r] as const))(
    '%s covers exactly its lowest to its highest address',
    (_, r) => {
      const pattern = { ip: [{ cidr: r.cidr }] };
      expect(matchesPattern(pattern, { ip: address(r.low) })).toBe(true);
      expect(matchesPattern(pattern, { ip: address(r.high) })).toBe(true);
      for (const outside of [neighbour(r.low, -1n), neighbour(r.high, 1n)]) {
        if (outside !== undefined) expect(matchesPattern(pattern, { ip: outside }), outside).toBe(false);
      }
    },
  );

  it.each(cidrTest.singleAddresses)('the value %s matches that address and not its neighbours', (literal) => {
    const pattern = { ip: [literal] };
    expect(matchesPattern(pattern, { ip: literal })).toBe(true);
    // IPv4 neighbours are easy to write by hand; the IPv6 ones are checked through `addresses`.
    const octets = literal.split('.');
    if (octets.length === 4) {
      const hex = octets.map((o) => Number(o).toString(16).padStart(2, '0')).join('');
      for (const outside of [neighbour(hex, -1n), neighbour(hex, 1n)]) {
        if (outside !== undefined) expect(matchesPattern(pattern, { ip: outside }), outside).toBe(false);
      }
    }
  });

  it.each(cidrTest.addresses.map((a) => [a.literal, a] as const))(
    '%s and its fully written form are the same address',
    (_, a) => {
      expect(matchesPattern({ ip: [a.literal] }, { ip: address(a.hex) })).toBe(true);
      const next = neighbour(a.hex, 1n);
      if (next) expect(matchesPattern({ ip: [a.literal] }, { ip: next })).toBe(false);
    },
  );

  it('a value that only looks like IPv6 is matched as a string (testInvalidIPMatchedByIPv6Regex)', () => {
    const c = cidrTest.looksLikeIpv6;
    expect(matchesPattern(c.pattern, c.event)).toBe(c.match);
  });
});

describe('EventBridge User Guide examples', () => {
  it.each(docs.cases.map((c) => [c.name, c] as const))('%s', (_, c) => {
    expect(matchesPattern(asPattern(c.pattern), c.event), c.doc).toBe(c.match);
  });
});
