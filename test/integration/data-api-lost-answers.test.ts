import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DataApiSqlClient } from '../../shared/db/data-api-client';
import { PgSqlClient } from '../../shared/db/pg-client';
import type { SqlClient } from '../../shared/db/sql-client';
import { approveTask, createTask } from '../../shared/tasks/commands';
import { type DataApiServer, startDataApiServer } from '../support/data-api-server';
import { createTestDatabase, type TestDatabase } from '../support/database';

// A Data API call that ran but whose answer was lost (a 5xx after the statement ran): the SDK
// sends it again unless told not to, and inside a transaction that runs the statement twice.
describe('Data API answers lost after the statement ran', () => {
  let database: TestDatabase;
  let owner: SqlClient;
  let server: DataApiServer;
  let client: RDSDataClient;
  let db: DataApiSqlClient;

  beforeAll(async () => {
    database = await createTestDatabase();
    owner = new PgSqlClient({ connectionString: database.url });
    server = await startDataApiServer(database.urlAs('tasksApi'));
    client = new RDSDataClient({
      endpoint: server.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    db = new DataApiSqlClient({
      client,
      resourceArn: server.resourceArn,
      secretArn: server.secretArn,
      database: server.database,
      retry: { attempts: 3, baseMs: 1, maxMs: 5 },
    });
  });
  afterAll(async () => {
    client.destroy();
    await server.close();
    await owner.close();
    await database.drop();
  });
  beforeEach(() => server.failWhen(undefined));

  /** Loses the answer of the first `count` calls that `match`, after running them; returns what was lost. */
  function loseAnswers(match: (operation: string, sql: string) => boolean, count = 1) {
    let left = count;
    const before = server.injected.length;
    const lost = () => server.injected.slice(before);
    server.failWhen((operation, request) => {
      if (left === 0 || !match(operation, String(request.sql ?? ''))) return undefined;
      left--;
      return { name: 'InternalServerErrorException', status: 500, afterRunning: true };
    });
    return lost;
  }

  it('an approve whose UPDATE answer was lost runs again in a new transaction and succeeds (once)', async () => {
    const task = await createTask({ title: 'lost update' }, { db });
    const lost = loseAnswers((op, sql) => op === 'Execute' && sql.trimStart().startsWith('UPDATE tasks'));

    const change = await approveTask({ taskId: task.taskId, approvedBy: 'rita' }, { db });

    expect(lost()).toHaveLength(1);
    expect(change.task).toMatchObject({ status: 'approved', version: 2 });
    const { rows } = await owner.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM outbox WHERE aggregate_id = :id',
      { id: task.taskId },
    );
    expect(rows[0]?.n).toBe(1);
  });

  it('an approve whose commit answer was lost learns from its own event that it committed', async () => {
    const task = await createTask({ title: 'lost commit' }, { db });
    const lost = loseAnswers((op) => op === 'CommitTransaction');

    const change = await approveTask({ taskId: task.taskId, approvedBy: 'rita' }, { db });

    expect(lost()).toMatchObject([{ operation: 'CommitTransaction', afterRunning: true }]);
    expect(change.task.status).toBe('approved');
    const { rows } = await owner.query<{ event_id: string }>(
      'SELECT event_id FROM outbox WHERE aggregate_id = :id',
      { id: task.taskId },
    );
    expect(rows.map((r) => r.event_id)).toEqual([change.eventId]);
  });

  it('a create whose INSERT answer was lost (and resent by the SDK) returns the one task it wrote', async () => {
    const lost = loseAnswers(
      (op, sql) => op === 'Execute' && sql.trimStart().startsWith('INSERT INTO tasks'),
    );

    const task = await createTask({ title: 'lost insert', assignee: 'al' }, { db });

    expect(lost()).toHaveLength(1);
    const { rows } = await owner.query<{ title: string }>(
      "SELECT title FROM tasks WHERE title = 'lost insert'",
    );
    expect(rows).toHaveLength(1);
    expect(task).toMatchObject({ title: 'lost insert', assignee: 'al', status: 'pending_review' });
  });
});
