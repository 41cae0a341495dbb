import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { migrate } from '../../shared/db/migrate';
import { PgSqlClient } from '../../shared/db/pg-client';

/**
 * Creates a fresh, migrated database in the run's embedded PostgreSQL and returns its URL.
 * One database per test file (or per test) keeps files independent when vitest runs them in parallel.
 */
export async function createTestDatabase(options: { migrated?: boolean } = {}): Promise<{
  url: string;
  drop: () => Promise<void>;
}> {
  const adminUrl = inject('pgUrl');
  const name = `t_${randomUUID().replaceAll('-', '')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = adminUrl.replace(/\/postgres$/, `/${name}`);
  if (options.migrated ?? true) {
    const db = new PgSqlClient({ connectionString: url });
    await migrate(db);
    await db.close();
  }
  return {
    url,
    async drop() {
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.end();
    },
  };
}
