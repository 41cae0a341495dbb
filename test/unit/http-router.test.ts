import type { APIGatewayProxyResult } from 'aws-lambda';
import { describe, expect, it, vi } from 'vitest';
import * as z from 'zod';
import { isPipelineError } from '../../shared/errors';
import { HttpError } from '../../shared/http/error-responses';
import type { JsonBodyEvent } from '../../shared/http/json-body';
import { localLambdaContext, toProxyEvent } from '../../shared/http/proxy-event';
import { createRouter, routeFor } from '../../shared/http/router';

interface Deps {
  readonly seen: (request: unknown) => void;
}

const answer = (body: unknown): APIGatewayProxyResult => ({ statusCode: 200, body: JSON.stringify(body) });
const route = routeFor<Deps>();

const routes = [
  route({
    method: 'POST',
    resource: '/things/{thingId}/rename',
    params: z.object({ thingId: z.uuid('must be a UUID') }),
    query: z.strictObject({ dryRun: z.enum(['yes', 'no']).optional() }),
    body: z.strictObject({ name: z.string().min(1) }),
    handler: async ({ params, query, body }, deps) => {
      deps.seen({ params, query, body });
      return answer({ renamed: params.thingId, to: body.name, dryRun: query.dryRun ?? 'no' });
    },
  }),
  route({
    method: 'GET',
    resource: '/things/{thingId}',
    handler: async ({ params, body }, deps) => {
      deps.seen({ params, body });
      return answer({ thingId: params.thingId });
    },
  }),
  route({
    method: 'POST',
    resource: '/shapes',
    invalid: 'body must be a circle or a square',
    body: z.union([z.strictObject({ radius: z.number() }), z.strictObject({ side: z.number() })]),
    handler: async ({ body }) => answer(body),
  }),
];
const dispatch = createRouter(routes);

const id = '0b8d7f5e-2c1a-4e6b-9f3d-5a7c9e1b3d5f';

/** Dispatches a request as the local server builds it, the body already parsed as jsonBody does. */
async function send(method: string, url: string, jsonBody?: unknown) {
  const seen = vi.fn();
  const event: JsonBodyEvent = { ...toProxyEvent({ method, url }, routes), jsonBody };
  try {
    const res = await dispatch(event, localLambdaContext('t'), { seen });
    return { status: res.statusCode, body: JSON.parse(res.body) as unknown, seen };
  } catch (err) {
    return { err, seen };
  }
}

describe('the router dispatches from its route table and hands a handler only what the schemas accepted', () => {
  it('parses path parameters, query and body with the route’s schemas and passes what they yield', async () => {
    const res = await send('POST', `/things/${id}/rename?dryRun=yes`, { name: 'new' });

    expect(res).toMatchObject({ status: 200, body: { renamed: id, to: 'new', dryRun: 'yes' } });
    expect(res.seen).toHaveBeenCalledWith({
      params: { thingId: id },
      query: { dryRun: 'yes' },
      body: { name: 'new' },
    });
  });

  it('refuses with one 400 naming every bad field, path parameters, query then body, and never calls the handler', async () => {
    const res = await send('POST', '/things/not-a-uuid/rename?dryRun=maybe&extra=1', {
      name: '',
      colour: 'red',
    });

    expect(isPipelineError(res.err, 'VALIDATION')).toBe(true);
    const fields = (res.err as { details: { fields: { path: string }[] } }).details.fields.map((f) => f.path);
    expect(fields).toEqual(['thingId', 'dryRun', 'extra', 'name', 'colour']);
    expect(res.seen).not.toHaveBeenCalled();
  });

  it('reads an absent body as {} so the 400 names the missing field, not the body', async () => {
    const res = await send('POST', `/things/${id}/rename`);

    expect((res.err as { details: { fields: unknown } }).details.fields).toEqual([
      { path: 'name', message: expect.any(String) },
    ]);
  });

  it('answers a refused body with the route’s own message', async () => {
    const res = await send('POST', '/shapes', { radius: 1, side: 2 });

    expect(res.err).toMatchObject({ code: 'VALIDATION', message: 'body must be a circle or a square' });
  });

  it('gives a route without schemas its raw path parameters and no body, whatever was sent', async () => {
    const res = await send('GET', `/things/${id}`, { ignored: true });

    expect(res.status).toBe(200);
    expect(res.seen).toHaveBeenCalledWith({ params: { thingId: id }, body: undefined });
  });

  it('answers 404 for a resource the table lacks and 405 with Allow for a method it lacks', async () => {
    const missing = await send('GET', '/nothing');
    const wrongMethod = await send('DELETE', `/things/${id}`);

    expect(missing.err).toBeInstanceOf(HttpError);
    expect((missing.err as HttpError).statusCode).toBe(404);
    expect(wrongMethod.err).toMatchObject({ statusCode: 405, headers: { allow: 'GET' } });
  });

  it('answers HEAD wherever GET is', async () => {
    expect((await send('HEAD', `/things/${id}`)).status).toBe(200);
  });

  it('refuses a table that defines one method of a resource twice', () => {
    const twice = [routes[1], routes[1]].filter((r) => r !== undefined);

    expect(() => createRouter(twice)).toThrow('route GET /things/{thingId} is defined twice');
  });
});
