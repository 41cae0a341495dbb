import { defineConsumer } from '../../../shared/consumers/define-consumer';
import { bucket, database, table, topic } from '../../../shared/consumers/resources';
import { eventTypes } from '../../../shared/events/event-types';

/**
 * A consumer the project does not have, declared as a plug-in's folder declares one: for the
 * tests that add it to the registry (`topologyWith`) and expect every realization to take it
 * with no line of theirs changed. One resource of each kind, a counter on each countable one,
 * and a policy of its own.
 */
export const translate = defineConsumer({
  name: 'translate',
  description: 'Translates each approved version (a test fixture)',
  subscribes: [eventTypes.approved],
  // One permanent failure makes a record DEAD (the project's default is 3): a runtime that
  // took its inbox settings from anywhere but its topology would retry.
  policy: { maxPermanentAttempts: 1 },
  folder: new URL('.', import.meta.url),
  resources: {
    translations: table({
      description: 'One translation per task version',
      partitionKey: 'taskId',
      perEvent: { reads: 0, writes: 1, itemKb: 1 },
    }),
    translated: topic({
      description: 'Announces each translation',
      displayName: 'Translations',
      perEvent: { publishes: 1 },
    }),
    renditions: bucket({ description: 'The translated text', perEvent: { puts: 1 } }),
    tasks: database({
      description: 'Reads the task it translates',
      role: 'taskReader',
      perEvent: { calls: 1 },
    }),
  },
  counters: {
    translationsDone: {
      label: 'translations done',
      delta: (r) => (r.stored === 'written' ? 1 : 0),
      counts: { resource: 'translations', where: { state: 'done' } },
    },
    translationsAnnounced: {
      label: 'translations announced',
      delta: (r) => (r.announced === 'sent' ? 1 : 0),
      counts: { resource: 'translated' },
    },
    renditionsStored: {
      label: 'renditions stored',
      delta: (r) => (r.stored === 'written' ? 1 : 0),
      counts: { resource: 'renditions' },
    },
  },
});
