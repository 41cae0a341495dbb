import type { APIGatewayProxyEvent } from 'aws-lambda';
import { vi } from 'vitest';
import { PgSqlClient } from '../../shared/db/pg-client';
import type { SqlClient } from '../../shared/db/sql-client';
import { localLambdaContext, toProxyEvent } from '../../shared/http/proxy-event';
import type { RelayNudger } from '../../shared/tasks/relay-nudger';
import { createTasksApi, type TasksApi, tasksApiRoutes } from '../../shared/tasks/tasks-api';
import { createTestDatabase } from '../support/database';

/** A parsed API answer. */
export interface ApiAnswer {
  readonly status: number;
  readonly headers: Record<string, string | number | boolean>;
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON response fields
  readonly body: any;
}

/** Calls the API with a proxy event and parses the JSON answer. */
export async function callApi(api: TasksApi, event: APIGatewayProxyEvent): Promise<ApiAnswer> {
  const result = await api(event, localLambdaContext('tasks-api-test'));
  return { status: result.statusCode, headers: result.headers ?? {}, body: JSON.parse(result.body) };
}

/** The caller a test request comes from unless it says otherwise (what API Gateway puts in `userArn`). */
export const testCaller = 'rita';

/** `event` as sent by `caller` (the IAM principal API Gateway vouches for); `null`: nobody vouches. */
export function asCaller(event: APIGatewayProxyEvent, caller: string | null): APIGatewayProxyEvent {
  return {
    ...event,
    requestContext: {
      ...event.requestContext,
      identity: { ...event.requestContext.identity, userArn: caller },
    },
  };
}

/**
 * A JSON request through `toProxyEvent`, its resource filled from the API's route table as the
 * local server fills it, sent by {@link testCaller}.
 */
export function jsonRequest(
  method: string,
  url: string,
  body?: unknown,
  headers: Record<string, string> = { 'Content-Type': 'application/json' },
): APIGatewayProxyEvent {
  const event = toProxyEvent(
    {
      method,
      url,
      headers,
      body: body === undefined ? null : typeof body === 'string' ? body : JSON.stringify(body),
    },
    tasksApiRoutes,
  );
  return asCaller(event, testCaller);
}

/**
 * The tasks API on a fresh migrated database, connected as the tasks API's own role (`db(url)`
 * gets that role's URL), with spy logger and nudger, and a separate owner client to check the database.
 */
export async function openTasksApi(options: { db?: (url: string) => SqlClient; nudger?: RelayNudger } = {}) {
  const database = await createTestDatabase();
  const truth = new PgSqlClient({ connectionString: database.url });
  const roleUrl = database.urlAs('tasksApi');
  const db = options.db?.(roleUrl) ?? new PgSqlClient({ connectionString: roleUrl });
  const logger = { error: vi.fn(), warn: vi.fn() };
  const nudger = options.nudger ?? { nudge: vi.fn(async () => {}) };
  const api = createTasksApi({ db, nudger, logger });
  return {
    url: database.url,
    api,
    db,
    truth,
    logger,
    nudger,
    call: (event: APIGatewayProxyEvent) => callApi(api, event),
    async close() {
      await db.close();
      await truth.close();
      await database.drop();
    },
  };
}

/** Every outbox row, oldest first. */
export async function outboxRows(truth: SqlClient) {
  const { rows } = await truth.query<{
    event_id: string;
    event_type: string;
    aggregate_id: string;
    aggregate_version: number;
    payload: unknown;
    status: string;
  }>(
    `SELECT event_id, event_type, aggregate_id, aggregate_version, payload, status
       FROM outbox ORDER BY created_at`,
  );
  return rows;
}

/** The raw tasks row (status and version), or undefined. */
export async function taskState(truth: SqlClient, taskId: string) {
  const { rows } = await truth.query<{ status: string; version: number; reviewer: string | null }>(
    'SELECT status, version, reviewer FROM tasks WHERE task_id = :taskId::uuid',
    { taskId },
  );
  return rows[0];
}
