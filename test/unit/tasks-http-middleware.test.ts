import middy from '@middy/core';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { describe, expect, it, vi } from 'vitest';
import { PipelineError } from '../../shared/errors';
import { HttpError, httpErrors } from '../../shared/http/error-responses';
import { type JsonBodyEvent, jsonBody } from '../../shared/http/json-body';
import { localLambdaContext, toProxyEvent } from '../../shared/http/proxy-event';
import { retryAfterSeconds } from '../../shared/http/unavailable';

// The middlewares do not route: the events name no API resource.
const noRoutes = [] as const;

/** A handler behind both middlewares that echoes the parsed body, or throws what it is given. */
function echo(options: { maxBytes?: number; fail?: unknown } = {}) {
  const logger = { error: vi.fn() };
  const handler = middy<JsonBodyEvent, APIGatewayProxyResult>(async (event: JsonBodyEvent) => {
    if (options.fail !== undefined) throw options.fail;
    return { statusCode: 200, body: JSON.stringify({ got: event.jsonBody ?? null }) };
  })
    .use(httpErrors({ logger }))
    .use(jsonBody({ maxBytes: options.maxBytes }));
  const call = async (
    body: string | null,
    headers: Record<string, string> = { 'content-type': 'application/json' },
  ) => {
    const res = await handler(
      toProxyEvent({ method: 'POST', url: '/x', headers, body }, noRoutes),
      localLambdaContext('t'),
    );
    // Headers out of the enumerable fields, so a whole answer compares as { status, body }.
    return Object.defineProperty({ status: res.statusCode, body: JSON.parse(res.body) }, 'headers', {
      value: (res.headers ?? {}) as Record<string, unknown>,
    }) as { status: number; body: Record<string, unknown>; readonly headers: Record<string, unknown> };
  };
  return { call, logger };
}

describe('jsonBody middleware enforces the byte limit, the JSON content type and JSON syntax', () => {
  it('accepts a body of exactly maxBytes and refuses one byte more with 413', async () => {
    const { call } = echo({ maxBytes: 20 });
    const exact = JSON.stringify({ a: 'x'.repeat(12) }); // 20 bytes

    const ok = await call(exact);
    const over = await call(JSON.stringify({ a: 'x'.repeat(13) }));

    expect(exact).toHaveLength(20);
    expect(ok).toEqual({ status: 200, body: { got: { a: 'x'.repeat(12) } } });
    expect(over.status).toBe(413);
  });

  it('leaves jsonBody undefined for an absent or empty body, whatever the content type', async () => {
    const { call } = echo();

    const absent = await call(null, { 'content-type': 'text/plain' });
    const empty = await call('', {});

    expect(absent).toEqual({ status: 200, body: { got: null } });
    expect(empty).toEqual({ status: 200, body: { got: null } });
  });

  it.each(['text/plain', 'application/x-www-form-urlencoded', 'application/jsonp', 'multipart/form-data'])(
    'answers 415 for content type %s',
    async (contentType) => {
      const { call } = echo();

      const res = await call('{}', { 'Content-Type': contentType });

      expect(res.status).toBe(415);
    },
  );

  it('answers 400 for bytes that are not UTF-8, instead of storing U+FFFD in their place', async () => {
    const handler = middy<JsonBodyEvent, APIGatewayProxyResult>(async (event: JsonBodyEvent) => ({
      statusCode: 200,
      body: JSON.stringify(event.jsonBody),
    }))
      .use(httpErrors({ logger: { error: vi.fn() } }))
      .use(jsonBody());
    // {"title":"<0xff>"}: a byte no UTF-8 text holds, sent as the local server sends bodies (bytes).
    const bytes = Buffer.concat([Buffer.from('{"title":"'), Buffer.from([0xff]), Buffer.from('"}')]);
    const res = await handler(
      toProxyEvent(
        {
          method: 'POST',
          url: '/x',
          headers: { 'content-type': 'application/json' },
          body: bytes,
        },
        noRoutes,
      ),
      localLambdaContext('t'),
    );
    expect(res.statusCode).toBe(400);
    expect(JSON.parse(res.body).error).toBe('request body is not valid UTF-8');
  });

  it.each([
    ['application/json; charset=iso-8859-1', 400],
    ['application/json; charset="windows-1252"', 400],
    ['application/json; charset=UTF-8', 200],
    ['application/json;charset=utf-8', 200],
  ])('a body declared as %s answers %i', async (contentType, status) => {
    const { call } = echo();

    const res = await call('{"a":"é"}', { 'content-type': contentType });

    expect(res.status).toBe(status);
  });

  it('finds the content type in multiValueHeaders when headers lacks it', async () => {
    const handler = middy<JsonBodyEvent, APIGatewayProxyResult>(async (event: JsonBodyEvent) => ({
      statusCode: 200,
      body: JSON.stringify(event.jsonBody),
    })).use(jsonBody());
    const event = {
      ...toProxyEvent({ method: 'POST', url: '/x', body: '{"a":1}' }, noRoutes),
      multiValueHeaders: { 'Content-Type': ['application/json'] },
    };

    const res = await handler(event, localLambdaContext('t'));

    expect(res).toMatchObject({ statusCode: 200, body: '{"a":1}' });
  });

  it('answers 400 with a root field for malformed JSON', async () => {
    const { call } = echo();

    const res = await call('{"a":');

    expect(res.status).toBe(400);
    expect(res.body.fields).toEqual([{ path: '', message: expect.any(String) }]);
  });
});

describe('httpErrors middleware shows caller faults and hides everything else', () => {
  it.each([
    [new PipelineError('VALIDATION', 'invalid request', { fields: [{ path: 'a', message: 'bad' }] }), 400],
    [new PipelineError('NOT_FOUND', 'task t not found', { taskId: 't' }), 404],
    [new PipelineError('CONFLICT', 'cannot approve', { currentStatus: 'approved' }), 409],
    [new HttpError(405, 'method not allowed', { allow: 'GET' }, { allow: 'GET' }), 405],
  ])('maps %s to %i with its message and details, without logging an error', async (err, status) => {
    const { call, logger } = echo({ fail: err });

    const res = await call(null);

    expect(res.status).toBe(status);
    expect(res.body).toMatchObject({ error: err.message });
    expect(logger.error).not.toHaveBeenCalled();
  });

  it.each([
    new PipelineError('DB_CONSTRAINT', 'duplicate key value violates unique constraint "tasks_pkey"'),
    new PipelineError('DB_ERROR', 'column "x" does not exist', { sqlState: '42703' }),
    new PipelineError('DB_ERROR', 'permission denied for table tasks', { sqlState: '42501' }),
    new PipelineError('DB_ERROR', 'BadRequestException', { awsError: 'BadRequestException' }),
    new TypeError("Cannot read properties of undefined (reading 'x')"),
    'a thrown string',
  ])('maps %s to a generic 500 and logs it', async (err) => {
    const { call, logger } = echo({ fail: err });

    const res = await call(null);

    expect(res).toEqual({ status: 500, body: { error: 'internal error' } });
    expect(res.headers['retry-after']).toBeUndefined();
    expect(logger.error).toHaveBeenCalledWith('unhandled error', err);
  });
});

describe('httpErrors middleware answers an outage of the database or the disk with 503 and Retry-After', () => {
  const errno = (code: string) => Object.assign(new Error(`${code}: write failed`), { code });
  it.each([
    [
      'the database refusing connections',
      new PipelineError('DB_TRANSIENT', 'connect ECONNREFUSED', { sqlState: 'ECONNREFUSED' }),
    ],
    [
      'a Data API cluster resuming',
      new PipelineError('DB_TRANSIENT', 'resuming', { awsError: 'DatabaseResumingException' }),
    ],
    [
      'a full disk under PostgreSQL',
      new PipelineError('DB_ERROR', 'could not extend file', { sqlState: '53100' }),
    ],
    [
      'PostgreSQL shutting down',
      new PipelineError('DB_ERROR', 'terminating connection', { sqlState: '57P01' }),
    ],
    [
      'a connection that ended mid-statement',
      new PipelineError('DB_ERROR', 'Connection terminated unexpectedly', { sqlState: '' }),
    ],
    ['a reset connection', new PipelineError('DB_ERROR', 'read ECONNRESET', { sqlState: 'ECONNRESET' })],
    ['a full disk', errno('ENOSPC')],
    ['a full disk under a wrapper', new Error('the bus journal is unavailable', { cause: errno('ENOSPC') })],
  ])('%s', async (_what, err) => {
    const { call, logger } = echo({ fail: err });

    const res = await call(null);

    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe(String(retryAfterSeconds));
    expect(res.body.error).toMatch(/unavailable.*; try again later$/);
    // Nothing of the driver's message reaches the caller.
    expect(JSON.stringify(res.body)).not.toMatch(/ECONNREFUSED|extend file|terminat/);
    expect(logger.error).toHaveBeenCalledWith('unavailable', err);
  });
});
