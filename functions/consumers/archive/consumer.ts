import { defineConsumer } from '../../../shared/consumers/define-consumer';
import { eventTypes } from '../../../shared/events/event-types';

export const archive = defineConsumer({
  name: 'archive',
  description: 'Stores an immutable snapshot of each approved version',
  // Not content.rejected: only a pending task can be rejected, so it has no approved version to keep.
  subscribes: [eventTypes.approved],
});
