/** A REST API resource template (`/tasks/{taskId}`) with a method, as API Gateway and the CDK know it. */
export interface ApiResource {
  readonly resource: string;
  readonly method: string;
}

/** The resource a path selects and its path parameters, as API Gateway puts them in a proxy event. */
export interface MatchedResource {
  readonly resource: string;
  /** Null when the resource has no `{param}`, as API Gateway sends it. */
  readonly pathParameters: Readonly<Record<string, string>> | null;
}

/** The resource a path names, or undefined when it names none. */
export type ResourceMatcher = (path: string) => MatchedResource | undefined;

interface Template {
  readonly resource: string;
  /** Each segment: a literal, or the name of a path parameter. */
  readonly segments: readonly ({ readonly literal: string } | { readonly param: string })[];
}

const compile = (resource: string): Template => ({
  resource,
  segments: resource
    .split('/')
    .slice(1)
    .map((part) => {
      const param = /^\{(\w+)\}$/.exec(part)?.[1];
      return param ? { param } : { literal: part };
    }),
});

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment; // a malformed escape fails the route's own validation (a 400), not the match
  }
}

/** Path parameters of `path` under `template`, or undefined when it does not match. */
function matchTemplate(template: Template, path: string): Record<string, string> | undefined {
  const parts = path.split('/').slice(1);
  if (parts.length !== template.segments.length) return undefined;
  const params: Record<string, string> = {};
  for (const [i, segment] of template.segments.entries()) {
    const part = parts[i] ?? '';
    if ('literal' in segment) {
      if (part !== segment.literal) return undefined;
    } else {
      if (part === '') return undefined;
      params[segment.param] = safeDecode(part);
    }
  }
  return params;
}

// A literal segment wins over a path parameter at the first place two templates differ, as
// API Gateway prefers `/tasks/stats` to `/tasks/{taskId}` for the path `/tasks/stats`. (Templates
// of different lengths never match the same path; ordering them by length keeps the order total.)
function moreSpecificFirst(a: Template, b: Template): number {
  if (a.segments.length !== b.segments.length) return a.segments.length - b.segments.length;
  for (let i = 0; i < a.segments.length; i++) {
    const aParam = 'param' in (a.segments[i] ?? {});
    const bParam = 'param' in (b.segments[i] ?? {});
    if (aParam !== bParam) return aParam ? 1 : -1;
  }
  return 0;
}

/**
 * What API Gateway does before it invokes a proxy integration: pick the REST API resource a
 * request path names, whatever the method, and read its `{param}` segments, URL-decoded, into
 * `pathParameters`. The local server does this with the same route tables the CDK builds the
 * API Gateway resources from, so handlers route on `resource` alone wherever they run. A
 * trailing slash names the same resource; an empty segment matches no parameter.
 * See the proxy event's `resource` and `pathParameters`:
 * https://docs.aws.amazon.com/apigateway/latest/developerguide/set-up-lambda-proxy-integrations.html#api-gateway-simple-proxy-for-lambda-input-format
 */
export function createResourceMatcher(resources: readonly ApiResource[]): ResourceMatcher {
  const templates = [...new Set(resources.map((r) => r.resource))].map(compile).sort(moreSpecificFirst);
  return (path) => {
    const trimmed = path.replace(/(.)\/+$/, '$1');
    for (const template of templates) {
      const params = matchTemplate(template, trimmed);
      if (!params) continue;
      return {
        resource: template.resource,
        pathParameters: Object.keys(params).length > 0 ? params : null,
      };
    }
    return undefined;
  };
}
