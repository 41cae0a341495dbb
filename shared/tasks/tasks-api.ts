import middy, { type MiddyfiedHandler } from '@middy/core';
import type { APIGatewayProxyResult, Context } from 'aws-lambda';
import * as z from 'zod';
import type { SqlClient } from '../db/sql-client';
import { type CallerIdentity, iamCaller } from '../http/caller';
import { type ErrorLogger, HttpError, httpErrors, validationError } from '../http/error-responses';
import {
  idempotencyKeyHeader,
  idempotentReplayedHeader,
  maxIdempotencyKeyLength,
} from '../http/idempotency-key';
import { type JsonBodyEvent, jsonBody } from '../http/json-body';
import { jsonResponse } from '../http/responses';
import { createRouter, type Route, routeFor } from '../http/router';
import {
  approveTask,
  type Clock,
  createTask,
  createTaskOnce,
  getTask,
  type IdGenerator,
  rejectTask,
  type TaskChange,
  withdrawTask,
} from './commands';
import type { RelayNudger } from './relay-nudger';
import { listTasks, type TaskListKey, type TaskStatus, toTaskJson } from './task-store';

/** The logging the tasks API does; a Powertools Logger fits, tests pass spies. */
export interface TasksApiLogger extends ErrorLogger {
  warn(message: string, ...extra: unknown[]): void;
}

/** Everything the tasks API needs, injected so the Lambda handler, the local runtime and tests share one API. */
export interface TasksApiDeps {
  readonly db: SqlClient;
  /** Woken after a committed approve/reject/withdraw that found no relay run draining; a failure is logged, never returned. */
  readonly nudger: RelayNudger;
  readonly logger: TasksApiLogger;
  /** Task and event ids; defaults to `crypto.randomUUID`. */
  readonly ids?: IdGenerator;
  readonly clock?: Clock;
  /** Request body limit in bytes; defaults to 64 KB. */
  readonly maxBodyBytes?: number;
  /**
   * Who is calling, recorded as the reviewer of an approval or a rejection and the withdrawer of a withdrawal.
   * Defaults to the IAM principal API Gateway authenticated; the local runtime passes the
   * header its server sets from its configuration.
   */
  readonly caller?: CallerIdentity;
}

/** The tasks API as one callable: an API Gateway REST proxy event in, a proxy result out. */
export type TasksApi = MiddyfiedHandler<JsonBodyEvent, APIGatewayProxyResult, Error, Context>;

/** How many tasks one `GET /tasks` page holds unless `limit` says, and at most. */
export const taskListLimits = { default: 20, max: 100 } as const;

const required = (iss: { input: unknown }) => (iss.input === undefined ? 'required' : undefined);

// With the `u` flag a well-formed pair is one code point, so `\p{Cs}` matches only a lone surrogate.
const loneSurrogate = /\p{Cs}/u;

/**
 * A JSON string PostgreSQL `text` can hold as sent. It refuses NUL outright (an error, once a
 * 500), and a lone surrogate (a JSON `"\ud800"` escape) has no UTF-8 form: the driver would store
 * U+FFFD instead, so what reads back would not be what was accepted. Both are a 400 naming the field.
 */
const storableString = () =>
  z
    .string({ error: required })
    .refine((s) => !s.includes('\u0000'), 'must not contain NUL (U+0000)')
    .refine((s) => !loneSurrogate.test(s), 'must not contain a lone UTF-16 surrogate');
// Trimmed, then measured. A pipe rather than `.trim().max(n)`: the request model API Gateway
// checks is this schema's JSON Schema, and zod writes `.trim().max(n)` as a `maxLength` on the
// untrimmed input, which would refuse a padded value the function accepts. The pipe's input is
// the plain string, so the model leaves lengths to the function's field-by-field 400.
const text = (max: number) =>
  storableString()
    .transform((s) => s.trim())
    .pipe(z.string().min(1, 'must not be empty').max(max));
const optionalText = (max: number) => text(max).nullable().optional();

/** A task's title as the API accepts it (a notification's subject is cut from it). */
export const taskTitle = text(500);

// Strict objects: a misspelt optional field (`reson`) is reported instead of silently dropped.
const createTaskBody = z.strictObject({
  title: taskTitle,
  body: storableString().nullable().optional(),
  assignee: optionalText(200),
});
/**
 * A key as the API takes it: 1 to 255 printable ASCII characters (space to tilde). What a client
 * generates (a UUID, a hash, its own request id) is that; a control character or a byte outside
 * ASCII (which HTTP passes as Latin-1) is a client's mistake, refused with a 400 rather than
 * stored as a key no retry would spell the same.
 */
const idempotencyKey = z
  .string()
  .min(1, 'must not be empty')
  .max(maxIdempotencyKeyLength, `must be at most ${maxIdempotencyKeyLength} characters`)
  .regex(/^[\x20-\x7e]*$/, 'must be printable ASCII characters only (space to ~)');

/**
 * `POST /tasks` reads one header: an `Idempotency-Key`, optional. With it, the create can be sent
 * again after any failure (a 503, a 504, a lost connection) and makes one task: the same key
 * with the same request answers that task (201, `Idempotent-Replayed: true`).
 */
const createTaskHeaders = z.object({ [idempotencyKeyHeader]: idempotencyKey.optional() });
// No `approvedBy` or `withdrawnBy`: who approves or withdraws is the caller the platform
// authenticated, never a name in the body (which any caller could set to anyone's). A body that
// still names one is refused with a 400 saying so, and changes nothing.
const notInBody = (field: string) =>
  z
    .never({
      error: `not accepted: the ${field} recorded is the caller's identity (the IAM principal on AWS)`,
    })
    .optional();
const approveBody = z.strictObject({ approvedBy: notInBody('reviewer') });
const withdrawBody = z.strictObject({ withdrawnBy: notInBody('withdrawer'), reason: optionalText(2000) });
// The reason is required: it is the answer the task's assignee gets.
const rejectBody = z.strictObject({ rejectedBy: notInBody('rejecter'), reason: text(1000) });

/** `status=` of `GET /tasks`: a task's status as every answer names it; `pending` is short for `pending_review`. */
const listStatus = z
  .enum(['pending_review', 'pending', 'approved', 'withdrawn', 'rejected'], {
    error: 'must be one of pending_review (or pending), approved, withdrawn, rejected',
  })
  .transform((s): TaskStatus => (s === 'pending' ? 'pending_review' : s));
const listLimit = z
  .string()
  .regex(/^\d{1,3}$/, `must be a whole number from 1 to ${taskListLimits.max}`)
  .transform(Number)
  .pipe(
    z
      .number()
      .min(1, `must be a whole number from 1 to ${taskListLimits.max}`)
      .max(taskListLimits.max, `must be a whole number from 1 to ${taskListLimits.max}`),
  );
/** What a cursor holds: the last row's key, and the status filter it was given for. */
const cursorContent = z.strictObject({
  s: z.string().nullable(),
  at: z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/),
  id: z.uuid(),
});
const listQuery = z.strictObject({
  status: listStatus.optional(),
  limit: listLimit.optional(),
  cursor: z.string().max(500, 'is not a cursor this API gave').optional(),
});

/** The opaque `nextCursor`: base64url JSON, so a caller passes it back as given. */
function encodeListCursor(status: TaskStatus | undefined, key: TaskListKey): string {
  return Buffer.from(JSON.stringify({ s: status ?? null, at: key.createdAt, id: key.taskId })).toString(
    'base64url',
  );
}

/** A cursor back to the key it holds; `undefined` when it is not one this API gave for this status. */
function decodeListCursor(cursor: string, status: TaskStatus | undefined): TaskListKey | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  const content = cursorContent.safeParse(parsed);
  if (!content.success || content.data.s !== (status ?? null)) return undefined;
  return { createdAt: content.data.at, taskId: content.data.id };
}
const taskIdParams = z.object({ taskId: z.uuid({ error: 'must be a UUID' }) });
// An IAM ARN is at most 2,048 characters: https://docs.aws.amazon.com/IAM/latest/APIReference/API_User.html
const callerIdentity = storableString().max(2048);

/** What the tasks routes' handlers use, built once per API by {@link createTasksApi}. */
export interface TasksRouteDeps {
  readonly db: SqlClient;
  readonly ids?: IdGenerator;
  readonly clock?: Clock;
  /** The caller to record as reviewer, rejecter or withdrawer; throws a 403 when none is usable. */
  caller(event: JsonBodyEvent): string;
  /** Wakes the relay after a committed change; a failure is logged, never thrown. */
  nudgeRelay(change: TaskChange): Promise<void>;
}

function changed(change: TaskChange): APIGatewayProxyResult {
  const { task, eventId } = change;
  return jsonResponse(200, { taskId: task.taskId, status: task.status, version: task.version, eventId });
}

const route = routeFor<TasksRouteDeps>();

/**
 * The tasks API's routes: each one's resource, method, schemas and handler. The router
 * dispatches from this table, the local server matches resources with it, and the CDK builds
 * the API Gateway resources, methods, query parameters and request models from it.
 */
export const tasksApiRoutes: readonly Route<TasksRouteDeps>[] = [
  route({
    method: 'POST',
    resource: '/tasks',
    body: createTaskBody,
    headers: createTaskHeaders,
    handler: async ({ body, headers }, { db, ids }) => {
      const key = headers[idempotencyKeyHeader];
      const { task, replayed } =
        key === undefined
          ? { task: await createTask(body, { db, ids }), replayed: false }
          : await createTaskOnce(body, key, { db, ids });
      // A replay answers as the first create did, the task as it is now.
      return jsonResponse(
        201,
        { taskId: task.taskId, status: task.status, version: task.version },
        { location: `/tasks/${task.taskId}`, ...(replayed ? { [idempotentReplayedHeader]: 'true' } : {}) },
      );
    },
  }),
  route({
    method: 'GET',
    resource: '/tasks',
    query: listQuery,
    handler: async ({ query }, { db }) => {
      const { status, limit = taskListLimits.default, cursor } = query;
      const after = cursor === undefined ? undefined : decodeListCursor(cursor, status);
      if (cursor !== undefined && !after) {
        throw validationError('invalid request', [
          {
            path: 'cursor',
            message:
              'is not a cursor this API gave for this status: pass nextCursor as given, with the same status',
          },
        ]);
      }
      const page = await listTasks(db, { status, limit, after });
      return jsonResponse(200, {
        tasks: page.tasks,
        nextCursor: page.next ? encodeListCursor(status, page.next) : null,
      });
    },
  }),
  route({
    method: 'GET',
    resource: '/tasks/{taskId}',
    params: taskIdParams,
    handler: async ({ params }, { db }) =>
      jsonResponse(200, toTaskJson(await getTask(params.taskId, { db }))),
  }),
  route({
    method: 'POST',
    resource: '/tasks/{taskId}/approve',
    params: taskIdParams,
    body: approveBody,
    handler: async ({ event, params }, deps) => {
      const { db, ids, clock } = deps;
      const change = await approveTask(
        { taskId: params.taskId, approvedBy: deps.caller(event) },
        { db, ids, clock },
      );
      await deps.nudgeRelay(change);
      return changed(change);
    },
  }),
  route({
    method: 'POST',
    resource: '/tasks/{taskId}/reject',
    params: taskIdParams,
    body: rejectBody,
    handler: async ({ event, params, body }, deps) => {
      const { db, ids, clock } = deps;
      const change = await rejectTask(
        { taskId: params.taskId, rejectedBy: deps.caller(event), reason: body.reason },
        { db, ids, clock },
      );
      await deps.nudgeRelay(change);
      return changed(change);
    },
  }),
  route({
    method: 'POST',
    resource: '/tasks/{taskId}/withdraw',
    params: taskIdParams,
    body: withdrawBody,
    handler: async ({ event, params, body }, deps) => {
      const { db, ids, clock } = deps;
      const change = await withdrawTask(
        { taskId: params.taskId, withdrawnBy: deps.caller(event), reason: body.reason },
        { db, ids, clock },
      );
      await deps.nudgeRelay(change);
      return changed(change);
    },
  }),
];

const dispatch = createRouter(tasksApiRoutes);

/**
 * Builds the tasks API: routing, validation, the task commands and the relay nudge, wrapped
 * in the JSON-body and error middlewares. The Lambda handler, the local runtime and the
 * tests all call what this returns, so they cannot drift apart.
 */
export function createTasksApi(deps: TasksApiDeps): TasksApi {
  const { db, nudger, logger, ids, clock } = deps;
  const callerOf = deps.caller ?? iamCaller;

  const routeDeps: TasksRouteDeps = {
    db,
    ids,
    clock,
    /**
     * The caller to record. A request no one vouches for changes nothing (403), nor does an
     * identity PostgreSQL could not store as sent (NUL, a lone surrogate) or longer than an IAM
     * ARN may be (2,048): no platform sends one, so it is nobody's.
     */
    caller(event) {
      const who = callerOf(event)?.trim();
      if (!who) throw new HttpError(403, 'no caller identity: the request was not authenticated');
      if (!callerIdentity.safeParse(who).success)
        throw new HttpError(403, 'the caller identity is not usable');
      return who;
    },
    // Called only after the change committed: the relay must find the row when it wakes. A change
    // that found a relay run draining leaves it to that run: at a thousand approvals a second a
    // nudge each would start a thousand invocations to find the work taken.
    async nudgeRelay(change) {
      if (!change.relayIdle) return;
      try {
        await nudger.nudge();
      } catch (err) {
        logger.warn('relay nudge failed; the scheduled run will deliver the event', {
          eventId: change.eventId,
          error: err,
        });
      }
    },
  };

  // The body is checked (413/415/400) before routing, as HTTP body parsers do; middy runs
  // `before` in `use` order and `onError` in reverse, so httpErrors sees every failure.
  return middy<JsonBodyEvent, APIGatewayProxyResult, Error, Context>(
    (event: JsonBodyEvent, context: Context) => dispatch(event, context, routeDeps),
  )
    .use(httpErrors({ logger }))
    .use(jsonBody({ maxBytes: deps.maxBodyBytes }));
}
