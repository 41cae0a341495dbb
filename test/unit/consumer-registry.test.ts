import { describe, expect, it } from 'vitest';
import { consumers } from '../../functions/consumers/registry';
import { consumerNames, topology, topologyWith } from '../../functions/topology';
import {
  consumerRegistry,
  defaultConsumerPolicy,
  defineConsumer,
} from '../../shared/consumers/define-consumer';
import { bucket, database, table, topic } from '../../shared/consumers/resources';
import { type EventType, eventTypes, ruleNameOf } from '../../shared/events/event-types';
import { translate as fixture } from '../fixtures/consumers/translate/consumer';

// A consumer is declared once, in its folder (functions/consumers/<name>/consumer.ts), and listed
// once in the registry: the topology's consumers and its rules' targets come from there.

/** A consumer of no resources that subscribes to `types`: a registry of this test's own. */
const subscriber = (name: string, ...types: EventType[]) =>
  defineConsumer({ name, description: `${name} (a test's)`, subscribes: types, folder: fixture.folder });

describe('the consumer registry', () => {
  it('is where the topology takes its consumers and their policies from', () => {
    expect(consumerNames).toEqual(consumers.map((c) => c.name));
    for (const c of consumers) expect(topology.consumers[c.name]).toEqual(c.policy);
  });

  it('routes each event type to the consumers that subscribe to it, in the registry’s order, one rule per type', () => {
    const t = topologyWith([
      subscriber('b', eventTypes.approved, eventTypes.rejected),
      subscriber('a', eventTypes.approved),
      subscriber('c', eventTypes.withdrawn, eventTypes.approved),
    ]);
    expect(t.rules.map((r) => [r.name, r.pattern, r.targets])).toEqual([
      [
        'content-approved',
        { source: [topology.source], 'detail-type': ['content.approved'] },
        ['b', 'a', 'c'],
      ],
      ['content-withdrawn', { source: [topology.source], 'detail-type': ['content.withdrawn'] }, ['c']],
      ['content-rejected', { source: [topology.source], 'detail-type': ['content.rejected'] }, ['b']],
    ]);
    expect(t.consumerNames).toEqual(['b', 'a', 'c']);
  });

  it('routes the project’s events as its consumers subscribe, whatever consumers it has', () => {
    for (const rule of topology.rules) {
      const type = (rule.pattern['detail-type'] as string[])[0] as EventType;
      expect(rule.targets, type).toEqual(
        consumers.filter((c) => c.subscribes.includes(type)).map((c) => c.name),
      );
    }
    for (const c of consumers)
      for (const type of c.subscribes)
        expect(topology.rules.find((r) => r.name === ruleNameOf(type))?.targets, c.name).toContain(c.name);
  });

  it('takes a consumer added to it into the rules of the events it subscribes to, and nowhere else', () => {
    const base = [
      subscriber('a', eventTypes.approved, eventTypes.withdrawn),
      subscriber('b', eventTypes.rejected),
    ];
    const variant = topologyWith([...base, fixture]);
    expect(Object.keys(variant.consumers)).toEqual(['a', 'b', 'translate']);
    expect(variant.registry.map((c) => c.name)).toEqual(['a', 'b', 'translate']);
    const targets = Object.fromEntries(variant.rules.map((r) => [r.name, r.targets]));
    expect(targets).toEqual({
      'content-approved': ['a', 'translate'],
      'content-withdrawn': ['a'],
      'content-rejected': ['b'],
    });
    expect(variant.consumers.translate).toEqual({
      description: 'Translates each approved version (a test fixture)',
      ...defaultConsumerPolicy,
      maxPermanentAttempts: 1,
    });
  });

  it('has no rule for an event type nobody subscribes to', () => {
    expect(topologyWith([subscriber('a', eventTypes.approved)]).rules.map((r) => r.name)).toEqual([
      'content-approved',
    ]);
  });

  it('checks a variant as it checks the project’s: a name twice, two counters of one name, no consumer', () => {
    expect(() =>
      topologyWith([subscriber('a', eventTypes.approved), subscriber('a', eventTypes.rejected)]),
    ).toThrow(/lists a more than once/);
    expect(() => topologyWith([fixture, fixture])).toThrow(/translate more than once/);
    expect(() => topologyWith([])).toThrow(/registry is empty/);
  });
});

describe('defineConsumer', () => {
  const folder = new URL('.', import.meta.url);
  const spec = { name: 'translate', description: 'x', subscribes: [eventTypes.approved], folder } as const;
  const words = table({ description: 'x', partitionKey: 'id', perEvent: { reads: 0, writes: 1, itemKb: 1 } });
  const tasks = database({ description: 'x', role: 'taskReader', perEvent: { calls: 1 } });
  const counter = (resource: string, where?: Record<string, string>) => ({
    label: 'x',
    delta: () => 1,
    counts: { resource, where },
  });

  it.each([
    ['a name that cannot name an AWS resource', { ...spec, name: 'Translate_1' }, /name must be/],
    ['a name too long for its function', { ...spec, name: 'a'.repeat(21) }, /name must be/],
    ['no description', { ...spec, description: ' ' }, /needs a description/],
    ['no event', { ...spec, subscribes: [] }, /at least one event type/],
    ['an event type that does not exist', { ...spec, subscribes: ['content.archived'] }, /not an event type/],
    ['an event type twice', { ...spec, subscribes: [eventTypes.approved, eventTypes.approved] }, /twice/],
    [
      'a resource key that cannot name a variable',
      { ...spec, resources: { 'my-words': words } },
      /camelCase key/,
    ],
    ['two databases', { ...spec, resources: { a: tasks, b: tasks } }, /one role only/],
    [
      'a counter of no resource',
      { ...spec, resources: { words }, counters: { n: counter('nope') } },
      /not its table/,
    ],
    [
      'a counter of the database',
      { ...spec, resources: { tasks }, counters: { n: counter('tasks') } },
      /not its table/,
    ],
    [
      'a filtered counter of a bucket',
      {
        ...spec,
        resources: { files: bucket({ description: 'x', perEvent: { puts: 1 } }) },
        counters: { n: counter('files', { status: 'approved' }) },
      },
      /only a table's items can be filtered/,
    ],
  ])('refuses %s', (_, bad, message) => {
    expect(() => defineConsumer(bad as never)).toThrow(message);
  });

  it('refuses a registry that lists a name twice', () => {
    expect(() => consumerRegistry([fixture, fixture])).toThrow(/translate more than once/);
  });

  it('refuses a registry where two consumers count under one name (the ops API lists them together)', () => {
    const other = defineConsumer({
      ...spec,
      name: 'other',
      resources: { news: topic({ description: 'x', displayName: 'x', perEvent: { publishes: 1 } }) },
      counters: { translationsDone: { label: 'x', delta: () => 1, counts: { resource: 'news' } } },
    });
    expect(() => consumerRegistry([fixture, other])).toThrow(/two consumers count translationsDone/);
  });

  it('keeps the resources, counters and folder it was given', () => {
    expect(fixture.resources.translations).toMatchObject({ kind: 'table', partitionKey: 'taskId' });
    expect(Object.keys(fixture.counters)).toEqual([
      'translationsDone',
      'translationsAnnounced',
      'renditionsStored',
    ]);
    expect(fixture.folder.href).toMatch(/\/test\/fixtures\/consumers\/translate\/$/);
  });
});
