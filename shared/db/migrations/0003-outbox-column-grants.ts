import type { Migration } from '../migration';
import { functionRoles } from '../roles';

/**
 * What a committed event says (its type, aggregate, payload, commit time) is written once, by
 * the tasks API's INSERT, and no function may change it afterwards: the relay and the ops API
 * lose their table-wide UPDATE on `outbox` and get it back for the delivery columns only. A bug
 * in either can then misroute an event's delivery state, never its content.
 * (PostgreSQL checks column privileges per statement, so `SELECT … FOR UPDATE` still works
 * with UPDATE on some columns: https://www.postgresql.org/docs/current/sql-select.html#SQL-FOR-UPDATE-SHARE)
 */
export const migration0003: Migration = {
  version: 3,
  name: 'outbox-column-grants',
  statements: [
    `REVOKE UPDATE ON outbox FROM ${functionRoles.relay}, ${functionRoles.ops}`,
    // The claim (owner, token, lease, attempts), the settles (status, delivered_at, bus_event_id,
    // last_error, next_attempt_at) and the release of unpublished claims.
    `GRANT UPDATE (status, attempts, next_attempt_at, claim_owner, claim_token, lease_until,
                   delivered_at, bus_event_id, last_error) ON outbox TO ${functionRoles.relay}`,
    // The redrive of a dead row: back to pending, attempts from zero, due now, no lease.
    `GRANT UPDATE (status, attempts, next_attempt_at, lease_until) ON outbox TO ${functionRoles.ops}`,
  ],
};
