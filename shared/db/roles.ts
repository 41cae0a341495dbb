import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import type { SqlClient } from './sql-client';

/**
 * The PostgreSQL role of each function that reaches the database. Migrations create the roles
 * and grant them their privileges (0002, 0008) with these names, and the code logs in with
 * them: one list for both. Applied migrations are history, so a name here never changes in
 * place: a rename is a new migration (`ALTER ROLE … RENAME TO`), and the applied ones keep the
 * old name (`test/unit/migrations-history.test.ts` fails on any edit that would change their
 * statements).
 */
export const functionRoles = {
  /** The outbox relay: claims, settles and purges outbox rows; never sees `tasks`. */
  relay: 'pipeline_relay',
  /** The tasks API: reads and writes `tasks`, appends to `outbox`. */
  tasksApi: 'pipeline_tasks_api',
  /**
   * Consumers that read tasks (a `database` resource): SELECT on `tasks`, nothing else. Named
   * after its first user when migration 0002 made it; a role name is history (see above).
   */
  taskReader: 'pipeline_archive',
  /** The ops API: reads tasks and the outbox, puts dead outbox rows back to pending. */
  ops: 'pipeline_ops',
  /** The delivery audit (`shared/audit/`): reads delivered rows, keeps its cursor and findings. */
  audit: 'pipeline_audit',
} as const;

/** Which function a database role belongs to (`relay`, `tasksApi`, `taskReader`, `ops`, `audit`). */
export type FunctionRole = keyof typeof functionRoles;

/** The PostgreSQL role name of a function. */
export const roleName = (role: FunctionRole): string => functionRoles[role];

/** Every function role, in declaration order. */
export const allFunctionRoles = Object.keys(functionRoles) as FunctionRole[];

/** A role's login: its name and the password its secret (or the local runtime) holds. */
export interface RoleLogin {
  readonly username: string;
  readonly password: string;
}

// Printable ASCII only: SCRAM runs the password through SASLprep on the client, which leaves
// such a password unchanged, so the verifier computed here matches what every client derives.
const printableAscii = /^[\x21-\x7e]{12,256}$/;
const roleIdentifier = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * The SCRAM-SHA-256 verifier PostgreSQL stores for `password` (RFC 5802 / RFC 7677, in the
 * format of `pg_authid.rolpassword`). Sending the verifier instead of the password means the
 * plain password never reaches the server's statement text or its logs. No maintained npm
 * package exports this computation on its own (node-postgres has only the client half), and
 * it is four lines of node:crypto.
 */
export function scramVerifier(password: string, salt = randomBytes(16), iterations = 4096): string {
  const salted = pbkdf2Sync(password, salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/**
 * Lets each role log in with its password (`ALTER ROLE … LOGIN PASSWORD <verifier>`), in one
 * transaction. Run by the schema owner after migrating: the migrate custom resource with each
 * role's secret on AWS, the local runtime and the tests with their own passwords.
 *
 * ALTER ROLE takes no bind parameters, so the verifier travels as a parameter of
 * `set_config` and a DO block formats it in with `%L`: no SQL is built from a password here.
 */
export async function setRolePasswords(db: SqlClient, logins: readonly RoleLogin[]): Promise<void> {
  const known = new Set(Object.values(functionRoles));
  for (const { username, password } of logins) {
    if (!known.has(username as never) || !roleIdentifier.test(username)) {
      throw new Error(`"${username}" is not one of the pipeline's database roles`);
    }
    if (!printableAscii.test(password)) {
      throw new Error(`the password of ${username} must be 12-256 printable ASCII characters`);
    }
  }
  if (logins.length === 0) return;
  await db.transaction(async (tx) => {
    for (const { username, password } of logins) {
      await tx.query("SELECT set_config('pipeline.role_verifier', :verifier, true)", {
        verifier: scramVerifier(password),
      });
      await tx.query(
        `DO $$ BEGIN
           EXECUTE format('ALTER ROLE %I WITH LOGIN PASSWORD %L', '${username}',
                          current_setting('pipeline.role_verifier'));
         END $$`,
      );
    }
  });
}

/** A fresh random password for a role (the local runtime makes new ones at every start). */
export function randomRolePassword(): string {
  return randomBytes(24).toString('base64url');
}

/** `url` (a postgres:// URL) logged in as `login` instead of its own user. */
export function urlAs(url: string, login: RoleLogin): string {
  const u = new URL(url);
  u.username = encodeURIComponent(login.username);
  u.password = encodeURIComponent(login.password);
  return u.toString();
}
