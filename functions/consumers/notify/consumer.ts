import { defineConsumer } from '#shared/consumers/define-consumer';
import { topic } from '#shared/consumers/resources';
import { eventTypes } from '#shared/events/event-types';

export const notify = defineConsumer({
  name: 'notify',
  description: 'Tells the assignee their content was approved or rejected',
  subscribes: [eventTypes.approved, eventTypes.rejected],
  folder: new URL('.', import.meta.url),
  resources: {
    notifications: topic({
      description: 'Notification topic (subscribe to it)',
      displayName: 'Content pipeline notifications',
      perEvent: { publishes: 1 },
    }),
  },
  counters: {
    // A notification handed to the topic, not a duplicate it already had.
    notificationsSent: {
      label: 'notifications sent',
      delta: (r) => (r.outcome === 'sent' ? 1 : 0),
      counts: { resource: 'notifications' },
    },
  },
});
