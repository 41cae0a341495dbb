import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PgSqlClient } from '../../shared/db/pg-client';
import { PipelineError } from '../../shared/errors';
import { createTestDatabase } from '../support/database';

describe('PgSqlClient.transaction rejects a COMMIT that PostgreSQL answered with a rollback', () => {
  let db: PgSqlClient;
  let drop: () => Promise<void>;

  beforeAll(async () => {
    const created = await createTestDatabase({ migrated: false });
    drop = created.drop;
    db = new PgSqlClient({ connectionString: created.url, maxConnections: 2 });
    await db.query('CREATE TABLE parents (id uuid PRIMARY KEY)');
    // Checked at COMMIT, not at the INSERT: the violation only shows when the transaction ends.
    await db.query(
      `CREATE TABLE children (
         id uuid PRIMARY KEY,
         parent uuid NOT NULL REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED
       )`,
    );
  });
  afterAll(async () => {
    await db.close();
    await drop();
  });
  beforeEach(async () => {
    await db.query('TRUNCATE children, parents');
  });

  const count = async (table: 'parents' | 'children') =>
    (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]?.n;

  it('a transaction whose failed statement the work swallowed rejects instead of resolving', async () => {
    const outcome = db.transaction(async (tx) => {
      await tx.query('INSERT INTO parents (id) VALUES (:id::uuid)', { id: randomUUID() });
      // The work catches the error and goes on: the transaction is aborted all the same.
      await tx.query('SELECT 1 / 0').catch(() => undefined);
      return 'looks committed';
    });

    const err = await outcome.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PipelineError);
    expect(err).toMatchObject({ code: 'DB_ERROR' });
    expect((err as Error).message).toContain('rolled back');
    expect(await count('parents')).toBe(0);
  });

  it('a deferred constraint violated at COMMIT rejects with the constraint error', async () => {
    const outcome = db.transaction(async (tx) => {
      await tx.query('INSERT INTO children (id, parent) VALUES (:id::uuid, :parent::uuid)', {
        id: randomUUID(),
        parent: randomUUID(),
      });
      return 'looks committed';
    });

    await expect(outcome).rejects.toMatchObject({ code: 'DB_CONSTRAINT' });
    expect(await count('children')).toBe(0);
  });

  it('a transaction that commits resolves with the work result, and its rows are there', async () => {
    const result = await db.transaction(async (tx) => {
      const id = randomUUID();
      await tx.query('INSERT INTO parents (id) VALUES (:id::uuid)', { id });
      await tx.query('INSERT INTO children (id, parent) VALUES (:child::uuid, :id::uuid)', {
        child: randomUUID(),
        id,
      });
      return 'committed';
    });
    expect(result).toBe('committed');
    expect(await count('children')).toBe(1);
  });

  it('the connection is usable again after a rejected COMMIT', async () => {
    await db
      .transaction(async (tx) => {
        await tx.query('SELECT 1 / 0').catch(() => undefined);
      })
      .catch(() => undefined);
    // Both pooled connections answer: none was left inside an open transaction.
    const answers = await Promise.all([db.query('SELECT 1 AS one'), db.query('SELECT 1 AS one')]);
    expect(answers.map((a) => a.rows[0])).toEqual([{ one: 1 }, { one: 1 }]);
  });
});
