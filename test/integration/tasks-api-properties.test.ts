import { randomUUID } from 'node:crypto';
import type { APIGatewayProxyEvent } from 'aws-lambda';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpServer } from '../../infra/local/http-server';
import { localLambdaContext, toProxyEvent } from '../../shared/http/proxy-event';
import { jsonResponse } from '../../shared/http/responses';
import { tasksApiRoutes } from '../../shared/tasks/tasks-api';
import {
  anyCasing,
  anyJson,
  fieldValue,
  jsonContentType,
  nastyString,
  nastyUnit,
  wrongContentType,
} from '../support/hostile-input';
import { rawHttp } from '../support/raw-http';
import { asCaller, jsonRequest, openTasksApi, testCaller } from './tasks-api-harness';

// Property-based tests of the tasks API against embedded PostgreSQL, connected as the API's own
// role. One database for the file; each run compares the database before and after its request
// instead of resetting it. Counterexamples print with their seed: rerun with
// `fc.assert(..., { seed, path })` to replay one.

// `PROPERTY_RUNS=5000` for a deeper hunt than the default run affords.
const numRuns = Number(process.env.PROPERTY_RUNS ?? 250);
// Each run costs a few milliseconds more as the tables grow; a deep hunt needs room.
const timeout = 60_000 + numRuns * 50;

// biome-ignore lint/suspicious/noExplicitAny: the API answers arbitrary JSON
type Json = any;

interface Answer {
  readonly status: number;
  readonly headers: Record<string, unknown>;
  readonly body: Json;
}

let h: Awaited<ReturnType<typeof openTasksApi>>;

beforeAll(async () => {
  h = await openTasksApi();
});
afterAll(async () => {
  await h.close();
});

/** Calls the API; a throw (instead of an answer) fails the property like a 5xx does. */
async function call(event: APIGatewayProxyEvent): Promise<Answer> {
  const result = await h.api(event, localLambdaContext('tasks-api-properties'));
  return { status: result.statusCode, headers: result.headers ?? {}, body: JSON.parse(result.body) };
}

/** Everything the API can change, as counts and content digests of both tables. */
async function databaseState(): Promise<Record<string, unknown>> {
  const { rows } = await h.truth.query<Record<string, unknown>>(
    `SELECT (SELECT count(*) FROM tasks) AS tasks,
            (SELECT md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t.task_id), '')) FROM tasks t) AS tasks_digest,
            (SELECT count(*) FROM outbox) AS outbox,
            (SELECT md5(coalesce(string_agg(o::text, E'\\n' ORDER BY o.event_id), '')) FROM outbox o) AS outbox_digest`,
  );
  return rows[0] ?? {};
}

/** The stored row, read by the owner, not through the API. */
async function storedTask(taskId: string) {
  const { rows } = await h.truth.query<Record<string, unknown>>(
    `SELECT title, body, assignee, status, version, reviewer, withdrawn_by, withdraw_reason
       FROM tasks WHERE task_id = :taskId::uuid`,
    { taskId },
  );
  return rows[0];
}

async function storedEvent(eventId: string) {
  const { rows } = await h.truth.query<{ payload: Json; aggregate_id: string; event_type: string }>(
    'SELECT payload, aggregate_id, event_type FROM outbox WHERE event_id = :eventId::uuid',
    { eventId },
  );
  return rows[0];
}

async function createPlainTask(title = 'Property fixture'): Promise<string> {
  const res = await call(jsonRequest('POST', '/tasks', { title }));
  if (res.status !== 201) throw new Error(`fixture create answered ${res.status}`);
  return res.body.taskId;
}

// --- what a request can be --------------------------------------------------------------------

type Target = 'pending' | 'approved' | 'withdrawn' | 'unknown' | 'malformed';

/** A task id of the given kind, creating the task in that state first when it must exist. */
async function taskIdFor(target: Target, malformed: string): Promise<string> {
  if (target === 'unknown') return randomUUID();
  if (target === 'malformed') return malformed;
  const id = await createPlainTask();
  if (target === 'approved') await call(jsonRequest('POST', `/tasks/${id}/approve`, {}));
  if (target === 'withdrawn') await call(jsonRequest('POST', `/tasks/${id}/withdraw`, {}));
  return id;
}

const routeFields = {
  create: ['title', 'body', 'assignee'],
  approve: ['approvedBy'],
  withdraw: ['withdrawnBy', 'reason'],
  get: [],
} as const;
type Route = keyof typeof routeFields | 'unknown';

/** A body shaped like the route's own (its fields, any of them missing or of a wrong type), maybe with extra keys. */
function shapedBody(fields: readonly string[]): fc.Arbitrary<unknown> {
  const entries = Object.fromEntries(fields.map((f) => [f, fieldValue]));
  const own = fc.oneof(
    fc.record(entries, { requiredKeys: fields.slice(0, 1) }),
    fc.record(entries, { requiredKeys: [] }),
  );
  const extra = fc.dictionary(
    fc.oneof(nastyString, fc.constantFrom('__proto__', 'constructor', 'reson')),
    anyJson,
    {
      maxKeys: 2,
    },
  );
  const maybeExtra = fc.oneof({ arbitrary: fc.constant(null), weight: 5 }, { arbitrary: extra, weight: 1 });
  return fc.tuple(own, maybeExtra).map(([o, e]) => (e ? { ...e, ...o } : o));
}

/** The request body as text: JSON of a shaped or random value, garbage, empty, huge or deeply nested. */
function bodyText(fields: readonly string[]): fc.Arbitrary<string | null> {
  return fc.oneof(
    { arbitrary: shapedBody(fields).map((v) => JSON.stringify(v)), weight: 12 },
    { arbitrary: anyJson.map((v) => JSON.stringify(v)), weight: 2 },
    // Not JSON: raw units (a lone surrogate in raw text reaches the API as U+FFFD, as on the wire).
    { arbitrary: fc.string({ unit: nastyUnit, maxLength: 30 }), weight: 2 },
    { arbitrary: fc.constantFrom(null, '', ' ', 'null', '{}', '[]', '{"title":', '\u0000'), weight: 1 },
    // Either side of the 64 KB limit, counted in bytes.
    {
      arbitrary: fc
        .tuple(fc.integer({ min: 65_400, max: 65_600 }), fc.constantFrom('x', 'é', '\\u0000'))
        .map(([n, unit]) =>
          JSON.stringify({ title: 'Huge', body: unit.repeat(Math.floor(n / unit.length)) }),
        ),
      weight: 1,
    },
    {
      arbitrary: fc
        .integer({ min: 1, max: 30_000 })
        .map((n) => `{"${fields[0] ?? 'x'}":${'['.repeat(n)}${']'.repeat(n)}}`),
      weight: 1,
    },
  );
}

const contentTypeHeader = fc.oneof(
  { arbitrary: fc.tuple(anyCasing('content-type'), jsonContentType), weight: 8 },
  { arbitrary: fc.tuple(anyCasing('content-type'), wrongContentType), weight: 1 },
  { arbitrary: fc.constant(undefined), weight: 1 },
);

const otherHeaders = fc.dictionary(
  fc.oneof(
    fc.constantFrom('accept', 'origin', 'x-forwarded-for', 'content-length', 'transfer-encoding', 'host'),
    fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 12 }),
  ),
  fc.string({ unit: 'grapheme-ascii', maxLength: 20 }),
  { maxKeys: 3 },
);

/** Percent-encodes a path segment; a lone surrogate (which has no UTF-8) goes as U+FFFD, as a browser sends it. */
const pathSegment = (s: string) => encodeURIComponent(s.replace(/\p{Cs}/gu, '\ufffd'));

const malformedId = fc.oneof(
  nastyString,
  fc.constantFrom('', 'not-a-uuid', '00000000-0000-0000-0000-00000000000g', '%00', '..', '%2F', '%E0%A4%A'),
);

const method = fc.oneof(
  { arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'), weight: 4 },
  { arbitrary: anyCasing('post'), weight: 1 },
  { arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 8 }), weight: 1 },
);

const unknownPath = fc.oneof(
  fc.webPath(),
  nastyString.map((s) => `/${pathSegment(s)}`),
  fc.constantFrom('/', '//', '//x/tasks', '/task', '/tasks/', '/tasks//approve', '/TASKS', '/tasks/x/y/z'),
  fc.constantFrom(
    '/tasks/%2e%2e/approve',
    '/tasks?x=%zz',
    '/tasks#frag',
    '*',
    'tasks',
    'http://evil.example/tasks',
  ),
);

/** One request: which route, on which task, with which body, headers and encoding, and how it arrives. */
const anyRequest = fc.constantFrom<Route>('create', 'get', 'approve', 'withdraw', 'unknown').chain((route) =>
  fc.record({
    route: fc.constant(route),
    target: fc.constantFrom<Target>('pending', 'pending', 'approved', 'withdrawn', 'unknown', 'malformed'),
    malformedId,
    // The route's own method most of the time, any method otherwise.
    method: fc.oneof({ arbitrary: fc.constant(null), weight: 6 }, { arbitrary: method, weight: 1 }),
    unknownPath,
    // Mostly a body shaped like the route's own; GET and unknown routes get one of another route's.
    body:
      route === 'get' || route === 'unknown' ? bodyText(routeFields.create) : bodyText(routeFields[route]),
    contentType: contentTypeHeader,
    headers: otherHeaders,
    base64: fc.boolean(),
    // As the local server builds it (the resource matched from its path) or as API Gateway sends it.
    gateway: fc.boolean(),
  }),
);
type AnyRequest = typeof anyRequest extends fc.Arbitrary<infer T> ? T : never;

const routeOf = {
  create: { method: 'POST', resource: '/tasks', path: () => '/tasks' },
  get: { method: 'GET', resource: '/tasks/{taskId}', path: (id: string) => `/tasks/${id}` },
  approve: {
    method: 'POST',
    resource: '/tasks/{taskId}/approve',
    path: (id: string) => `/tasks/${id}/approve`,
  },
  withdraw: {
    method: 'POST',
    resource: '/tasks/{taskId}/withdraw',
    path: (id: string) => `/tasks/${id}/withdraw`,
  },
} as const;

function eventFor(req: AnyRequest, taskId: string): APIGatewayProxyEvent {
  const headers: Record<string, string> = { ...req.headers };
  if (req.contentType) headers[req.contentType[0]] = req.contentType[1];
  const body = req.body === null ? null : req.base64 ? new TextEncoder().encode(req.body) : req.body;
  if (req.route === 'unknown') {
    return toProxyEvent({ method: req.method ?? 'GET', url: req.unknownPath, headers, body }, tasksApiRoutes);
  }
  const route = routeOf[req.route];
  const method = req.method ?? route.method;
  // Sent by a caller API Gateway vouches for (a body naming a reviewer is one of the random fields).
  const event = asCaller(
    toProxyEvent({ method, url: route.path(pathSegment(taskId)), headers, body }, tasksApiRoutes),
    testCaller,
  );
  if (!req.gateway) return event;
  return {
    ...event,
    resource: route.resource,
    path: route.path(taskId),
    pathParameters: req.route === 'create' ? null : { taskId },
  };
}

// --- an oracle of what the API accepts, written from its contract, not from its code ---------

const loneSurrogate = /\p{Cs}/u;

/** Why PostgreSQL `text` could not hold `s` as sent: NUL is refused, a lone surrogate has no UTF-8. */
function unstorable(s: string): boolean {
  return s.includes('\u0000') || loneSurrogate.test(s);
}

/** Whether `value` is a valid trimmed text field of at most `max` code points. */
function badText(value: unknown, max: number, nullable: boolean): boolean {
  if (value === undefined) return !nullable;
  if (value === null) return !nullable;
  if (typeof value !== 'string') return true;
  const trimmed = value.trim();
  return trimmed.length === 0 || [...trimmed].length > max || unstorable(trimmed);
}

/** What the API stores for a trimmed field: its schema trims (String.prototype.trim), nothing else. */
const trimmedOrNull = (value: unknown) => (typeof value === 'string' ? value.trim() : null);

describe('tasks API under random requests', () => {
  it(
    'answers every request with a 2xx or a 4xx, never a 5xx or a throw, and a 4xx changes nothing',
    async () => {
      await fc.assert(
        fc.asyncProperty(anyRequest, async (req) => {
          const taskId = await taskIdFor(req.target, req.malformedId);
          const event = eventFor(req, taskId);
          const before = await databaseState();

          const res = await call(event);

          expect(res.status, JSON.stringify(res.body)).toBeGreaterThanOrEqual(200);
          expect(res.status, JSON.stringify(res.body)).toBeLessThan(500);
          expect(res.headers['content-type']).toMatch(/^application\/json/);
          if (res.status >= 400) {
            expect(res.body).toEqual(expect.objectContaining({ error: expect.any(String) }));
            expect(await databaseState()).toEqual(before);
          }
        }),
        { numRuns },
      );
      expect(h.logger.error).not.toHaveBeenCalled();
    },
    timeout,
  );
});

describe('tasks API stores what it accepts verbatim', () => {
  const createInput = fc.record(
    {
      title: fc.oneof({ arbitrary: nastyString, weight: 8 }, { arbitrary: fieldValue, weight: 1 }),
      body: fc.oneof(nastyString, fc.constant(null), fc.string({ unit: nastyUnit, maxLength: 3000 })),
      assignee: fc.oneof(nastyString, fc.constant(null)),
    },
    { requiredKeys: ['title'] },
  );

  it(
    'a created task reads back (GET and SQL) as its schema parses the input, and a 400 names each bad field',
    async () => {
      await fc.assert(
        fc.asyncProperty(createInput, fc.boolean(), async (input, base64) => {
          const before = await databaseState();
          const json = JSON.stringify(input);
          const res = await call(
            toProxyEvent(
              {
                method: 'POST',
                url: '/tasks',
                headers: { 'content-type': 'application/json' },
                body: base64 ? new TextEncoder().encode(json) : json,
              },
              tasksApiRoutes,
            ),
          );

          const bad = new Set<string>();
          if (badText(input.title, 500, false)) bad.add('title');
          if (input.body !== undefined && input.body !== null && unstorable(input.body)) bad.add('body');
          if (badText(input.assignee, 200, true)) bad.add('assignee');
          if (bad.size > 0) {
            expect(res.status).toBe(400);
            expect(new Set(res.body.fields.map((f: { path: string }) => f.path))).toEqual(bad);
            expect(await databaseState()).toEqual(before);
            return;
          }
          expect(res.status).toBe(201);
          const expected = {
            title: trimmedOrNull(input.title),
            body: input.body ?? null,
            assignee: trimmedOrNull(input.assignee),
          };
          expect(res.body).toEqual({ taskId: expect.any(String), status: 'pending_review', version: 1 });
          expect(res.headers.location).toBe(`/tasks/${res.body.taskId}`);
          const got = await call(jsonRequest('GET', `/tasks/${res.body.taskId}`, undefined, {}));
          expect(got.status).toBe(200);
          expect(got.body).toMatchObject({ ...expected, taskId: res.body.taskId, status: 'pending_review' });
          expect(await storedTask(res.body.taskId)).toMatchObject(expected);
        }),
        { numRuns },
      );
    },
    timeout,
  );

  const changeInput = fc.record({
    verb: fc.constantFrom('approve', 'withdraw'),
    // A nasty title too (when the API accepts it), since the event carries the title.
    title: fc.option(nastyString, { freq: 2 }),
    approveFirst: fc.boolean(),
    // The caller's identity, as the platform vouches for it (API Gateway: the IAM principal's ARN).
    who: fc.option(nastyString, { freq: 8 }),
    reason: fc.option(fc.oneof(nastyString, fc.string({ unit: nastyUnit, maxLength: 2100 })), { freq: 2 }),
  });

  it(
    'an approve or withdraw stores the person and reason as parsed, in the task and in its event',
    async () => {
      await fc.assert(
        fc.asyncProperty(changeInput, async (input) => {
          const created = await call(jsonRequest('POST', '/tasks', { title: input.title ?? 'Plain' }));
          const taskId = created.status === 201 ? created.body.taskId : await createPlainTask();
          const approve = input.verb === 'approve';
          if (!approve && input.approveFirst) {
            await call(asCaller(jsonRequest('POST', `/tasks/${taskId}/approve`, {}), 'first'));
          }
          const body = approve ? {} : { reason: input.reason };
          const before = await databaseState();

          const res = await call(
            asCaller(jsonRequest('POST', `/tasks/${taskId}/${input.verb}`, body), input.who),
          );

          const bad = new Set<string>();
          if (!approve && badText(input.reason, 2000, true)) bad.add('reason');
          if (bad.size > 0) {
            expect(res.status).toBe(400);
            expect(new Set(res.body.fields.map((f: { path: string }) => f.path))).toEqual(bad);
            expect(await databaseState()).toEqual(before);
            return;
          }
          // An identity no one could store (blank, NUL, a lone surrogate, past an ARN's 2,048) is nobody's.
          if (badText(input.who, 2048, false)) {
            expect(res.status).toBe(403);
            expect(await databaseState()).toEqual(before);
            return;
          }
          expect(res.status).toBe(200);
          const task = await storedTask(taskId);
          const who = trimmedOrNull(input.who);
          const reason = approve ? null : trimmedOrNull(input.reason);
          const got = await call(jsonRequest('GET', `/tasks/${taskId}`, undefined, {}));
          const event = await storedEvent(res.body.eventId);
          expect(event?.aggregate_id).toBe(taskId);
          if (approve) {
            expect(task).toMatchObject({ status: 'approved', reviewer: who });
            expect(got.body).toMatchObject({ status: 'approved', reviewer: who, title: task?.title });
            expect(event?.payload).toMatchObject({ reviewer: who, title: task?.title });
          } else {
            expect(task).toMatchObject({ status: 'withdrawn', withdrawn_by: who, withdraw_reason: reason });
            expect(got.body).toMatchObject({ withdrawnBy: who, withdrawReason: reason, title: task?.title });
            expect(event?.payload).toMatchObject({ withdrawnBy: who, reason, title: task?.title });
          }
          if (input.title !== null && created.status === 201) expect(task?.title).toBe(input.title.trim());
        }),
        { numRuns },
      );
    },
    timeout,
  );
});

describe('the local HTTP server in front of the tasks API', () => {
  let server: Awaited<ReturnType<typeof startHttpServer>>;

  beforeAll(async () => {
    server = await startHttpServer({
      host: '127.0.0.1',
      port: 0,
      tasksApi: h.api,
      // Not under test here: the ops API has its own tests; this one answers every call the same.
      opsApi: async () => jsonResponse(404, { error: 'not the ops API' }),
      dashboardHtml: () => '<!doctype html><title>dashboard</title>',
      caller: 'local:tester',
    });
  });
  afterAll(async () => {
    await new Promise((resolve) => server.server.close(resolve));
  });

  // What node:http lets a client put on the request line: any token method, any target without spaces.
  const targetChar = fc.constantFrom(...'/abcxyzTASK0123456789-._~%?#&=+:@!$\'()*,;[]\\^`{|}"<>'.split(''));
  const target = fc.oneof(
    unknownPath.filter((p) => /^[\x21-\x7e]*$/.test(p) && p.length > 0),
    fc.string({ unit: targetChar, minLength: 1, maxLength: 30 }),
    fc.uuid().map((id) => `/tasks/${id}`),
    fc.constantFrom(
      '/tasks',
      '/tasks/',
      '//tasks',
      '/tasks/../ops/status',
      '/ops/status',
      '/index.html',
      '/',
    ),
  );
  const token = fc.string({
    unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABC-_!#$%&*+.^`|~0123'.split('')),
    minLength: 1,
    maxLength: 10,
  });
  const rawRequest = fc.record({
    method: fc.oneof(fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'), token),
    target,
    headers: fc.array(
      fc.tuple(
        fc.oneof(anyCasing('content-type'), anyCasing('origin'), anyCasing('accept'), token),
        fc.string({ unit: 'grapheme-ascii', maxLength: 30 }),
      ),
      { maxLength: 4 },
    ),
    contentType: fc.oneof(
      jsonContentType,
      wrongContentType.filter((t) => /^[\x20-\x7e]*$/.test(t)),
    ),
    body: bodyText(routeFields.create),
  });

  it('reads a target that starts with // as a path, not as a host: //x/tasks is no route, not POST /tasks', async () => {
    const before = await databaseState();

    const res = await rawHttp(server.url, {
      method: 'POST',
      target: '//evil.example/tasks',
      headers: [['content-type', 'application/json']],
      body: JSON.stringify({ title: 'Smuggled' }),
    });

    expect(res.status).toBe(404);
    expect(await databaseState()).toEqual(before);
  });

  it(
    'answers every request on the wire with a 2xx or a 4xx, never a 5xx',
    async () => {
      await fc.assert(
        fc.asyncProperty(rawRequest, async (req) => {
          const headers = [...req.headers, ['content-type', req.contentType] as const].filter(
            ([name]) => !/^(content-length|transfer-encoding|host|connection|expect|upgrade)$/i.test(name),
          );
          const res = await rawHttp(server.url, {
            method: req.method,
            target: req.target,
            headers,
            body: req.body,
          });

          expect(res.status, `${req.method} ${req.target}: ${res.body}`).toBeGreaterThanOrEqual(200);
          expect(res.status, `${req.method} ${req.target}: ${res.body}`).toBeLessThan(500);
          // Every refusal explains itself in JSON (a HEAD answer has no body at all).
          if (res.status >= 400 && req.method !== 'HEAD') {
            expect(String(res.headers['content-type']), `${req.method} ${req.target}`).toMatch(/json/);
            expect(typeof JSON.parse(res.body).error, `${req.method} ${req.target}: ${res.body}`).toBe(
              'string',
            );
          }
        }),
        { numRuns: Math.ceil(numRuns / 2) },
      );
    },
    timeout,
  );
});
