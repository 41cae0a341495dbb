import { defineConsumer } from '#shared/consumers/define-consumer';
import { table } from '#shared/consumers/resources';
import { eventTypes } from '#shared/events/event-types';

export const index = defineConsumer({
  name: 'index',
  description: 'Keeps the content search index in step with approvals',
  // Not content.rejected: a rejected task was never approved, so the index holds nothing of it.
  subscribes: [eventTypes.approved, eventTypes.withdrawn],
  folder: new URL('.', import.meta.url),
  resources: {
    contentIndex: table({
      description: 'The content search index: one entry per task at its latest version',
      partitionKey: 'taskId',
      // One conditional put of the entry (task id, version, title, reviewer, approval time:
      // about 1 KB) that returns the entry it replaced, which reads nothing: "No read capacity
      // units are consumed" (ReturnValues, https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_PutItem.html).
      perEvent: { reads: 0, writes: 1, itemKb: 1 },
    }),
  },
  counters: {
    indexDocuments: {
      label: 'index documents',
      // An approved entry written where none was approved adds a document; a withdrawal
      // written over an approved one takes it away; stale writes change nothing.
      delta: (r) => {
        if (r.outcome !== 'applied') return 0;
        if (r.status === 'approved' && r.replaced !== 'approved') return 1;
        if (r.status === 'withdrawn' && r.replaced === 'approved') return -1;
        return 0;
      },
      counts: { resource: 'contentIndex', where: { status: 'approved' } },
    },
  },
});
