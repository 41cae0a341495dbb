import { PgSqlClient } from '../../shared/db/pg-client';
import type { SqlClient } from '../../shared/db/sql-client';

/**
 * Every SqlClient adapter, for contract suites: `describe.each(sqlAdapters)` runs the same
 * repository tests on each against the same embedded PostgreSQL.
 */
export interface SqlAdapterFactory {
  readonly name: string;
  /** Opens a client on the database at `url` (a postgres:// URL of the embedded server). */
  open(url: string): Promise<{ db: SqlClient; close: () => Promise<void> }>;
}

export const pgAdapter: SqlAdapterFactory = {
  name: 'pg',
  async open(url) {
    const db = new PgSqlClient({ connectionString: url });
    return { db, close: () => db.close() };
  },
};

export const sqlAdapters: readonly SqlAdapterFactory[] = [pgAdapter];
