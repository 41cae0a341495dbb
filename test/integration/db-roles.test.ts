import { createHmac, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgSqlClient } from '../../shared/db/pg-client';
import { type FunctionRole, roleName, scramVerifier, setRolePasswords } from '../../shared/db/roles';
import type { SqlClient } from '../../shared/db/sql-client';
import { createTestDatabase, type TestDatabase } from '../support/database';

// Each statement a function's code runs, and some it must never be able to run.
const taskId = randomUUID();
const statements = {
  readTasks: 'SELECT count(*) FROM tasks',
  writeTasks: `UPDATE tasks SET title = title WHERE task_id = '${taskId}'`,
  insertTask: `INSERT INTO tasks (task_id, title) VALUES ('${randomUUID()}', 'x')`,
  readOutbox: 'SELECT payload, status FROM outbox LIMIT 1',
  findEvent: `SELECT event_id FROM outbox WHERE event_id = '${randomUUID()}'`,
  appendOutbox: `INSERT INTO outbox (event_id, event_type, aggregate_id, aggregate_version, payload)
                 VALUES ('${randomUUID()}', 'content.approved', '${taskId}', 2, '{}')`,
  updateOutbox: "UPDATE outbox SET attempts = attempts WHERE status = 'dead'",
  settleOutbox:
    "UPDATE outbox SET delivered_at = now(), bus_event_id = 'x', claim_token = claim_token WHERE false",
  // A committed event's content is written once, by the INSERT: nobody rewrites it.
  rewritePayload: "UPDATE outbox SET payload = '{}' WHERE status = 'dead'",
  retypeEvent: "UPDATE outbox SET event_type = 'content.withdrawn' WHERE false",
  claimOutbox: "SELECT event_id FROM outbox WHERE status = 'pending' FOR UPDATE SKIP LOCKED",
  purgeOutbox: "DELETE FROM outbox WHERE status = 'delivered' AND delivered_at < now() - interval '1 year'",
  dropTable: 'DROP TABLE outbox',
  readMigrations: 'SELECT count(*) FROM schema_migrations',
  // The delivery audit's own tables: its cursor and lease, its findings.
  advanceAudit: 'UPDATE delivery_audit SET last_run_at = now()',
  readAudit: 'SELECT cursor_delivered_at, last_run_at FROM delivery_audit',
  recordFinding: `INSERT INTO delivery_audit_findings (event_id, consumer, delivered_at)
                  VALUES ('${randomUUID()}', 'some-consumer', now())`,
  clearFinding: 'DELETE FROM delivery_audit_findings WHERE false',
  noteRedrive: 'UPDATE delivery_audit_findings SET redriven_at = now(), redrives = redrives + 1 WHERE false',
  readCounters: 'SELECT sum(n) FROM pipeline_counters',
} as const;
type Statement = keyof typeof statements;

const allowed: Record<FunctionRole, readonly Statement[]> = {
  relay: ['readOutbox', 'findEvent', 'updateOutbox', 'settleOutbox', 'claimOutbox', 'purgeOutbox'],
  tasksApi: ['readTasks', 'writeTasks', 'insertTask', 'appendOutbox', 'findEvent'],
  taskReader: ['readTasks'],
  // UPDATE (redrive) is what FOR UPDATE needs too: a claim-shaped read follows from it.
  ops: [
    'readTasks',
    'readOutbox',
    'findEvent',
    'updateOutbox',
    'claimOutbox',
    'readAudit',
    'noteRedrive',
    'readCounters',
  ],
  // Reads what was delivered; writes only its own cursor and findings.
  audit: [
    'readOutbox',
    'findEvent',
    'advanceAudit',
    'readAudit',
    'recordFinding',
    'clearFinding',
    'noteRedrive',
    'readCounters',
  ],
};

describe('each function reaches PostgreSQL as its own role, with only the grants its statements need', () => {
  let database: TestDatabase;
  const clients = new Map<FunctionRole, SqlClient>();

  beforeAll(async () => {
    database = await createTestDatabase();
    for (const role of Object.keys(allowed) as FunctionRole[]) {
      clients.set(role, new PgSqlClient({ connectionString: database.urlAs(role) }));
    }
  });
  afterAll(async () => {
    for (const c of clients.values()) await c.close();
    await database.drop();
  });

  describe.each(Object.entries(allowed) as [FunctionRole, readonly Statement[]][])('%s', (role, grants) => {
    it.each(Object.keys(statements) as Statement[])('%s', async (name) => {
      const db = clients.get(role) as SqlClient;
      // A transaction rolled back at the end: the allowed writes leave nothing behind.
      const attempt = db.transaction(async (tx) => {
        await tx.query(statements[name]);
        throw new Error('rollback');
      });
      if (grants.includes(name)) {
        await expect(attempt).rejects.toThrow('rollback');
      } else {
        await expect(attempt).rejects.toMatchObject({ details: { sqlState: '42501' } });
      }
    });
  });

  it('logs in with a SCRAM verifier set by setRolePasswords (the password never reaches the server)', async () => {
    const owner = new PgSqlClient({ connectionString: database.url });
    const password = `rotated-${randomUUID()}`;
    try {
      await setRolePasswords(owner, [{ username: roleName('taskReader'), password }]);
      const { rows } = await owner.query<{ rolpassword: string }>(
        'SELECT rolpassword FROM pg_authid WHERE rolname = :name',
        { name: roleName('taskReader') },
      );
      expect(rows[0]?.rolpassword).toMatch(/^SCRAM-SHA-256\$4096:/);
      expect(rows[0]?.rolpassword).not.toContain(password);
      const url = new URL(database.url);
      url.username = roleName('taskReader');
      url.password = password;
      const asTaskReader = new PgSqlClient({ connectionString: url.toString() });
      try {
        await expect(asTaskReader.query('SELECT 1 AS one')).resolves.toMatchObject({ rows: [{ one: 1 }] });
      } finally {
        await asTaskReader.close();
      }
    } finally {
      // Back to the run's test password, which every other test file logs in with.
      const { testLogin } = await import('../support/database');
      await setRolePasswords(owner, [testLogin('taskReader')]);
      await owner.close();
    }
  });

  it('refuses a role that is not the pipeline’s and a password it cannot hash portably', async () => {
    const owner = new PgSqlClient({ connectionString: database.url });
    try {
      await expect(
        setRolePasswords(owner, [{ username: 'postgres', password: 'x'.repeat(20) }]),
      ).rejects.toThrow(/not one of the pipeline's database roles/);
      await expect(
        setRolePasswords(owner, [{ username: roleName('ops'), password: 'contains a space!' }]),
      ).rejects.toThrow(/printable ASCII/);
    } finally {
      await owner.close();
    }
  });

  it('computes the keys of RFC 7677’s test vector (the server signature checks out)', () => {
    // RFC 7677 §3: user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096 iterations.
    const verifier = scramVerifier('pencil', Buffer.from('W22ZaJ0SNY7soEsUEjb6gQ==', 'base64'), 4096);
    const match = /^SCRAM-SHA-256\$4096:W22ZaJ0SNY7soEsUEjb6gQ==\$([^:]+):(.+)$/.exec(verifier);
    expect(match).not.toBeNull();
    const serverKey = Buffer.from(match?.[2] ?? '', 'base64');
    const nonce = 'rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0';
    const authMessage = `n=user,r=rOprNGfwEbeRWgbNEkqO,r=${nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=${nonce}`;
    const signature = createHmac('sha256', serverKey).update(authMessage).digest('base64');
    expect(signature).toBe('6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=');
  });
});
