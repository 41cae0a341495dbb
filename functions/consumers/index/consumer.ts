import { defineConsumer } from '../../../shared/consumers/define-consumer';
import { eventTypes } from '../../../shared/events/event-types';

export const index = defineConsumer({
  name: 'index',
  description: 'Keeps the content search index in step with approvals',
  // Not content.rejected: a rejected task was never approved, so the index holds nothing of it.
  subscribes: [eventTypes.approved, eventTypes.withdrawn],
});
