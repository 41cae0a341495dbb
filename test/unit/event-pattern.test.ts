import { EventBridgeClient, PutEventsCommand, type PutEventsRequestEntry } from '@aws-sdk/client-eventbridge';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import type { OutboundEvent } from '../../shared/events/cloud-event';
import {
  InvalidEventPatternError,
  matchesPattern,
  operatorsOf,
  supportedOperators,
} from '../../shared/events/event-pattern';
import { EventBridgePublisher } from '../../shared/outbox/eventbridge-publisher';
import type { EventType, RulePattern } from '../../shared/topology';
import { subscriberNames } from '../support/topology-expectations';

/**
 * An EventBridge event as a target receives it, with `detail` to taste
 * (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-events-structure.html).
 */
function busEvent(detail: Record<string, unknown>, top: Record<string, unknown> = {}) {
  return {
    version: '0',
    id: '6a7e8feb-b491-4cf7-a9f1-bf3703467718',
    'detail-type': 'Thing Happened',
    source: 'test.source',
    account: '123456789012',
    time: '2017-12-22T18:43:48Z',
    region: 'us-west-1',
    resources: ['arn:aws:ec2:us-west-1:123456789012:instance/i-1234567890abcdef0'],
    detail,
    ...top,
  };
}

const matches = (pattern: RulePattern, detail: Record<string, unknown>) =>
  matchesPattern({ detail: pattern }, busEvent(detail));

describe('event pattern: exact values', () => {
  it('matches when the value is one of the listed values, case-sensitively', () => {
    const pattern = { state: ['running', 'pending'] };
    expect(matches(pattern, { state: 'running' })).toBe(true);
    expect(matches(pattern, { state: 'pending' })).toBe(true);
    expect(matches(pattern, { state: 'Running' })).toBe(false);
    expect(matches(pattern, { state: 'stopped' })).toBe(false);
  });

  it('matches an event array when any of its elements is listed', () => {
    const pattern = { tags: ['b', 'z'] };
    expect(matches(pattern, { tags: ['a', 'b', 'c'] })).toBe(true);
    expect(matches(pattern, { tags: ['a', 'c'] })).toBe(false);
    expect(matches(pattern, { tags: [] })).toBe(false);
  });

  it('compares types strictly: a number does not match its string and null matches only null', () => {
    expect(matches({ n: [5] }, { n: 5 })).toBe(true);
    expect(matches({ n: [5] }, { n: '5' })).toBe(false);
    expect(matches({ n: [null] }, { n: null })).toBe(true);
    expect(matches({ n: [null] }, {})).toBe(false);
    expect(matches({ n: [''] }, { n: '' })).toBe(true);
    expect(matches({ n: [''] }, { n: null })).toBe(false);
  });

  it('does not match a field the event lacks', () => {
    expect(matches({ state: ['running'] }, { other: 'running' })).toBe(false);
  });

  it('ignores event fields the pattern does not name', () => {
    expect(matches({ state: ['running'] }, { state: 'running', extra: 1, more: { deep: true } })).toBe(true);
  });
});

describe('event pattern: structure', () => {
  it('requires every key of the pattern to match (AND across keys)', () => {
    const pattern = { state: ['running'], zone: ['a'] };
    expect(matches(pattern, { state: 'running', zone: 'a' })).toBe(true);
    expect(matches(pattern, { state: 'running', zone: 'b' })).toBe(false);
    expect(matches(pattern, { state: 'stopped', zone: 'a' })).toBe(false);
  });

  it('matches nested objects level by level, and not a leaf where the pattern expects an object', () => {
    const pattern = { instance: { placement: { zone: ['us-east-1a'] } } };
    expect(matches(pattern, { instance: { placement: { zone: 'us-east-1a' } } })).toBe(true);
    expect(matches(pattern, { instance: { placement: { zone: 'us-east-1b' } } })).toBe(false);
    expect(matches(pattern, { instance: { placement: 'us-east-1a' } })).toBe(false);
    expect(matches(pattern, { instance: {} })).toBe(false);
  });

  it('matches top-level fields of the event and detail together', () => {
    const pattern = { source: ['test.source'], 'detail-type': ['Thing Happened'], detail: { n: [1] } };
    expect(matchesPattern(pattern, busEvent({ n: 1 }))).toBe(true);
    expect(matchesPattern(pattern, busEvent({ n: 1 }, { source: 'other.source' }))).toBe(false);
    expect(matchesPattern(pattern, busEvent({ n: 2 }))).toBe(false);
  });

  it('matches a nested pattern against an array of objects when one element matches all of it', () => {
    // event-ruler "crushes out" arrays of objects, but never matches fields from different elements.
    const employees = [
      { firstName: 'John', lastName: 'Doe' },
      { firstName: 'Anna', lastName: 'Smith' },
    ];
    expect(matches({ employees: { firstName: ['Anna'] } }, { employees })).toBe(true);
    expect(matches({ employees: { firstName: ['Anna'], lastName: ['Smith'] } }, { employees })).toBe(true);
    expect(matches({ employees: { firstName: ['Anna'], lastName: ['Doe'] } }, { employees })).toBe(false);
    expect(matches({ employees: { firstName: ['Peter'] } }, { employees })).toBe(false);
  });

  it('matches the resources array when any element is listed', () => {
    const pattern = { resources: ['arn:aws:ec2:us-west-1:123456789012:instance/i-1234567890abcdef0', 'x'] };
    expect(matchesPattern(pattern, busEvent({}))).toBe(true);
    expect(matchesPattern(pattern, busEvent({}, { resources: [] }))).toBe(false);
  });
});

describe('event pattern: prefix, suffix and equals-ignore-case', () => {
  it('prefix matches strings that start with it, case-sensitively, and never non-strings', () => {
    const pattern = { region: [{ prefix: 'us-' }] };
    expect(matches(pattern, { region: 'us-east-1' })).toBe(true);
    expect(matches(pattern, { region: 'US-east-1' })).toBe(false);
    expect(matches(pattern, { region: 'eu-west-1' })).toBe(false);
    expect(matches({ n: [{ prefix: '1' }] }, { n: 12 })).toBe(false);
  });

  it('suffix matches strings that end with it, case-sensitively', () => {
    const pattern = { file: [{ suffix: '.png' }] };
    expect(matches(pattern, { file: 'cat.png' })).toBe(true);
    expect(matches(pattern, { file: 'cat.PNG' })).toBe(false);
    expect(matches(pattern, { file: 'cat.png.txt' })).toBe(false);
  });

  it('prefix and suffix with equals-ignore-case ignore case', () => {
    expect(
      matches({ service: [{ prefix: { 'equals-ignore-case': 'eventb' } }] }, { service: 'EventBridge' }),
    ).toBe(true);
    expect(
      matches({ service: [{ prefix: { 'equals-ignore-case': 'eventb' } }] }, { service: 'Lambda' }),
    ).toBe(false);
    expect(matches({ file: [{ suffix: { 'equals-ignore-case': '.png' } }] }, { file: 'CAT.PNG' })).toBe(true);
    expect(matches({ file: [{ suffix: { 'equals-ignore-case': '.png' } }] }, { file: 'cat.jpg' })).toBe(
      false,
    );
  });

  it('equals-ignore-case matches the whole string in any case, and nothing longer', () => {
    const pattern = { name: [{ 'equals-ignore-case': 'alice' }] };
    expect(matches(pattern, { name: 'ALICE' })).toBe(true);
    expect(matches(pattern, { name: 'Alice' })).toBe(true);
    expect(matches(pattern, { name: 'Alice B' })).toBe(false);
  });

  it('a prefix matches an event array when any element starts with it', () => {
    expect(matches({ arns: [{ prefix: 'arn:aws:s3' }] }, { arns: ['arn:aws:ec2:x', 'arn:aws:s3:::b'] })).toBe(
      true,
    );
    expect(matches({ arns: [{ prefix: 'arn:aws:s3' }] }, { arns: ['arn:aws:ec2:x'] })).toBe(false);
  });
});

describe('event pattern: anything-but', () => {
  it('matches any value but the excluded one, strings and numbers alike', () => {
    expect(matches({ state: [{ 'anything-but': 'initializing' }] }, { state: 'running' })).toBe(true);
    expect(matches({ state: [{ 'anything-but': 'initializing' }] }, { state: 'initializing' })).toBe(false);
    expect(matches({ limit: [{ 'anything-but': 123 }] }, { limit: 124 })).toBe(true);
    expect(matches({ limit: [{ 'anything-but': 123 }] }, { limit: 123 })).toBe(false);
  });

  it('excludes every value of a list', () => {
    const pattern = { state: [{ 'anything-but': ['stopped', 'overloaded'] }] };
    expect(matches(pattern, { state: 'running' })).toBe(true);
    expect(matches(pattern, { state: 'stopped' })).toBe(false);
    expect(matches(pattern, { state: 'overloaded' })).toBe(false);
  });

  it('does not match a missing field, but does match null', () => {
    const pattern = { state: [{ 'anything-but': 'initializing' }] };
    expect(matches(pattern, {})).toBe(false);
    expect(matches(pattern, { state: null })).toBe(true);
    expect(matchesPattern({ detail: { nested: pattern } }, busEvent({}))).toBe(false);
  });

  it('excludes by prefix, suffix and wildcard', () => {
    expect(matches({ state: [{ 'anything-but': { prefix: 'init' } }] }, { state: 'running' })).toBe(true);
    expect(matches({ state: [{ 'anything-but': { prefix: 'init' } }] }, { state: 'initializing' })).toBe(
      false,
    );
    expect(matches({ file: [{ 'anything-but': { suffix: '.png' } }] }, { file: 'a.jpg' })).toBe(true);
    expect(matches({ file: [{ 'anything-but': { suffix: '.png' } }] }, { file: 'a.png' })).toBe(false);
    expect(matches({ path: [{ 'anything-but': { wildcard: '*/lib/*' } }] }, { path: 'src/app/x.js' })).toBe(
      true,
    );
    expect(matches({ path: [{ 'anything-but': { wildcard: '*/lib/*' } }] }, { path: 'src/lib/x.js' })).toBe(
      false,
    );
  });
});

describe('event pattern: exists', () => {
  it('exists true matches a leaf of any value, null included', () => {
    const pattern = { state: [{ exists: true }] };
    expect(matches(pattern, { state: 'pending' })).toBe(true);
    expect(matches(pattern, { state: 0 })).toBe(true);
    expect(matches(pattern, { state: ['a'] })).toBe(true);
    expect(matches(pattern, { state: null })).toBe(true);
  });

  it('exists true does not match an absent field, an absent parent, an object or an empty array', () => {
    const pattern = { state: [{ exists: true }] };
    expect(matches(pattern, {})).toBe(false);
    expect(matches(pattern, { state: { inner: 1 } })).toBe(false);
    expect(matches(pattern, { state: [] })).toBe(false);
    expect(matchesPattern({ detail: { parent: pattern } }, busEvent({}))).toBe(false);
  });

  it('exists false matches an absent field and a field whose parent is absent', () => {
    const pattern = { 'c-count': [{ exists: false }] };
    expect(matches(pattern, { state: 'running' })).toBe(true);
    expect(matchesPattern({ detail: { level1: { level2: pattern } } }, busEvent({ level1: 'leaf' }))).toBe(
      true,
    );
    expect(matchesPattern({ missing: { deeper: pattern } }, busEvent({}))).toBe(true);
  });

  it('exists false does not match a present leaf, even null or an empty string', () => {
    const pattern = { 'c-count': [{ exists: false }] };
    expect(matches(pattern, { 'c-count': 5 })).toBe(false);
    expect(matches(pattern, { 'c-count': null })).toBe(false);
    expect(matches(pattern, { 'c-count': '' })).toBe(false);
  });

  it('exists false matches a field that is an object or [], since exists only sees leaves (event-ruler README)', () => {
    expect(matches({ 'c-count': [{ exists: false }] }, { 'c-count': { c1: 100 } })).toBe(true);
    expect(matches({ 'c-count': [{ exists: false }] }, { 'c-count': [] })).toBe(true);
  });
});

describe('event pattern: numeric', () => {
  it('matches a range with both bounds, inclusive and exclusive as written', () => {
    const pattern = { count: [{ numeric: ['>', 0, '<=', 5] }] };
    expect(matches(pattern, { count: 0 })).toBe(false);
    expect(matches(pattern, { count: 0.5 })).toBe(true);
    expect(matches(pattern, { count: 5 })).toBe(true);
    expect(matches(pattern, { count: 5.01 })).toBe(false);
  });

  it('supports =, <, >= on their own', () => {
    expect(matches({ x: [{ numeric: ['=', 301.8] }] }, { x: 3.018e2 })).toBe(true);
    expect(matches({ x: [{ numeric: ['=', 301.8] }] }, { x: 301.81 })).toBe(false);
    expect(matches({ x: [{ numeric: ['<', 10] }] }, { x: 9 })).toBe(true);
    expect(matches({ x: [{ numeric: ['<', 10] }] }, { x: 10 })).toBe(false);
    expect(matches({ x: [{ numeric: ['>=', 10] }] }, { x: 10 })).toBe(true);
    expect(matches({ x: [{ numeric: ['>=', 10] }] }, { x: 9.99 })).toBe(false);
  });

  it('matches JSON numbers only: a numeric string, null or a missing field never match', () => {
    const pattern = { count: [{ numeric: ['>', 0] }] };
    expect(matches(pattern, { count: '300' })).toBe(false);
    expect(matches(pattern, { count: null })).toBe(false);
    expect(matches(pattern, {})).toBe(false);
  });

  it('matches an event array of numbers when any element is in range', () => {
    const pattern = { scores: [{ numeric: ['>=', 90] }] };
    expect(matches(pattern, { scores: [10, 95] })).toBe(true);
    expect(matches(pattern, { scores: [10, 20] })).toBe(false);
  });
});

describe('event pattern: wildcard', () => {
  it('* matches any run of characters, anchored at both ends', () => {
    const pattern = { arn: [{ wildcard: 'arn:aws:events:us-east-1:*:event-bus/*' }] };
    expect(matches(pattern, { arn: 'arn:aws:events:us-east-1:123456789012:event-bus/default' })).toBe(true);
    expect(matches(pattern, { arn: 'arn:aws:events:eu-west-1:123456789012:event-bus/default' })).toBe(false);
    expect(matches(pattern, { arn: 'xarn:aws:events:us-east-1:1:event-bus/b' })).toBe(false);
    expect(matches(pattern, { arn: 'arn:aws:events:us-east-1::event-bus/' })).toBe(true);
  });

  it('treats regular-expression characters in the pattern literally', () => {
    const pattern = { file: [{ wildcard: 'report.(v1)+*.csv' }] };
    expect(matches(pattern, { file: 'report.(v1)+final.csv' })).toBe(true);
    expect(matches(pattern, { file: 'reportX(v1)+final.csv' })).toBe(false);
    expect(matches(pattern, { file: 'report.v1v1final.csv' })).toBe(false);
  });

  it('never matches a non-string', () => {
    expect(matches({ n: [{ wildcard: '*' }] }, { n: 5 })).toBe(false);
    expect(matches({ n: [{ wildcard: '*' }] }, { n: 'anything' })).toBe(true);
  });
});

describe('event pattern: $or', () => {
  const pattern = {
    source: ['test.source'],
    $or: [{ detail: { a: ['x'] } }, { detail: { b: [{ numeric: ['<', 10] }] } }],
  };

  it('matches when any branch matches, alongside the other keys', () => {
    expect(matchesPattern(pattern, busEvent({ a: 'x' }))).toBe(true);
    expect(matchesPattern(pattern, busEvent({ b: 3 }))).toBe(true);
    expect(matchesPattern(pattern, busEvent({ a: 'y', b: 30 }))).toBe(false);
  });

  it('still requires the keys outside $or', () => {
    expect(matchesPattern(pattern, busEvent({ a: 'x' }, { source: 'other' }))).toBe(false);
  });

  it('works nested inside an object', () => {
    const nested = { detail: { $or: [{ a: ['x'] }, { b: ['y'] }], c: ['z'] } };
    expect(matchesPattern(nested, busEvent({ b: 'y', c: 'z' }))).toBe(true);
    expect(matchesPattern(nested, busEvent({ b: 'y', c: 'q' }))).toBe(false);
  });
});

describe('operatorsOf', () => {
  it('lists the operators a pattern uses, exact for literal values', () => {
    const used = operatorsOf({
      source: ['a'],
      detail: {
        p: [{ prefix: 'x' }],
        s: [{ suffix: 'x' }],
        i: [{ 'equals-ignore-case': 'x' }],
        ab: [{ 'anything-but': 'x' }],
        e: [{ exists: true }],
        n: [{ numeric: ['>', 1] }],
        w: [{ wildcard: 'x*' }],
        ip: [{ cidr: '10.0.0.0/24' }],
        x: [{ exactly: 'x' }],
      },
      $or: [{ a: ['x'] }, { b: ['y'] }],
    });
    expect([...used].sort()).toEqual([...supportedOperators].sort());
  });

  // This table once listed cidr as unsupported: EventBridge supports it (README "IP Address Matching").
  it.each([
    ['cidr', { ip: [{ cidr: '10.0.0.0/24' }] }],
    ['cidr nested', { detail: { ip: [{ cidr: '10.0.0.0/24' }] } }],
    ['cidr in an $or branch', { $or: [{ a: ['x'] }, { ip: [{ cidr: '10.0.0.0/24' }] }] }],
  ])('accepts %s', (_, pattern) => {
    expect(operatorsOf(pattern)).toContain('cidr');
  });

  it('rejects an operator EventBridge does not have, with its message', () => {
    expect(() => operatorsOf({ detail: { t: [{ contains: 'x' }] } })).toThrow(InvalidEventPatternError);
    expect(() => operatorsOf({ detail: { t: [{ contains: 'x' }] } })).toThrow(
      'Event pattern is not valid. Reason: Unrecognized match type contains',
    );
  });

  it.each([
    ['a bare string value', { source: 'a' }, '"source" must be an object or an array'],
    ['a bare number value', { detail: { n: 5 } }, '"n" must be an object or an array'],
    [
      '$or with one branch',
      { $or: [{ a: ['x'] }] },
      'There must have at least 2 Objects in $or relationship.',
    ],
    ['$or that is not an array', { $or: { a: ['x'] } }, 'It must be an Array followed with $or.'],
    [
      '$or with a non-object branch',
      { $or: [{ a: ['x'] }, ['b']] },
      'Only JSON object is allowed in array of $or relationship.',
    ],
    [
      'two operators in one object',
      { a: [{ prefix: 'x', suffix: 'y' }] },
      'Only one key allowed in match expression',
    ],
    ['an empty operator object', { a: [{}] }, 'Match expression name not found'],
  ])("rejects a malformed pattern with EventBridge's reason: %s", (_, pattern, reason) => {
    expect(() => operatorsOf(pattern as RulePattern)).toThrow(InvalidEventPatternError);
    expect(() => operatorsOf(pattern as RulePattern)).toThrow(
      `Event pattern is not valid. Reason: ${reason}`,
    );
  });

  it('rejects a pattern that is not an object', () => {
    expect(() => operatorsOf([] as unknown as RulePattern)).toThrow('Reason: Filter is not an object');
    expect(() => operatorsOf(null as unknown as RulePattern)).toThrow(InvalidEventPatternError);
  });
});

// --- the topology's rules -------------------------------------------------------------------

const eventBridge = mockClient(EventBridgeClient);

/** The EventBridge event the relay's production publisher produces for one outbox row of `type`. */
async function publishedEvent(type: EventType) {
  let entry: PutEventsRequestEntry | undefined;
  eventBridge.on(PutEventsCommand).callsFake((input) => {
    entry = input.Entries?.[0];
    return { FailedEntryCount: 0, Entries: [{ EventId: 'bus-1' }] };
  });
  const publisher = new EventBridgePublisher(new EventBridgeClient({ region: 'us-east-1' }), {
    busName: topology.busName,
    source: topology.source,
    maxEntries: topology.relay.putEventsMaxEntries,
    maxRequestBytes: topology.relay.maxRequestBytes,
    concurrency: 1,
  });
  const row: OutboundEvent = {
    eventId: '00000000-0000-4000-8000-000000000001',
    eventType: type,
    aggregateId: '11111111-1111-4111-8111-111111111111',
    aggregateVersion: 2,
    payload: { taskId: '11111111-1111-4111-8111-111111111111', version: 2, title: 't' },
    createdAt: new Date('2026-11-30T00:00:00Z'),
  };
  await publisher.publish([row]);
  if (!entry) throw new Error('the publisher sent no entry');
  return {
    version: '0',
    id: 'bus-1',
    'detail-type': entry.DetailType,
    source: entry.Source,
    account: '000000000000',
    time: '2026-11-30T00:00:00Z',
    region: 'us-east-1',
    resources: [],
    detail: JSON.parse(entry.Detail ?? 'null'),
  };
}

const allTypes = Object.values(topology.eventTypes);

describe('topology rules', () => {
  beforeEach(() => eventBridge.reset());

  it.each(topology.rules.map((r) => [r.name, r] as const))(
    'rule %s uses only supported operators',
    (_, rule) => {
      const used = operatorsOf(rule.pattern);
      expect(used.size).toBeGreaterThan(0);
      for (const op of used) expect(supportedOperators).toContain(op);
    },
  );

  it.each(topology.rules.map((r) => [r.name, r] as const))(
    'rule %s matches the published event of exactly its own event type',
    async (_, rule) => {
      const ownType = (rule.pattern['detail-type'] as string[] | undefined)?.[0];
      expect(allTypes).toContain(ownType);
      for (const type of allTypes) {
        expect(matchesPattern(rule.pattern, await publishedEvent(type)), `${rule.name} vs ${type}`).toBe(
          type === ownType,
        );
      }
    },
  );

  it('fans each event type out to the consumers that subscribe to it, and to no other', async () => {
    const targetsOf = async (type: EventType) => {
      const event = await publishedEvent(type);
      return topology.rules
        .filter((r) => matchesPattern(r.pattern, event))
        .flatMap((r) => r.targets)
        .sort();
    };
    const subscribers = (type: EventType) => subscriberNames(type).sort();
    expect(await targetsOf(topology.eventTypes.approved)).toEqual(subscribers(topology.eventTypes.approved));
    expect(await targetsOf(topology.eventTypes.withdrawn)).toEqual(
      subscribers(topology.eventTypes.withdrawn),
    );
    expect(await targetsOf(topology.eventTypes.rejected)).toEqual(subscribers(topology.eventTypes.rejected));
  });

  it('matches no rule for an event from another source', async () => {
    const event = { ...(await publishedEvent(topology.eventTypes.approved)), source: 'someone.else' };
    expect(topology.rules.filter((r) => matchesPattern(r.pattern, event))).toEqual([]);
  });
});
