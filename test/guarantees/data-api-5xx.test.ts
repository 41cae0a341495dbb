import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seededRandom } from '../../infra/local/faults';
import { noopRelayNudger } from '../../shared/tasks/relay-nudger';
import { createTasksApi, type TasksApi } from '../../shared/tasks/tasks-api';
import { callApi, jsonRequest } from '../integration/tasks-api-harness';
import type { DataApiOperation } from '../support/data-api-server';
import { engineEndpoint, type Harness, startHarness } from './harness';
import { scenarioTimeoutMs, sized } from './profile';

/** Share of Execute calls whose answer is lost after they ran. */
const lossRate = 0.2;
const lossy = new Set<DataApiOperation>(['Execute']);

/**
 * A client of the tasks API as a person's browser or script is: it repeats a request that got a
 * 5xx, and takes a 409 saying the task is already approved as "my earlier approve went through".
 */
async function createAndApprove(api: TasksApi, i: number): Promise<{ taskId: string; answers: number[] }> {
  const answers: number[] = [];
  let taskId: string | undefined;
  for (let attempt = 0; !taskId; attempt++) {
    if (attempt >= 10) throw new Error(`create ${i} never succeeded: ${answers.join(', ')}`);
    const created = await callApi(api, jsonRequest('POST', '/tasks', { title: `data api ${i}` }));
    answers.push(created.status);
    if (created.status === 201) taskId = created.body.taskId as string;
    else if (created.status < 500)
      throw new Error(`create ${i}: ${created.status} ${JSON.stringify(created.body)}`);
  }
  for (let attempt = 0; ; attempt++) {
    if (attempt >= 10) throw new Error(`approve ${taskId} never settled: ${answers.join(', ')}`);
    const approved = await callApi(api, jsonRequest('POST', `/tasks/${taskId}/approve`, {}));
    answers.push(approved.status);
    if (approved.status === 200) return { taskId, answers };
    if (approved.status === 409 && approved.body.currentStatus === 'approved') return { taskId, answers };
    if (approved.status < 500)
      throw new Error(`approve ${taskId}: ${approved.status} ${JSON.stringify(approved.body)}`);
  }
}

/** A name for what a Data API call runs: the operation, or the statement's first words. */
function statementOf(operation: DataApiOperation, request: Readonly<Record<string, unknown>>): string {
  if (operation !== 'Execute') return operation;
  const sql = String(request.sql ?? '').trim();
  if (sql.startsWith('WITH due')) return 'claim';
  if (sql.startsWith('WITH changed') && sql.includes("status = 'approved'")) return 'approve';
  if (sql.startsWith('INSERT INTO tasks')) return 'create';
  if (sql.startsWith('UPDATE outbox') && sql.includes("status = 'delivered'")) return 'mark delivered';
  return sql.split(/\s+/).slice(0, 2).join(' ');
}

describe('guarantee: the Data API answering 5xx after running a statement', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await startHarness({
      dynamoEndpoint: engineEndpoint('dynalite').endpoint as string,
      // Every function reaches PostgreSQL through the Data API, as on AWS.
      sql: 'data-api',
    });
  });
  afterAll(() => harness?.stop());

  it(
    'no approval is lost or doubled, every event is delivered once the answers come through',
    async () => {
      const dataApi = harness.dataApi;
      if (!dataApi) throw new Error('the harness was started without the Data API');
      const random = seededRandom(5);
      const lostAnswers: string[] = [];
      // The statement runs (and commits, outside a transaction); the caller gets a 500 instead,
      // and the SDK sends the same request again, as it does for a 5xx. The tasks API's calls
      // lose their answers at random; the relay's first claim and first delivered mark do.
      dataApi.failWhen((operation, request) => {
        const statement = statementOf(operation, request);
        const relayWrite = statement === 'claim' || statement === 'mark delivered';
        const strike = relayWrite
          ? !lostAnswers.includes(statement)
          : lossy.has(operation) && random() < lossRate;
        if (!strike) return undefined;
        lostAnswers.push(statement);
        return { name: 'InternalServerErrorException', status: 500, afterRunning: true };
      });
      const api = createTasksApi({
        db: harness.sql.tasksApi,
        nudger: noopRelayNudger,
        logger: { error: () => undefined, warn: () => undefined },
      });
      const tasks = sized(12, 200);
      const confirmed: string[] = [];
      const answers: number[] = [];
      for (let i = 0; i < tasks; i++) {
        const outcome = await createAndApprove(api, i);
        confirmed.push(outcome.taskId);
        answers.push(...outcome.answers);
      }
      const settled = await harness.settle();
      dataApi.failWhen(undefined);
      const report = await harness.check();

      // The fault happened on every path: the create, the approve's one statement, the relay's
      // claim and its mark, each ran and lost its answer.
      expect(dataApi.injected.every((f) => f.afterRunning)).toBe(true);
      for (const statement of ['create', 'approve', 'claim', 'mark delivered'])
        expect(lostAnswers).toContain(statement);
      // Every approval the API confirmed (200, or 409 "already approved") is in the database.
      const { rows } = await harness.db.query<{ task_id: string; status: string }>(
        'SELECT task_id, status FROM tasks WHERE task_id = ANY(:ids::uuid[])',
        { ids: `{${confirmed.join(',')}}` },
      );
      expect(
        rows.filter((r) => r.status !== 'approved'),
        'approvals the API confirmed (200, or 409 "already approved") that the database does not hold',
      ).toEqual([]);
      expect(rows).toHaveLength(tasks);
      expect(report.figures.approvedTasks).toBe(tasks);
      expect(report.violations).toEqual([]);
      expect(settled.quiet).toBe(true);
      // The commands absorb most lost answers (the SDK resends the statement, and the change's own
      // event id tells that the first one committed); any 5xx left the client retried.
      expect(answers.every((s) => s === 200 || s === 201 || s === 409 || s >= 500)).toBe(true);
    },
    scenarioTimeoutMs,
  );
});
