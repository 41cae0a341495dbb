import type { Migration } from '../migration';
import { functionRoles } from '../roles';

/**
 * Roles are cluster-wide, so a second database on the same server (every test file makes one)
 * finds them already there, and two first runs in two databases can race on the catalog: both
 * outcomes of that race mean the role exists.
 */
const createRole = (name: string) =>
  `DO $$ BEGIN
     CREATE ROLE ${name} NOLOGIN;
   EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
   END $$`;

/** The roles this migration creates, in this order; the audit's came later, with the audit (0008). */
const firstRoles = [functionRoles.relay, functionRoles.tasksApi, functionRoles.taskReader, functionRoles.ops];

/**
 * The database role of each function that reaches PostgreSQL, with only the privileges its
 * statements need.
 *
 * Roles are created `NOLOGIN`: whoever owns the passwords (the migrate custom resource on AWS,
 * from each role's Secrets Manager secret; the local runtime and the tests, their own) turns
 * login on with `setRolePasswords`, so no password ever sits in a migration.
 */
export const migration0002: Migration = {
  version: 2,
  name: 'function-roles',
  statements: [
    ...firstRoles.map(createRole),
    // SELECT because the claim and the settles read what they update (WHERE, RETURNING);
    // DELETE for the purge of delivered rows past retention.
    `GRANT SELECT, UPDATE, DELETE ON outbox TO ${functionRoles.relay}`,
    // SELECT on tasks: RETURNING and the 404/409 read after a conditional UPDATE matched nothing.
    `GRANT SELECT, INSERT, UPDATE ON tasks TO ${functionRoles.tasksApi}`,
    `GRANT INSERT ON outbox TO ${functionRoles.tasksApi}`,
    `GRANT SELECT ON tasks TO ${functionRoles.taskReader}`,
    `GRANT SELECT ON tasks TO ${functionRoles.ops}`,
    `GRANT SELECT, UPDATE ON outbox TO ${functionRoles.ops}`,
  ],
};
