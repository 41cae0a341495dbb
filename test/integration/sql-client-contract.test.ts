import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type SqlClient, type SqlValue, sqlParam } from '../../shared/db/sql-client';
import { PipelineError } from '../../shared/errors';
import { createTestDatabase } from '../support/database';
import { sqlAdapters } from '../support/sql-adapters';

// One suite, every adapter: a repository written against one behaves the same on the other.
describe.each(sqlAdapters)('SqlClient contract: $name adapter', (adapter) => {
  let db: SqlClient;
  let closeDb: () => Promise<void>;
  let drop: () => Promise<void>;

  beforeAll(async () => {
    const created = await createTestDatabase({ migrated: false });
    drop = created.drop;
    const opened = await adapter.open(created.url);
    db = opened.db;
    closeDb = opened.close;
    await db.query(
      `CREATE TABLE items (
         id     uuid PRIMARY KEY,
         seq    serial,
         name   text NOT NULL UNIQUE,
         qty    integer NOT NULL DEFAULT 0,
         at     timestamptz,
         doc    jsonb
       )`,
    );
    // Sequences ignore rollback, so this counts how often a statement really ran.
    await db.query('CREATE SEQUENCE executions');
  });
  afterAll(async () => {
    await closeDb();
    await drop();
  });
  beforeEach(async () => {
    await db.query('TRUNCATE items RESTART IDENTITY');
  });

  const insert = (name: string, qty = 0) =>
    db.query('INSERT INTO items (id, name, qty) VALUES (:id, :name, :qty)', {
      id: sqlParam.uuid(randomUUID()),
      name,
      qty,
    });

  it('binds named parameters, repeated names and ::casts', async () => {
    const { rows } = await db.query(
      `SELECT :n::int + :n::int AS twice, :label::text AS label, :n::text || '-' || :label AS joined,
              :id::uuid AS id`,
      { n: 21, label: 'x', id: '6a1f1f0e-8a8f-4c44-9d5b-0d1f6f0a3c11' },
    );
    expect(rows).toEqual([
      { twice: 42, label: 'x', joined: '21-x', id: '6a1f1f0e-8a8f-4c44-9d5b-0d1f6f0a3c11' },
    ]);
  });

  it('round-trips uuid, timestamp and json parameters', async () => {
    const id = randomUUID();
    const at = new Date('2024-02-03T04:05:06.789Z');
    const doc = { title: 'Draft', tags: ['a', 'b'], nested: { n: 1, ok: true, none: null } };
    await db.query('INSERT INTO items (id, name, at, doc) VALUES (:id, :name, :at, :doc)', {
      id: sqlParam.uuid(id),
      name: 'typed',
      at: sqlParam.timestamp(at),
      doc: sqlParam.json(doc),
    });
    const { rows } = await db.query('SELECT id, at, doc FROM items WHERE id = :id AND at = :at', {
      id: sqlParam.uuid(id),
      at: sqlParam.timestamp(at),
    });
    expect(rows).toEqual([{ id, at, doc }]);
    expect(rows[0]?.at).toBeInstanceOf(Date);
  });

  it('passes a list as json and unnests it in SQL', async () => {
    const { rows } = await db.query(
      'SELECT value::int AS n FROM jsonb_array_elements_text(:ids::jsonb) AS t',
      {
        ids: sqlParam.json([3, 1, 2]),
      },
    );
    expect(rows.map((r) => r.n)).toEqual([3, 1, 2]);
  });

  it('decodes integers, floats, numeric, booleans, nulls, timestamps and json the same way', async () => {
    const { rows } = await db.query(
      `SELECT 1::int2 AS i2, 2::int4 AS i4, 9007199254740991::int8 AS i8, 1.5::float8 AS f8,
              123.45::numeric(10,4) AS num, true AS yes, false AS no, NULL::text AS nothing,
              '2024-02-03 04:05:06.789123+00'::timestamptz AS ts, '2024-02-03 04:05:06+02'::timestamptz AS whole,
              '{"a": [1, 2], "b": {"c": null}}'::jsonb AS jb, '[1, "x"]'::json AS j,
              'v'::varchar AS v, 'a6f9f1d5-3c1e-4b0e-9a57-2f4b0b8f8f10'::uuid AS u`,
    );
    expect(rows).toEqual([
      {
        i2: 1,
        i4: 2,
        i8: 9007199254740991,
        f8: 1.5,
        num: '123.4500',
        yes: true,
        no: false,
        nothing: null,
        ts: new Date('2024-02-03T04:05:06.789Z'),
        whole: new Date('2024-02-03T02:05:06.000Z'),
        jb: { a: [1, 2], b: { c: null } },
        j: [1, 'x'],
        v: 'v',
        u: 'a6f9f1d5-3c1e-4b0e-9a57-2f4b0b8f8f10',
      },
    ]);
  });

  it('decodes a serial column as a number', async () => {
    await insert('first');
    await insert('second');
    const { rows } = await db.query('SELECT seq, qty FROM items ORDER BY seq');
    expect(rows).toEqual([
      { seq: 1, qty: 0 },
      { seq: 2, qty: 0 },
    ]);
  });

  it('counts rows for insert, update, delete, select and returning', async () => {
    const inserted = await db.query(
      `INSERT INTO items (id, name, qty) VALUES
         (gen_random_uuid(), 'a', 1), (gen_random_uuid(), 'b', 2), (gen_random_uuid(), 'c', 3)`,
    );
    expect(inserted).toEqual({ rows: [], rowCount: 3 });

    const updated = await db.query('UPDATE items SET qty = qty + 10 WHERE qty >= :min', { min: 2 });
    expect(updated).toEqual({ rows: [], rowCount: 2 });

    const returned = await db.query('UPDATE items SET qty = 0 WHERE qty > :min RETURNING name', { min: 12 });
    expect(returned).toEqual({ rows: [{ name: 'c' }], rowCount: 1 });

    const none = await db.query('UPDATE items SET qty = 0 WHERE name = :name RETURNING name', {
      name: 'zzz',
    });
    expect(none).toEqual({ rows: [], rowCount: 0 });

    const deleted = await db.query('DELETE FROM items WHERE name = :name', { name: 'a' });
    expect(deleted.rowCount).toBe(1);

    const selected = await db.query('SELECT name FROM items ORDER BY name');
    expect(selected).toEqual({ rows: [{ name: 'b' }, { name: 'c' }], rowCount: 2 });
  });

  it('commits a transaction and returns what the work returned', async () => {
    const result = await db.transaction(async (tx) => {
      await tx.query('INSERT INTO items (id, name) VALUES (:id, :name)', {
        id: sqlParam.uuid(randomUUID()),
        name: 'tx',
      });
      const { rows } = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM items');
      return rows[0]?.n;
    });
    expect(result).toBe(1);
    const { rows } = await db.query('SELECT name FROM items');
    expect(rows).toEqual([{ name: 'tx' }]);
  });

  it('runs statements issued concurrently inside a transaction', async () => {
    // Each statement lasts a while so that, were they not queued, they would overlap on the transaction.
    await db.transaction((tx) =>
      Promise.all(
        ['p', 'q', 'r', 's'].map((name) =>
          tx.query('INSERT INTO items (id, name) SELECT :id::uuid, :name::text FROM pg_sleep(0.05)', {
            id: sqlParam.uuid(randomUUID()),
            name,
          }),
        ),
      ),
    );
    const { rowCount } = await db.query('SELECT 1 FROM items');
    expect(rowCount).toBe(4);
  });

  it('a statement queued behind a failing one never commits on its own after the rollback', async () => {
    // The queued INSERTs (one per try of the transaction), held to see what became of each.
    const orphans: Promise<unknown>[] = [];
    const attempt = db.transaction((tx) => {
      // It fails after a while: an adapter that ran the INSERT beside it, or on the connection
      // after the ROLLBACK, gets the time to (a wider window for the defect, not a wait for the test).
      const failing = tx.query('SELECT 1 / 0 FROM pg_sleep(0.05)');
      const orphan = tx.query('INSERT INTO items (id, name) VALUES (:id, :name)', {
        id: sqlParam.uuid(randomUUID()),
        name: 'orphan',
      });
      orphans.push(orphan);
      return Promise.all([failing, orphan]);
    });
    await expect(attempt).rejects.toThrow();
    // Once every queued INSERT has run or been refused, whatever it did is in the table.
    await Promise.allSettled(orphans);
    const { rowCount } = await db.query('SELECT 1 FROM items');
    expect(rowCount).toBe(0);
  });

  it('rolls back and rethrows when the work throws', async () => {
    const boom = new Error('boom');
    const attempt = db.transaction(async (tx) => {
      await tx.query('INSERT INTO items (id, name) VALUES (:id, :name)', {
        id: sqlParam.uuid(randomUUID()),
        name: 'doomed',
      });
      throw boom;
    });
    await expect(attempt).rejects.toBe(boom);
    const { rowCount } = await db.query('SELECT 1 FROM items');
    expect(rowCount).toBe(0);
  });

  it('rolls back when a statement in the transaction fails', async () => {
    await insert('taken');
    const attempt = db.transaction(async (tx) => {
      await tx.query('INSERT INTO items (id, name) VALUES (:id, :name)', {
        id: sqlParam.uuid(randomUUID()),
        name: 'new',
      });
      await tx.query('INSERT INTO items (id, name) VALUES (:id, :name)', {
        id: sqlParam.uuid(randomUUID()),
        name: 'taken',
      });
    });
    await expect(attempt).rejects.toMatchObject({ code: 'DB_CONSTRAINT' });
    const { rows } = await db.query('SELECT name FROM items');
    expect(rows).toEqual([{ name: 'taken' }]);
  });

  it('reports a constraint violation as DB_CONSTRAINT and does not retry it', async () => {
    await insert('dup');
    const before = await db.query<{ n: number }>("SELECT nextval('executions')::int AS n");

    const err = await db
      .query(`INSERT INTO items (id, name, qty) VALUES (:id, :name, nextval('executions'))`, {
        id: sqlParam.uuid(randomUUID()),
        name: 'dup',
      })
      .catch((e: unknown) => e);

    expect(err).toBeInstanceOf(PipelineError);
    expect(err).toMatchObject({ code: 'DB_CONSTRAINT', details: { sqlState: '23505' } });
    expect((err as PipelineError).cause).toBeDefined();
    const after = await db.query<{ n: number }>('SELECT last_value::int AS n FROM executions');
    expect(after.rows[0]?.n).toBe((before.rows[0]?.n ?? 0) + 1);
  });

  it('reports other SQL errors as DB_ERROR with the SQLSTATE', async () => {
    await expect(db.query('SELECT * FROM no_such_table')).rejects.toMatchObject({
      code: 'DB_ERROR',
      details: { sqlState: '42P01' },
    });
  });

  it('rejects array and plain object parameters before sending anything', async () => {
    await expect(db.query('SELECT :ids AS ids', { ids: [1, 2] as unknown as SqlValue })).rejects.toThrow(
      /:ids is an array/,
    );
    await expect(db.query('SELECT :o AS o', { o: { a: 1 } as unknown as SqlValue })).rejects.toThrow(
      /:o is an object/,
    );
  });

  it('rejects a statement whose parameter has no value', async () => {
    await expect(db.query('SELECT :a::int AS a, :b::int AS b', { a: 1 })).rejects.toThrow(
      'SQL parameter :b has no value',
    );
  });
});
