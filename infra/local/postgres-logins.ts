import pg from 'pg';
import { functionRoles, scramVerifier } from '../../shared/db/roles';

/**
 * Who logs in to the local PostgreSQL, and with what.
 *
 * - `postgres`, the superuser, logs in at start only, to set up what follows: its password is
 *   the data directory's own (crypto-random, in `credentials.json`, 0600), never a fixed one.
 *   A cluster made before that (its password was `pipeline`, in the code) is moved to the
 *   generated one by the first start that finds it so ({@link withSuperuser}).
 * - {@link schemaOwnerRole} owns the schema: the runtime's migrations and its `db` pool log in
 *   as it. It can create roles (migrations make the function roles) and set the function roles'
 *   passwords, and is no superuser: it cannot read files or run programs on the server
 *   (`COPY … TO PROGRAM`, `pg_read_server_files`) nor make a role that can.
 * - Each function logs in as its own role (shared/db/roles.ts), as on AWS.
 *
 * The schema owner's password, like the function roles', is new at every start and kept in
 * memory only.
 */

/** The local schema owner: what the migrate function's master user is on AWS, without its reach. */
export const schemaOwnerRole = 'pipeline_owner';

/** The superuser's password of every cluster made before the data directory had credentials. */
export const legacySuperuserPassword = 'pipeline';

/** A `postgres://` URL on loopback `port` to the `postgres` database as `user`. */
export const localUrl = (port: number, user: string, password: string): string =>
  `postgres://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;

const invalidPassword = '28P01';

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 60_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    return client;
  } catch (err) {
    await client.end().catch(() => {});
    throw err;
  }
}

/**
 * Gives `role` the password whose SCRAM verifier is sent (never the password itself, which so
 * never reaches a statement's text or the server's log), in one transaction.
 */
async function setPassword(client: pg.Client, role: string, password: string): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query("SELECT set_config('pipeline.role_verifier', $1, true)", [scramVerifier(password)]);
    await client.query(
      `DO $$ BEGIN
         EXECUTE format('ALTER ROLE %I WITH LOGIN PASSWORD %L', '${role}', current_setting('pipeline.role_verifier'));
       END $$`,
    );
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}

/**
 * Runs `work` logged in as `postgres` with `password` on the server at `port`. A cluster that
 * refuses it but takes the fixed password of earlier versions has its superuser's password
 * changed to `password` first (said in one line): the data directory's credentials file holds
 * it before the change, so a start killed at any moment leaves one of the two working, and the
 * next start finishes the change. Errors of the login (a half-made cluster's 28P01 or 3D000)
 * are thrown as they came.
 */
export async function withSuperuser<T>(
  port: number,
  password: string,
  log: (message: string) => void,
  work: (client: pg.Client) => Promise<T>,
): Promise<T> {
  let client: pg.Client;
  try {
    client = await connect(localUrl(port, 'postgres', password));
  } catch (err) {
    if ((err as { code?: string }).code !== invalidPassword) throw err;
    let legacy: pg.Client;
    try {
      legacy = await connect(localUrl(port, 'postgres', legacySuperuserPassword));
    } catch {
      throw err; // the answer to the password that should work, not to the old one
    }
    try {
      await setPassword(legacy, 'postgres', password);
    } finally {
      await legacy.end().catch(() => {});
    }
    log(
      "PostgreSQL's superuser had the fixed password of earlier versions: changed to this data directory's generated one (credentials.json)",
    );
    client = await connect(localUrl(port, 'postgres', password));
  }
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Makes (or checks) the schema owner and hands it the schema, as the superuser, so that nothing
 * after the start needs the superuser: `ownerPassword` becomes its password. Idempotent, in one
 * transaction, so a start killed anywhere in it leaves the cluster as it was or as it should be.
 *
 * The objects an earlier version's migrations made as `postgres` (tables, their sequences and
 * indexes, the counters' functions) become the owner's, the function roles grant it their admin
 * option (to set their passwords; roles the owner creates grant it by themselves), and
 * `pg_signal_backend` lets it end the function roles' sessions, as the superuser could, and
 * `pg_read_all_stats` lets it see them: `relay_writers_in_flight`, a SECURITY DEFINER function it
 * owns, counts the tasks API's open transactions in `pg_stat_activity`, whose `xact_start` (and
 * wait events, and query) PostgreSQL hides from a role without it (as on Aurora, where the
 * migrating master user's `rds_superuser` has it). Without it the count is always 0.
 */
export async function prepareSchemaOwner(client: pg.Client, ownerPassword: string): Promise<void> {
  const owner = schemaOwnerRole;
  const roles = Object.values(functionRoles)
    .map((r) => `'${r}'`)
    .join(', ');
  await client.query('BEGIN');
  try {
    await client.query(
      `DO $$ BEGIN
         CREATE ROLE ${owner};
       EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
       END $$`,
    );
    await client.query(
      `ALTER ROLE ${owner} WITH NOSUPERUSER NOCREATEDB CREATEROLE NOREPLICATION NOBYPASSRLS LOGIN`,
    );
    await client.query("SELECT set_config('pipeline.role_verifier', $1, true)", [
      scramVerifier(ownerPassword),
    ]);
    await client.query(
      `DO $$ BEGIN
         EXECUTE format('ALTER ROLE %I WITH PASSWORD %L', '${owner}', current_setting('pipeline.role_verifier'));
       END $$`,
    );
    await client.query(`GRANT pg_signal_backend, pg_read_all_stats TO ${owner}`);
    await client.query(`ALTER SCHEMA public OWNER TO ${owner}`);
    await client.query(
      `DO $$ DECLARE r record; BEGIN
         FOR r IN SELECT c.oid::regclass::text AS name, c.relkind
                    FROM pg_class c
                   WHERE c.relnamespace = 'public'::regnamespace
                     AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
                     AND c.relowner <> '${owner}'::regrole
                     -- a column's sequence moves with its table
                     AND NOT (c.relkind = 'S' AND EXISTS (
                       SELECT 1 FROM pg_depend d
                        WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')))
         LOOP
           EXECUTE format('ALTER %s %s OWNER TO ${owner}',
             CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                            WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
             r.name);
         END LOOP;
         FOR r IN SELECT p.oid::regprocedure::text AS name
                    FROM pg_proc p
                   WHERE p.pronamespace = 'public'::regnamespace AND p.proowner <> '${owner}'::regrole
         LOOP
           EXECUTE format('ALTER ROUTINE %s OWNER TO ${owner}', r.name);
         END LOOP;
         FOR r IN SELECT rolname FROM pg_roles WHERE rolname IN (${roles})
         LOOP
           EXECUTE format('GRANT %I TO ${owner} WITH ADMIN OPTION', r.rolname);
         END LOOP;
       END $$`,
    );
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}
