import type { Migration } from './migration';
import { migrations as allMigrations } from './migrations/index';
import type { SqlClient } from './sql-client';

/** Any fixed key works; this one is 'content-pipeline migrations' hashed by PostgreSQL. */
const lockStatement = "SELECT pg_advisory_xact_lock(hashtext('content-pipeline migrations'))";

export interface MigrateResult {
  readonly applied: number[];
  readonly alreadyApplied: number[];
}

/**
 * Applies pending migrations through the SqlClient port, so the same code runs from the local
 * runtime (pg) and the CDK custom resource (Data API). Each migration runs in its own
 * transaction that first takes a transaction-scoped advisory lock: concurrent runners queue on it, and the one that comes
 * second sees the version recorded and skips it. Transaction-scoped, not session-scoped,
 * because the Data API gives no session to hold a lock across calls.
 */
export async function migrate(
  db: SqlClient,
  migrations: readonly Migration[] = allMigrations,
): Promise<MigrateResult> {
  // CREATE TABLE IF NOT EXISTS itself races (a unique violation in pg_type), so it takes the lock too.
  await db.transaction(async (tx) => {
    await tx.query(lockStatement);
    await tx.query(
      `CREATE TABLE IF NOT EXISTS schema_migrations (
         version    integer PRIMARY KEY,
         name       text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
  });
  const applied: number[] = [];
  const alreadyApplied: number[] = [];
  const ordered = [...migrations].sort((a, b) => a.version - b.version);
  for (const migration of ordered) {
    const ran = await db.transaction(async (tx) => {
      await tx.query(lockStatement);
      const done = await tx.query('SELECT 1 FROM schema_migrations WHERE version = :version', {
        version: migration.version,
      });
      if (done.rowCount > 0) return false;
      for (const statement of migration.statements) await tx.query(statement);
      await tx.query('INSERT INTO schema_migrations (version, name) VALUES (:version, :name)', {
        version: migration.version,
        name: migration.name,
      });
      return true;
    });
    (ran ? applied : alreadyApplied).push(migration.version);
  }
  return { applied, alreadyApplied };
}
