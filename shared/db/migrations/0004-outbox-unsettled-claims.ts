import type { Migration } from '../migration';
import { functionRoles } from '../roles';

/**
 * `unsettled_claims` counts the claims of a row in a row that never settled: the relay took it,
 * and crashed, timed out or lost the claim's response before marking it anything. A settle
 * (delivered, failed, released) sets it back to 0. A claim finding it at the relay's limit
 * marks the row `dead` with that reason instead of claiming it again: a row that takes every
 * relay down with it needs a person, and must not hold the rows behind it for ever.
 * `attempts` keeps counting every claim, settled or not, for the record.
 */
export const migration0004: Migration = {
  version: 4,
  name: 'outbox-unsettled-claims',
  statements: [
    'ALTER TABLE outbox ADD COLUMN unsettled_claims integer NOT NULL DEFAULT 0',
    `GRANT UPDATE (unsettled_claims) ON outbox TO ${functionRoles.relay}`,
    // A redrive starts the count again, as it does `attempts`.
    `GRANT UPDATE (unsettled_claims) ON outbox TO ${functionRoles.ops}`,
  ],
};
