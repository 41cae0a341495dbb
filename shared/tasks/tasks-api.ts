import middy, { type MiddyfiedHandler } from '@middy/core';
import type { APIGatewayProxyResult, Context } from 'aws-lambda';
import { z } from 'zod';
import type { SqlClient } from '../db/sql-client';
import { HttpError, toFieldErrors, validationError } from '../http/http-error';
import { type ErrorLogger, httpErrors } from '../http/http-errors';
import { type JsonBodyEvent, jsonBody } from '../http/json-body';
import { jsonResponse } from '../http/responses';
import {
  approveTask,
  type Clock,
  createTask,
  getTask,
  type IdGenerator,
  type TaskChange,
  withdrawTask,
} from './commands';
import type { RelayNudger } from './relay-nudger';
import { toTaskJson } from './task-store';

/** The logging the tasks API does; a Powertools Logger fits, tests pass spies. */
export interface TasksApiLogger extends ErrorLogger {
  warn(message: string, ...extra: unknown[]): void;
}

/** Everything the tasks API needs, injected so the Lambda handler, the local runtime and tests share one API. */
export interface TasksApiDeps {
  readonly db: SqlClient;
  /** Woken after every committed approve/withdraw; a failure is logged, never returned. */
  readonly nudger: RelayNudger;
  readonly logger: TasksApiLogger;
  /** Task and event ids; defaults to `crypto.randomUUID`. */
  readonly ids?: IdGenerator;
  readonly clock?: Clock;
  /** Request body limit in bytes; defaults to 64 KB. */
  readonly maxBodyBytes?: number;
}

/** The tasks API as one callable: an API Gateway REST proxy event in, a proxy result out. */
export type TasksApi = MiddyfiedHandler<JsonBodyEvent, APIGatewayProxyResult, Error, Context>;

type RouteName = 'create' | 'get' | 'approve' | 'withdraw';

interface RouteSpec {
  /** The API Gateway resource template, as `event.resource` carries it. */
  readonly resource: string;
  /** The same path as a pattern for events that only carry `path` (the local HTTP server). */
  readonly pattern: RegExp;
  readonly methods: Readonly<Partial<Record<string, RouteName>>>;
}

const routes: readonly RouteSpec[] = [
  { resource: '/tasks', pattern: /^\/tasks$/, methods: { POST: 'create' } },
  { resource: '/tasks/{taskId}', pattern: /^\/tasks\/([^/]+)$/, methods: { GET: 'get' } },
  {
    resource: '/tasks/{taskId}/approve',
    pattern: /^\/tasks\/([^/]+)\/approve$/,
    methods: { POST: 'approve' },
  },
  {
    resource: '/tasks/{taskId}/withdraw',
    pattern: /^\/tasks\/([^/]+)\/withdraw$/,
    methods: { POST: 'withdraw' },
  },
];

/** The paths the API serves, so an infra realization (CDK resources, local server) can check it routes them all. */
export const tasksApiRoutes: readonly { readonly resource: string; readonly method: string }[] =
  routes.flatMap((r) => Object.keys(r.methods).map((method) => ({ resource: r.resource, method })));

const required = (iss: { input: unknown }) => (iss.input === undefined ? 'required' : undefined);
const text = (max: number) => z.string({ error: required }).trim().min(1, 'must not be empty').max(max);
const optionalText = (max: number) => text(max).nullable().optional();

// Strict objects: a misspelt optional field (`reson`) is reported instead of silently dropped.
const createTaskBody = z.strictObject({
  title: text(500),
  body: z.string().nullable().optional(),
  assignee: optionalText(200),
});
const approveBody = z.strictObject({ approvedBy: text(200) });
const withdrawBody = z.strictObject({ withdrawnBy: text(200), reason: optionalText(2000) });
const taskIdParam = z.uuid({ error: 'must be a UUID' });

interface ResolvedRoute {
  readonly name: RouteName;
  readonly taskId?: string;
}

/**
 * Finds the route: by `resource` + `httpMethod` behind API Gateway, else by `path` (a local
 * HTTP server fills only that, and a `{proxy+}` resource says nothing). 404 for an unknown
 * path, 405 with `Allow` for a known path and another method.
 */
function resolveRoute(event: JsonBodyEvent): ResolvedRoute {
  const method = (event.httpMethod ?? '').toUpperCase();
  const byResource = routes.find((r) => r.resource === event.resource);
  let spec: RouteSpec | undefined;
  let taskId: string | undefined;
  if (byResource) {
    spec = byResource;
    taskId = event.pathParameters?.taskId;
  } else {
    const path = (event.path ?? '').replace(/(.)\/+$/, '$1');
    for (const r of routes) {
      const match = r.pattern.exec(path);
      if (!match) continue;
      spec = r;
      taskId = match[1] === undefined ? undefined : safeDecode(match[1]);
      break;
    }
  }
  if (!spec) throw new HttpError(404, `no route for ${event.path ?? event.resource}`);
  const name = spec.methods[method];
  if (!name) {
    const allow = Object.keys(spec.methods).join(', ');
    throw new HttpError(405, `method ${method} not allowed on ${spec.resource}`, { allow }, { allow });
  }
  return { name, taskId };
}

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment; // malformed escapes fail the UUID check and get a 400
  }
}

// An absent body counts as an empty object, so a 400 names the missing fields rather than "body".
const bodyOf = (event: JsonBodyEvent): unknown => (event.jsonBody === undefined ? {} : event.jsonBody);

const fieldsOf = (result: z.ZodSafeParseResult<unknown>, prefix: readonly PropertyKey[] = []) =>
  result.success ? [] : toFieldErrors(result.error, prefix);

/**
 * Builds the tasks API: routing, validation, the task commands and the relay nudge, wrapped
 * in the JSON-body and error middlewares. The Lambda handler, the local runtime and the
 * tests all call what this returns, so they cannot drift apart.
 */
export function createTasksApi(deps: TasksApiDeps): TasksApi {
  const { db, nudger, logger, ids, clock } = deps;

  // Called only after the transaction committed: the relay must find the row when it wakes.
  async function nudgeRelay(change: TaskChange): Promise<void> {
    try {
      await nudger.nudge();
    } catch (err) {
      logger.warn('relay nudge failed; the scheduled run will deliver the event', {
        eventId: change.eventId,
        error: err,
      });
    }
  }

  function changed(change: TaskChange): APIGatewayProxyResult {
    const { task, eventId } = change;
    return jsonResponse(200, { taskId: task.taskId, status: task.status, version: task.version, eventId });
  }

  async function run(event: JsonBodyEvent): Promise<APIGatewayProxyResult> {
    const route = resolveRoute(event);
    switch (route.name) {
      case 'create': {
        const body = createTaskBody.safeParse(bodyOf(event));
        if (!body.success) throw validationError('invalid request', fieldsOf(body));
        const task = await createTask(body.data, { db, ids });
        return jsonResponse(
          201,
          { taskId: task.taskId, status: task.status, version: task.version },
          { location: `/tasks/${task.taskId}` },
        );
      }
      case 'get': {
        const id = taskIdParam.safeParse(route.taskId);
        if (!id.success) throw validationError('invalid request', fieldsOf(id, ['taskId']));
        return jsonResponse(200, toTaskJson(await getTask(id.data, { db })));
      }
      case 'approve': {
        // Id and body checked together so one 400 lists every bad field.
        const id = taskIdParam.safeParse(route.taskId);
        const body = approveBody.safeParse(bodyOf(event));
        if (!id.success || !body.success) {
          throw validationError('invalid request', [...fieldsOf(id, ['taskId']), ...fieldsOf(body)]);
        }
        const change = await approveTask(
          { taskId: id.data, approvedBy: body.data.approvedBy },
          { db, ids, clock },
        );
        await nudgeRelay(change);
        return changed(change);
      }
      case 'withdraw': {
        const id = taskIdParam.safeParse(route.taskId);
        const body = withdrawBody.safeParse(bodyOf(event));
        if (!id.success || !body.success) {
          throw validationError('invalid request', [...fieldsOf(id, ['taskId']), ...fieldsOf(body)]);
        }
        const change = await withdrawTask({ taskId: id.data, ...body.data }, { db, ids, clock });
        await nudgeRelay(change);
        return changed(change);
      }
    }
  }

  // The body is checked (413/415/400) before routing, as HTTP body parsers do; middy runs
  // `before` in `use` order and `onError` in reverse, so httpErrors sees every failure.
  return middy<JsonBodyEvent, APIGatewayProxyResult, Error, Context>(run)
    .use(httpErrors({ logger }))
    .use(jsonBody({ maxBytes: deps.maxBodyBytes }));
}
