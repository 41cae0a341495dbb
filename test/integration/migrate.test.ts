import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../shared/db/migrate';
import { migrations } from '../../shared/db/migrations/index';
import { PgSqlClient } from '../../shared/db/pg-client';
import { createTestDatabase } from '../support/database';

describe('migrations', () => {
  let db: PgSqlClient;
  let drop: () => Promise<void>;

  beforeAll(async () => {
    const created = await createTestDatabase({ migrated: false });
    drop = created.drop;
    db = new PgSqlClient({ connectionString: created.url });
  });
  afterAll(async () => {
    await db.close();
    await drop();
  });

  it('applies every migration once and records it', async () => {
    const first = await migrate(db);
    expect(first.applied).toEqual(migrations.map((m) => m.version));
    const { rows } = await db.query('SELECT version FROM schema_migrations ORDER BY version');
    expect(rows.map((r) => r.version)).toEqual(migrations.map((m) => m.version));
  });

  it('re-runs idempotently, also when runners race', async () => {
    const [a, b, c] = await Promise.all([migrate(db), migrate(db), migrate(db)]);
    for (const r of [a, b, c]) expect(r?.applied).toEqual([]);
    const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations');
    expect(rows[0]?.n).toBe(migrations.length);
  });

  it('serializes concurrent first runs so each migration applies exactly once', async () => {
    const other = await createTestDatabase({ migrated: false });
    const clients = [0, 1, 2].map(() => new PgSqlClient({ connectionString: other.url }));
    try {
      const results = await Promise.all(clients.map((c) => migrate(c)));
      const appliedCount = results.flatMap((r) => r.applied).length;
      expect(appliedCount).toBe(migrations.length);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
      await other.drop();
    }
  });
});
