import type { APIGatewayProxyEvent } from 'aws-lambda';
import { HttpError } from './error-responses';
import type { ApiResource } from './resource-match';

/** One route: an API Gateway resource template (`/tasks/{taskId}`), a method, and the name the API dispatches on. */
export interface RouteSpec<Name extends string> extends ApiResource {
  readonly name: Name;
}

/** A resolved request: which route, and its path parameters (decoded). */
export interface ResolvedRoute<Name extends string> {
  readonly name: Name;
  readonly resource: string;
  readonly pathParameters: Readonly<Record<string, string>>;
}

/**
 * The router of the pipeline's HTTP APIs (tasks and ops), one for both realizations. It routes
 * on what API Gateway put in the proxy event, `resource` and `httpMethod`, and reads
 * `pathParameters`; `path` is never parsed again (behind a custom domain it carries a base path
 * the resource does not). The local server fills `resource` as API Gateway does
 * (`createResourceMatcher`). A resource the API does not define is a 404; a defined one with
 * another method a 405 with `Allow`.
 *
 * Hand-written rather than @middy/http-router because that router matches on the path (and so
 * would route a second time behind API Gateway) and answers 404/405 without `Allow`.
 */
export function createRouter<Name extends string>(routes: readonly RouteSpec<Name>[]) {
  const byResource = new Map<string, Map<string, Name>>();
  for (const route of routes) {
    const methods = byResource.get(route.resource) ?? new Map<string, Name>();
    if (methods.has(route.method))
      throw new Error(`route ${route.method} ${route.resource} is defined twice`);
    methods.set(route.method, route.name);
    byResource.set(route.resource, methods);
  }

  return function resolve(
    event: Pick<APIGatewayProxyEvent, 'httpMethod' | 'resource' | 'path' | 'pathParameters'>,
  ): ResolvedRoute<Name> {
    const method = (event.httpMethod ?? '').toUpperCase();
    const methods = event.resource ? byResource.get(event.resource) : undefined;
    if (!methods) throw new HttpError(404, `no route for ${event.path || event.resource}`);
    // HEAD is answered wherever GET is, as HTTP servers do.
    const name = methods.get(method) ?? (method === 'HEAD' ? methods.get('GET') : undefined);
    if (!name) {
      const allow = [...methods.keys()].join(', ');
      throw new HttpError(405, `method ${method} not allowed on ${event.resource}`, { allow }, { allow });
    }
    const pathParameters: Record<string, string> = {};
    for (const [k, v] of Object.entries(event.pathParameters ?? {}))
      if (v !== undefined) pathParameters[k] = v;
    return { name, resource: event.resource, pathParameters };
  };
}
