import type { APIGatewayProxyResult, Context } from 'aws-lambda';
import * as z from 'zod';
import { HttpError, toFieldErrors, validationError } from './error-responses';
import type { JsonBodyEvent } from './json-body';
import type { ApiResource } from './resource-match';

/**
 * What API Gateway is told of a route, besides its resource and method: the query string and
 * the request headers it reads and the JSON body it takes, as zod schemas. The CDK declares the
 * query parameters and headers and builds the method's request model from these very schemas,
 * which the router parses with.
 */
export interface HttpRoute extends ApiResource {
  /** The query string parameters (an object of strings); API Gateway declares each key. */
  readonly query?: z.ZodObject;
  /**
   * The request headers the route reads, keyed by their names in lower case (HTTP names are
   * case-insensitive: RFC 9110, 5.1); API Gateway declares each. Other headers are not parsed.
   */
  readonly headers?: z.ZodObject;
  /** The JSON body; an absent body is parsed as `{}`. API Gateway's request model is generated from it. */
  readonly body?: z.ZodType;
}

/** What a route's handler is given: the request, and its parts as the route's schemas parsed them. */
export interface RouteRequest<Params, Query, Body, Headers = RawParameters> {
  readonly event: JsonBodyEvent;
  readonly context: Context;
  readonly params: Params;
  readonly query: Query;
  readonly body: Body;
  /** The headers the route's schema declares, as it parsed them. */
  readonly headers: Headers;
}

/** A route's handler: its request, and the dependencies its API was built with. */
export type RouteHandler<Deps, Params, Query, Body, Headers = RawParameters> = (
  request: RouteRequest<Params, Query, Body, Headers>,
  deps: Deps,
) => Promise<APIGatewayProxyResult>;

/** Path parameters or a query string as API Gateway passes them, when no schema parses them. */
export type RawParameters = Readonly<Record<string, string>>;

type Parsed<Schema, Otherwise> = Schema extends z.ZodType ? z.output<Schema> : Otherwise;

/** One entry of a route table, typed by its own schemas (see {@link routeFor}). */
export interface RouteSpec<
  Deps,
  P extends z.ZodType | undefined,
  Q extends z.ZodObject | undefined,
  B extends z.ZodType | undefined,
  H extends z.ZodObject | undefined = undefined,
> extends ApiResource {
  /** The path parameters (`{ taskId }`), checked with the body so one 400 names every bad field. */
  readonly params?: P;
  readonly query?: Q;
  readonly body?: B;
  readonly headers?: H;
  /** The 400's message when a schema refuses the request. @default 'invalid request' */
  readonly invalid?: string;
  readonly handler: RouteHandler<
    Deps,
    Parsed<P, RawParameters>,
    Parsed<Q, RawParameters>,
    Parsed<B, undefined>,
    Parsed<H, RawParameters>
  >;
}

/** A route as a table holds it, its handler's request types erased so routes of any shape fit one table. */
export interface Route<Deps> extends HttpRoute {
  readonly params?: z.ZodType;
  readonly invalid?: string;
  readonly handler: RouteHandler<Deps, unknown, unknown, unknown, unknown>;
}

/**
 * The entry builder of a route table whose handlers take `Deps`: each entry's handler is typed
 * by the schemas beside it (`body: createTaskBody` gives it the parsed body), as Middy's
 * http-router entries carry their handler.
 */
export function routeFor<Deps>() {
  return <
    P extends z.ZodType | undefined = undefined,
    Q extends z.ZodObject | undefined = undefined,
    B extends z.ZodType | undefined = undefined,
    H extends z.ZodObject | undefined = undefined,
  >(
    spec: RouteSpec<Deps, P, Q, B, H>,
  ): Route<Deps> =>
    // The router calls a handler only with what the entry's own schemas parsed, so the types the
    // handler was written against hold; only the table's element type forgets them.
    spec as unknown as Route<Deps>;
}

type Parse = { success: true; data: unknown } | { success: false; error: z.ZodError };

const parseWith = (schema: z.ZodType | undefined, input: unknown): Parse =>
  schema ? schema.safeParse(input) : { success: true, data: input };

/**
 * The headers `schema` declares, as the event carries them (API Gateway keeps the casing the
 * client sent; `multiValueHeaders` has each value of a repeated one). A declared header sent more
 * than once is refused: which of its values the client meant is not for the server to guess.
 */
function declaredHeaders(schema: z.ZodObject, event: JsonBodyEvent): Parse {
  const wanted = new Set(Object.keys(schema.shape));
  const values: Record<string, string[]> = {};
  const add = (source: Record<string, unknown> | null | undefined, many: boolean) => {
    for (const [name, value] of Object.entries(source ?? {})) {
      const key = name.toLowerCase();
      if (!wanted.has(key) || value === undefined || value === null) continue;
      const list = many && Array.isArray(value) ? value.map(String) : [String(value)];
      values[key] = [...(values[key] ?? []), ...list];
    }
  };
  add(event.multiValueHeaders, true);
  // An event built without multiValueHeaders (a test's, a console's test invoke) has only these.
  if (Object.keys(values).length === 0) add(event.headers, false);
  const repeated = Object.entries(values).filter(([, v]) => v.length > 1);
  if (repeated.length > 0) {
    return {
      success: false,
      error: new z.ZodError(
        repeated.map(([name]) => ({
          code: 'custom',
          path: [name],
          message: 'must be sent once',
          input: undefined,
        })),
      ),
    };
  }
  return schema.safeParse(Object.fromEntries(Object.entries(values).map(([k, v]) => [k, v[0]])));
}

/**
 * The router of the pipeline's HTTP APIs (tasks and ops), one for both realizations. It routes
 * on what API Gateway put in the proxy event, `resource` and `httpMethod`, and reads
 * `pathParameters`; `path` is never parsed again (behind a custom domain it carries a base path
 * the resource does not). The local server fills `resource` as API Gateway does
 * (`createResourceMatcher`). A resource the API does not define is a 404; a defined one with
 * another method a 405 with `Allow`. A request its route's schemas refuse is a 400 naming every
 * bad field (path parameters, query, then body); only a request they accept reaches the handler.
 *
 * Hand-written rather than @middy/http-router because that router matches on the path (and so
 * would route a second time behind API Gateway) and answers 404/405 without `Allow`.
 */
export function createRouter<Deps>(routes: readonly Route<Deps>[]) {
  const byResource = new Map<string, Map<string, Route<Deps>>>();
  for (const route of routes) {
    const methods = byResource.get(route.resource) ?? new Map<string, Route<Deps>>();
    if (methods.has(route.method))
      throw new Error(`route ${route.method} ${route.resource} is defined twice`);
    methods.set(route.method, route);
    byResource.set(route.resource, methods);
  }

  return async function dispatch(
    event: JsonBodyEvent,
    context: Context,
    deps: Deps,
  ): Promise<APIGatewayProxyResult> {
    const method = (event.httpMethod ?? '').toUpperCase();
    const methods = event.resource ? byResource.get(event.resource) : undefined;
    if (!methods) throw new HttpError(404, `no route for ${event.path || event.resource}`);
    // HEAD is answered wherever GET is, as HTTP servers do.
    const route = methods.get(method) ?? (method === 'HEAD' ? methods.get('GET') : undefined);
    if (!route) {
      const allow = [...methods.keys()].join(', ');
      throw new HttpError(405, `method ${method} not allowed on ${event.resource}`, { allow }, { allow });
    }
    const pathParameters: Record<string, string> = {};
    for (const [k, v] of Object.entries(event.pathParameters ?? {}))
      if (v !== undefined) pathParameters[k] = v;
    const params = parseWith(route.params, pathParameters);
    const query = parseWith(route.query, event.queryStringParameters ?? {});
    const headers = route.headers
      ? declaredHeaders(route.headers, event)
      : ({ success: true, data: {} } as const);
    // An absent body counts as an empty object, so a 400 names the missing fields rather than "body".
    const body = parseWith(route.body, event.jsonBody === undefined ? {} : event.jsonBody);
    if (!params.success || !query.success || !headers.success || !body.success) {
      const fields = [params, query, headers, body].flatMap((p) => (p.success ? [] : toFieldErrors(p.error)));
      throw validationError(route.invalid ?? 'invalid request', fields);
    }
    return route.handler(
      {
        event,
        context,
        params: params.data,
        query: query.data,
        body: route.body ? body.data : undefined,
        headers: headers.data,
      },
      deps,
    );
  };
}
