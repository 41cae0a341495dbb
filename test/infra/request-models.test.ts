import { beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { topology } from '../../functions/topology';
import type { HttpRoute } from '../../shared/http/router';
import { opsApiRoutes } from '../../shared/ops/ops-api';
import { tasksApiRoutes } from '../../shared/tasks/tasks-api';
import { resourcesOfType, type Synthesized, synthPipeline } from './support/synth';

// The API Gateway request models and query parameters come from the route tables' zod schemas,
// on the synthesized template of a stage.
let s: Synthesized;
beforeAll(() => {
  s = synthPipeline({ stage: 'sandbox', alarmEmail: 'ops@example.com' });
});

const routes: readonly HttpRoute[] = [...tasksApiRoutes, ...opsApiRoutes(topology.consumerNames)];
const keyOf = (route: HttpRoute) => `${route.method} ${route.resource}`;

type Props = Record<string, unknown>;
type Ref = { Ref?: string };

/** The template's method of a route, found by its resource's full path. */
function methodOf(route: HttpRoute): Props {
  const resources = Object.fromEntries(resourcesOfType(s, 'AWS::ApiGateway::Resource'));
  const pathOf = (id: string): string => {
    const props = resources[id]?.Properties ?? {};
    const parent = (props.ParentId as Ref).Ref;
    return `${parent && parent in resources ? pathOf(parent) : ''}/${String(props.PathPart)}`;
  };
  const found = resourcesOfType(s, 'AWS::ApiGateway::Method')
    .map(([, m]) => m.Properties ?? {})
    .filter(
      (m) => m.HttpMethod === route.method && pathOf((m.ResourceId as Ref).Ref ?? '') === route.resource,
    );
  expect(found, keyOf(route)).toHaveLength(1);
  return found[0] ?? {};
}

/** The JSON Schema of a route's request model, as API Gateway gets it. */
function modelSchemaOf(route: HttpRoute): Props {
  const ref = (methodOf(route).RequestModels as Record<string, Ref> | undefined)?.['application/json']?.Ref;
  const model = resourcesOfType(s, 'AWS::ApiGateway::Model').find(([id]) => id === ref)?.[1];
  expect(model, keyOf(route)).toBeDefined();
  expect(model?.Properties?.ContentType).toBe('application/json');
  return (model?.Properties?.Schema ?? {}) as Props;
}

const consumer = Object.keys(topology.consumers)[0];
const uuid = '0b9c3a52-4f5e-4a8e-9d55-7d2f0f3c1e11';

/** Bodies each route accepts; a new route with a body needs its own here. */
const acceptedBodies: Readonly<Record<string, readonly Props[]>> = {
  'POST /tasks': [
    { title: 'Review the launch post', body: 'text', assignee: 'ana' },
    { title: 'Only a title', body: null, assignee: null },
    // Trimmed before it is measured: at its limit once trimmed, the function takes it.
    { title: ` ${'x'.repeat(500)} ` },
  ],
  'POST /tasks/{taskId}/approve': [{}],
  'POST /tasks/{taskId}/reject': [{ reason: 'off-topic' }, { reason: `  ${'r'.repeat(1000)}  ` }],
  'POST /tasks/{taskId}/withdraw': [{ reason: 'duplicate' }, { reason: null }, {}],
  'POST /ops/outbox/dead/redrive': [{ eventId: uuid }, { all: true }],
  'POST /ops/inbox/{consumer}/dead/redrive': [{ eventId: 'any-id' }, { all: true }],
  'POST /ops/dead-letters/redrive': [{ eventId: 'any-id', consumer }, { eventId: 'any-id' }, { all: true }],
  'POST /ops/audit/redrive': [{ eventId: uuid, consumer }, { all: true }],
};

const withBody = routes.filter((r): r is HttpRoute & { body: z.ZodType } => r.body !== undefined);
const without = (body: Props, key: string) =>
  Object.fromEntries(Object.entries(body).filter(([k]) => k !== key));

describe('request models and query parameters come from the route tables’ zod schemas', () => {
  it('gives each route with a body the model z.toJSONSchema writes for it (JSON Schema draft 4), and no other route a model', () => {
    expect(withBody.length).toBeGreaterThan(0);
    for (const route of routes) {
      if (route.body === undefined) {
        expect(methodOf(route).RequestModels, keyOf(route)).toBeUndefined();
        continue;
      }
      const schema = modelSchemaOf(route);
      expect(schema, keyOf(route)).toEqual(z.toJSONSchema(route.body, { target: 'draft-04', io: 'input' }));
      expect(schema.$schema).toBe('http://json-schema.org/draft-04/schema#');
    }
  });

  it('declares each key of a route’s query and header schemas (required only if the schema requires it) and its path parameters required', () => {
    for (const route of routes) {
      const shape = (route.query?.shape ?? {}) as Record<string, z.ZodType>;
      const headers = (route.headers?.shape ?? {}) as Record<string, z.ZodType>;
      const expected = {
        ...Object.fromEntries(
          [...route.resource.matchAll(/\{(\w+)\}/g)].map((m) => [`method.request.path.${m[1]}`, true]),
        ),
        ...Object.fromEntries(
          Object.entries(shape).map(([name, field]) => [
            `method.request.querystring.${name}`,
            !field.safeParse(undefined).success,
          ]),
        ),
        ...Object.fromEntries(
          Object.entries(headers).map(([name, field]) => [
            `method.request.header.${name}`,
            !field.safeParse(undefined).success,
          ]),
        ),
      };
      expect(methodOf(route).RequestParameters ?? {}, keyOf(route)).toEqual(expected);
    }
  });

  it('requires in a model exactly the fields its zod body refuses a request without', () => {
    for (const route of withBody) {
      const schema = modelSchemaOf(route);
      if (schema.type !== 'object') continue; // a union's branches are checked below
      const required = new Set((schema.required as string[] | undefined) ?? []);
      for (const body of acceptedBodies[keyOf(route)] ?? []) {
        for (const key of Object.keys(body)) {
          expect(required.has(key), `${keyOf(route)} ${key}`).toBe(
            !route.body.safeParse(without(body, key)).success,
          );
        }
      }
    }
  });

  // zod's own JSON Schema reader stands in for API Gateway's validator: it reads the model as
  // the template holds it, not the zod schema it came from.
  it('refuses with the model what the zod body refuses for a missing, unknown or mistyped field, and accepts what it accepts', () => {
    for (const route of withBody) {
      const key = keyOf(route);
      const model = z.fromJSONSchema(modelSchemaOf(route) as z.core.JSONSchema.JSONSchema);
      const samples = acceptedBodies[key];
      expect(samples, `${key} needs accepted bodies in this test`).toBeDefined();
      const probes: Props[] = [{}];
      for (const body of samples ?? []) {
        expect(route.body.safeParse(body).success, `${key} takes ${JSON.stringify(body)}`).toBe(true);
        expect(model.safeParse(body).success, `${key} model takes ${JSON.stringify(body)}`).toBe(true);
        probes.push({ ...body, unexpected: 'field' });
        for (const field of Object.keys(body)) probes.push(without(body, field), { ...body, [field]: 12345 });
      }
      let refusedByBoth = 0;
      for (const probe of probes) {
        if (route.body.safeParse(probe).success) continue;
        expect(model.safeParse(probe).success, `${key} model refuses ${JSON.stringify(probe)}`).toBe(false);
        refusedByBoth++;
      }
      expect(refusedByBoth, key).toBeGreaterThan(0);
    }
  });
});
