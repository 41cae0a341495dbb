import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { type FunctionRole, urlAs } from '../../shared/db/roles';
import { testLogin } from './database-logins';

export { testLogin };

/** A test database: its owner URL, the URL of each function role, and a way to drop it. */
export interface TestDatabase {
  /** The superuser (schema owner) URL: migrations, fixtures and checks of the raw rows. */
  readonly url: string;
  /** The URL a function connects with: its own role, with only that role's grants. */
  urlAs(role: FunctionRole): string;
  drop(): Promise<void>;
}

/**
 * Creates a fresh database in the run's embedded PostgreSQL and returns its URLs: migrated (a
 * copy of the template the global setup migrated, with the function roles' test logins), or
 * empty with `migrated: false`. One database per test file (or per test) keeps files
 * independent when vitest runs them in parallel.
 */
export async function createTestDatabase(options: { migrated?: boolean } = {}): Promise<TestDatabase> {
  const adminUrl = inject('pgUrl');
  const name = `t_${randomUUID().replaceAll('-', '')}`;
  const template = options.migrated === false ? 'template0' : inject('pgTemplate');
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
  } finally {
    await admin.end();
  }
  const url = adminUrl.replace(/\/postgres$/, `/${name}`);
  return {
    url,
    urlAs: (role) => urlAs(url, testLogin(role)),
    async drop() {
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.end();
    },
  };
}
