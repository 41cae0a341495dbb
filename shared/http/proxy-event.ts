import { randomUUID } from 'node:crypto';
import type { APIGatewayProxyEvent, Context } from 'aws-lambda';
import { type ApiResource, createResourceMatcher } from './resource-match';

/** A plain HTTP request, as a local server (node:http) or a test has it. */
export interface PlainHttpRequest {
  readonly method: string;
  /** Path with an optional query string, e.g. `/tasks/abc?x=1`. */
  readonly url: string;
  /** Any casing; arrays for repeated headers (node:http's `IncomingHttpHeaders` fits). */
  readonly headers?: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** Text is passed as is; bytes travel base64-encoded, as API Gateway sends binary bodies. */
  readonly body?: string | Uint8Array | null;
}

/** A request target split into its path and query. */
export interface RequestTarget {
  readonly pathname: string;
  readonly search: string;
  readonly searchParams: URLSearchParams;
}

/**
 * Splits an HTTP request target (origin-form `/path?query`, absolute-form `http://host/path`, or
 * anything else a client sends) into path and query, never throwing. Resolving it against a base
 * URL instead reads `//x/tasks` as host `x` and path `/tasks`, and throws on `//`.
 */
export function parseRequestTarget(target: string): RequestTarget {
  try {
    // Behind a fixed authority a path cannot become a host.
    if (target.startsWith('/')) return new URL(`http://localhost${target}`);
    const url = new URL(target);
    if (url.protocol === 'http:' || url.protocol === 'https:') return url;
  } catch {
    // Not a URL: below, it becomes a path no route matches.
  }
  return { pathname: target, search: '', searchParams: new URLSearchParams() };
}

/**
 * Builds the API Gateway REST proxy event for a plain HTTP request, so the local runtime can
 * call the very handler Lambda runs. `resources` are the REST API's resources (the route table
 * the CDK builds them from): `resource`, `pathParameters` and `requestContext.resourcePath` are
 * filled as API Gateway fills them for the one the path names. A path that names none gets an
 * empty `resource` (API Gateway would not invoke the function at all), which the router answers
 * with a 404.
 */
export function toProxyEvent(
  request: PlainHttpRequest,
  resources: readonly ApiResource[],
): APIGatewayProxyEvent {
  const url = parseRequestTarget(request.url);
  const matched = createResourceMatcher(resources)(url.pathname);
  const headers: Record<string, string> = {};
  const multiValueHeaders: Record<string, string[]> = {};
  for (const [name, value] of Object.entries(request.headers ?? {})) {
    if (value === undefined) continue;
    const values = typeof value === 'string' ? [value] : [...value];
    multiValueHeaders[name] = values;
    headers[name] = values.join(', ');
  }
  const query: Record<string, string> = {};
  const multiQuery: Record<string, string[]> = {};
  for (const [name, value] of url.searchParams) {
    query[name] = value;
    multiQuery[name] = [...(multiQuery[name] ?? []), value];
  }
  const body = request.body ?? null;
  const isBinary = body instanceof Uint8Array;
  const now = Date.now();
  return {
    resource: matched?.resource ?? '',
    path: url.pathname,
    httpMethod: request.method.toUpperCase(),
    headers,
    multiValueHeaders,
    queryStringParameters: url.search ? query : null,
    multiValueQueryStringParameters: url.search ? multiQuery : null,
    pathParameters: matched?.pathParameters ?? null,
    stageVariables: null,
    body: isBinary ? Buffer.from(body).toString('base64') : body,
    isBase64Encoded: isBinary,
    requestContext: {
      accountId: '000000000000',
      apiId: 'local',
      authorizer: undefined,
      protocol: 'HTTP/1.1',
      httpMethod: request.method.toUpperCase(),
      identity: {
        accessKey: null,
        accountId: null,
        apiKey: null,
        apiKeyId: null,
        caller: null,
        clientCert: null,
        cognitoAuthenticationProvider: null,
        cognitoAuthenticationType: null,
        cognitoIdentityId: null,
        cognitoIdentityPoolId: null,
        principalOrgId: null,
        sourceIp: '127.0.0.1',
        user: null,
        userAgent: headers['user-agent'] ?? null,
        userArn: null,
      },
      path: url.pathname,
      stage: 'local',
      requestId: randomUUID(),
      requestTimeEpoch: now,
      resourceId: 'local',
      resourcePath: matched?.resource ?? '',
    },
  };
}

/** A Lambda context for calling a handler outside Lambda (local runtime, tests); `timeoutMs` bounds the call like a function timeout does. */
export function localLambdaContext(functionName: string, timeoutMs = 30_000): Context {
  // A duration: on the monotonic clock, so a step of the wall clock does not end it early.
  const deadline = performance.now() + timeoutMs;
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:local:000000000000:function:${functionName}`,
    memoryLimitInMB: '1024',
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: 'local',
    getRemainingTimeInMillis: () => Math.max(0, Math.floor(deadline - performance.now())),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}
