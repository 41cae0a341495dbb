import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { priceBook } from '../../infra/aws/cost/prices';
import { DataApiSqlClient } from '../../shared/db/data-api-client';
import { PgSqlClient } from '../../shared/db/pg-client';
import type { SqlClient } from '../../shared/db/sql-client';
import { approveTask, createTask, createTaskOnce, withdrawTask } from '../../shared/tasks/commands';
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

  const approveStatement = (op: string, sql: string) => op === 'Execute' && /INSERT INTO outbox/.test(sql);

  it("an approve and a withdraw are one Data API call each: one round trip on the caller's path", async () => {
    const task = await createTask({ title: 'one trip' }, { db });

    const before = server.calls.length;
    await approveTask({ taskId: task.taskId, approvedBy: 'rita' }, { db });
    const approveCalls = server.calls.slice(before);
    const mid = server.calls.length;
    await withdrawTask({ taskId: task.taskId, withdrawnBy: 'rita' }, { db });

    expect(approveCalls).toEqual(['Execute']);
    expect(server.calls.slice(mid)).toEqual(['Execute']);
    // The cost and capacity models price an approve at the calls it makes.
    expect(priceBook.assumptions.approveDataApiCalls.value).toBe(approveCalls.length);
  });

  it('an approve whose answer was lost after it committed is resent by the SDK and still answers with its change (once)', async () => {
    const task = await createTask({ title: 'lost answer' }, { db });
    const lost = loseAnswers(approveStatement);

    const change = await approveTask({ taskId: task.taskId, approvedBy: 'rita' }, { db });

    // The resent statement matched nothing (the task was approved by the first); the event the
    // change chose before sending proves the approval is this one.
    expect(lost()).toHaveLength(1);
    expect(change.task).toMatchObject({ status: 'approved', version: 2 });
    const { rows } = await owner.query<{ event_id: string }>(
      'SELECT event_id FROM outbox WHERE aggregate_id = :id',
      { id: task.taskId },
    );
    expect(rows.map((r) => r.event_id)).toEqual([change.eventId]);
  });

  it('an approve whose every answer was lost (the SDK gave up) learns from its own event that it committed', async () => {
    const task = await createTask({ title: 'lost for good' }, { db });
    const lost = loseAnswers(approveStatement, 10);

    const change = await approveTask({ taskId: task.taskId, approvedBy: 'rita' }, { db });

    expect(lost().length).toBeGreaterThan(1);
    expect(change.task.status).toBe('approved');
    const { rows } = await owner.query<{ event_id: string }>(
      'SELECT event_id FROM outbox WHERE aggregate_id = :id',
      { id: task.taskId },
    );
    expect(rows.map((r) => r.event_id)).toEqual([change.eventId]);
  });

  it('a create under an Idempotency-Key is one Data API call; one whose answer was lost and resent answers the task it made, not a replay', async () => {
    const before = server.calls.length;
    const once = await createTaskOnce({ title: 'keyed, one trip' }, 'key-one-trip', { db });
    const calls = server.calls.slice(before);
    const lost = loseAnswers((op, sql) => op === 'Execute' && /INSERT INTO tasks/.test(sql));

    const created = await createTaskOnce({ title: 'keyed, answer lost' }, 'key-answer-lost', { db });

    expect(calls).toEqual(['Execute']);
    expect(once.replayed).toBe(false);
    expect(lost()).toHaveLength(1);
    // The resent INSERT found the key taken by its own first run: this create's task, made once.
    expect(created).toMatchObject({ replayed: false, task: { title: 'keyed, answer lost' } });
    const { rows } = await owner.query<{ task_id: string }>(
      "SELECT task_id FROM tasks WHERE idempotency_key = 'key-answer-lost'",
    );
    expect(rows.map((r) => r.task_id)).toEqual([created.task.taskId]);
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
