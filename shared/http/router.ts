import type { APIGatewayProxyEvent } from 'aws-lambda';
import { HttpError } from './http-error';

/** One route: an API Gateway resource template (`/tasks/{taskId}`), a method, and the name the API dispatches on. */
export interface RouteSpec<Name extends string> {
  readonly resource: string;
  readonly method: string;
  readonly name: Name;
}

/** A resolved request: which route, and its path parameters (decoded). */
export interface ResolvedRoute<Name extends string> {
  readonly name: Name;
  readonly resource: string;
  readonly pathParameters: Readonly<Record<string, string>>;
}

interface CompiledResource<Name extends string> {
  readonly resource: string;
  readonly pattern: RegExp;
  readonly params: readonly string[];
  readonly methods: ReadonlyMap<string, Name>;
}

const compile = (resource: string): { pattern: RegExp; params: string[] } => {
  const params: string[] = [];
  const source = resource
    .split('/')
    .map((part) => {
      const param = /^\{(\w+)\}$/.exec(part);
      if (!param?.[1]) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      params.push(param[1]);
      return '([^/]+)';
    })
    .join('/');
  return { pattern: new RegExp(`^${source}$`), params };
};

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment; // a malformed escape fails the route's own validation (a 400), not the router
  }
}

/**
 * The router of the pipeline's HTTP APIs (tasks and ops), one for both realizations. Behind
 * API Gateway the event names its `resource` and `pathParameters`; a request from the local
 * server carries only `path`, which is matched against the same templates. An unknown path is
 * a 404; a known one with another method a 405 with `Allow`.
 *
 * Hand-written rather than @middy/http-router because that router matches on the path only
 * (and so would route twice behind API Gateway) and answers 404/405 without `Allow`.
 */
export function createRouter<Name extends string>(routes: readonly RouteSpec<Name>[]) {
  const byResource = new Map<string, CompiledResource<Name>>();
  for (const route of routes) {
    const existing = byResource.get(route.resource);
    if (existing) {
      if (existing.methods.has(route.method)) {
        throw new Error(`route ${route.method} ${route.resource} is defined twice`);
      }
      (existing.methods as Map<string, Name>).set(route.method, route.name);
      continue;
    }
    const { pattern, params } = compile(route.resource);
    byResource.set(route.resource, {
      resource: route.resource,
      pattern,
      params,
      methods: new Map([[route.method, route.name]]),
    });
  }
  const resources = [...byResource.values()];

  return function resolve(
    event: Pick<APIGatewayProxyEvent, 'httpMethod' | 'resource' | 'path' | 'pathParameters'>,
  ): ResolvedRoute<Name> {
    const method = (event.httpMethod ?? '').toUpperCase();
    let compiled = event.resource ? byResource.get(event.resource) : undefined;
    let pathParameters: Record<string, string> = {};
    if (compiled) {
      for (const [k, v] of Object.entries(event.pathParameters ?? {}))
        if (v !== undefined) pathParameters[k] = v;
    } else {
      const path = (event.path ?? '').replace(/(.)\/+$/, '$1');
      for (const candidate of resources) {
        const match = candidate.pattern.exec(path);
        if (!match) continue;
        compiled = candidate;
        pathParameters = Object.fromEntries(
          candidate.params.map((p, i) => [p, safeDecode(match[i + 1] ?? '')]),
        );
        break;
      }
    }
    if (!compiled) throw new HttpError(404, `no route for ${event.path ?? event.resource}`);
    // HEAD is answered wherever GET is, as HTTP servers do.
    const name =
      compiled.methods.get(method) ?? (method === 'HEAD' ? compiled.methods.get('GET') : undefined);
    if (!name) {
      const allow = [...compiled.methods.keys()].join(', ');
      throw new HttpError(405, `method ${method} not allowed on ${compiled.resource}`, { allow }, { allow });
    }
    return { name, resource: compiled.resource, pathParameters };
  };
}
