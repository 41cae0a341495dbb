import { defineConsumer } from '../../../shared/consumers/define-consumer';
import { eventTypes } from '../../../shared/events/event-types';

export const notify = defineConsumer({
  name: 'notify',
  description: 'Tells the assignee their content was approved or rejected',
  subscribes: [eventTypes.approved, eventTypes.rejected],
});
