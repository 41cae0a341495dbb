import type { Migration } from '../migration';
import { functionRoles } from '../roles';

/**
 * The tasks API may read one column of the outbox, `event_id`: after a commit whose answer was
 * lost (the RDS Data API's 5xx after CommitTransaction ran), an approve or withdraw looks for
 * its own event, chosen before the transaction, to learn whether it committed. It still sees
 * no payload, no status, nothing of other events but their ids.
 */
export const migration0005: Migration = {
  version: 5,
  name: 'tasks-api-reads-its-event',
  statements: [`GRANT SELECT (event_id) ON outbox TO ${functionRoles.tasksApi}`],
};
