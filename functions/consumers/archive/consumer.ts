import { defineConsumer } from '#shared/consumers/define-consumer';
import { bucket, database } from '#shared/consumers/resources';
import { eventTypes } from '#shared/events/event-types';

export const archive = defineConsumer({
  name: 'archive',
  description: 'Stores an immutable snapshot of each approved version',
  // Not content.rejected: only a pending task can be rejected, so it has no approved version to keep.
  subscribes: [eventTypes.approved],
  folder: new URL('.', import.meta.url),
  resources: {
    archive: bucket({ description: 'Task snapshot bucket', perEvent: { puts: 1 } }),
    // The snapshot is the task as the database holds it, read as a role that may only read tasks.
    tasks: database({
      description: 'Reads the task it snapshots',
      role: 'taskReader',
      perEvent: { calls: 1 },
    }),
  },
  counters: {
    // An object written now, not one that existed.
    archivedObjects: {
      label: 'archived objects',
      delta: (r) => (r.outcome === 'written' ? 1 : 0),
      counts: { resource: 'archive' },
    },
  },
});
