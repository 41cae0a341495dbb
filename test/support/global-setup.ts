import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { migrate } from '../../shared/db/migrate';
import { PgSqlClient } from '../../shared/db/pg-client';
import { timeoutsOf } from '../../shared/db/pg-settings';
import { allFunctionRoles, setRolePasswords } from '../../shared/db/roles';
import { testLogin } from './database-logins';
import { startEmbeddedPostgres } from './embedded-pg';

declare module 'vitest' {
  export interface ProvidedContext {
    pgUrl: string;
    /** A migrated database that test databases are copied from (`CREATE DATABASE … TEMPLATE`). */
    pgTemplate: string;
  }
}

/** The migrated database every test database starts as a copy of. */
export const templateDatabase = 'pipeline_template';

/**
 * One embedded PostgreSQL 17 for the whole run; each test file makes its own database in it,
 * copied from a template migrated once here. Migrating also creates the function roles, which
 * are cluster-wide: their test passwords are set once here too, because ALTER ROLE from
 * parallel test files would collide on the same catalog rows.
 */
export default async function setup(project: TestProject) {
  const server = await startEmbeddedPostgres();
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${templateDatabase}`);
  await admin.end();
  const db = new PgSqlClient({
    connectionString: server.url.replace(/\/postgres$/, `/${templateDatabase}`),
    timeouts: timeoutsOf('owner'),
  });
  try {
    await migrate(db);
    await setRolePasswords(db, allFunctionRoles.map(testLogin));
  } finally {
    await db.close();
  }
  project.provide('pgUrl', server.url);
  project.provide('pgTemplate', templateDatabase);
  return async () => {
    await server.stop();
  };
}
