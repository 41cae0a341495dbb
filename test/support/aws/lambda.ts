import type { CallRecorder } from './calls';
import { callerOf } from './calls';
import { closeServer, type LocalEndpoint, listenOnLoopback, readRawBody, requestUrl } from './http';
import { AwsFault, sendRestJson, sendRestJsonFault, toFault } from './protocol';

/** How Invoke was asked to run (`X-Amz-Invocation-Type`). */
export type InvocationType = 'Event' | 'RequestResponse' | 'DryRun';

/**
 * Runs a function for the stand-in: resolves with its result, rejects as the function failing.
 * The rehearsal's dispatcher runs the function's bundle (in its own process).
 */
export type LambdaDispatcher = (
  functionName: string,
  payload: unknown,
  invocationType: InvocationType,
) => Promise<unknown>;

/** One accepted Invoke call. */
export interface LambdaInvocation {
  readonly functionName: string;
  readonly qualifier?: string;
  readonly invocationType: InvocationType;
  readonly payload: unknown;
  readonly caller: string;
  readonly at: Date;
}

/** An asynchronous (`Event`) invocation whose dispatch failed; Lambda would retry or drop it. */
export interface AsyncInvocationFailure {
  readonly functionName: string;
  readonly payload: unknown;
  readonly error: unknown;
}

/** How the Lambda stand-in is set up. */
export interface LambdaStandinOptions {
  readonly recorder: CallRecorder;
  /** Function names that exist; Invoke of any other answers ResourceNotFoundException. */
  readonly functions?: readonly string[];
  /** May also be set later with `setDispatcher` (the rehearsal needs the endpoints first). */
  readonly dispatch?: LambdaDispatcher;
}

/** A running Lambda stand-in (restJson, `Invoke` only). */
export interface LambdaStandin extends LocalEndpoint {
  readonly invocations: readonly LambdaInvocation[];
  readonly asyncErrors: readonly AsyncInvocationFailure[];
  addFunction(name: string): void;
  setDispatcher(dispatch: LambdaDispatcher): void;
  /** Resolves once every `Event` dispatch started so far has finished (either way). */
  settled(): Promise<void>;
}

const invokePath = /^\/2015-03-31\/functions\/([^/]+)\/invocations\/?$/;
const invocationTypes: readonly string[] = ['Event', 'RequestResponse', 'DryRun'];

/** Name and qualifier from `name`, `name:qualifier`, `<account>:function:name[:q]` or a full ARN. */
function parseFunctionName(
  value: string,
  recorder: CallRecorder,
): { name: string; qualifier?: string } | undefined {
  const parts = value.split(':');
  let rest: string[];
  if (value.startsWith('arn:')) {
    // arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]
    if (parts[2] !== 'lambda' || parts[3] !== recorder.region || parts[4] !== recorder.accountId)
      return undefined;
    if (parts[5] !== 'function') return undefined;
    rest = parts.slice(6);
  } else if (parts[1] === 'function') {
    if (parts[0] !== recorder.accountId) return undefined;
    rest = parts.slice(2);
  } else {
    rest = parts;
  }
  const [name, qualifier] = rest;
  if (!name || rest.length > 2) return undefined;
  return qualifier ? { name, qualifier } : { name };
}

function errorPayload(err: unknown): string {
  const error = err instanceof Error ? err : new Error(String(err));
  return JSON.stringify({
    errorType: error.name,
    errorMessage: error.message,
    trace: (error.stack ?? '').split('\n'),
  });
}

/**
 * Starts a Lambda stand-in on 127.0.0.1: `POST /2015-03-31/functions/<FunctionName>/invocations`
 * resolves a registered function by name, partial or full ARN and calls the dispatcher.
 * RequestResponse answers 200 with the JSON result, or `X-Amz-Function-Error: Unhandled` and
 * `{errorType, errorMessage}` when it throws; Event answers 202 at once and dispatches in the
 * background (failures kept in `asyncErrors`); DryRun answers 204. Each call is recorded as
 * `lambda:InvokeFunction` on `arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]`.
 */
export async function startLambdaStandin(options: LambdaStandinOptions): Promise<LambdaStandin> {
  const { recorder } = options;
  const functions = new Set(options.functions ?? []);
  let dispatch = options.dispatch;
  const invocations: LambdaInvocation[] = [];
  const asyncErrors: AsyncInvocationFailure[] = [];
  const background = new Set<Promise<void>>();

  const functionArn = (name: string, qualifier?: string) =>
    recorder.arn('lambda', `function:${name}${qualifier ? `:${qualifier}` : ''}`);

  const { server, endpoint } = await listenOnLoopback(async (req, res) => {
    const url = requestUrl(req);
    const caller = callerOf(req.headers, url);
    const raw = await readRawBody(req);
    const match = req.method === 'POST' ? invokePath.exec(url.pathname) : null;
    const requested = match?.[1] ? decodeURIComponent(match[1]) : undefined;
    const parsed = requested ? parseFunctionName(requested, recorder) : undefined;
    const qualifier = url.searchParams.get('Qualifier') ?? parsed?.qualifier;
    recorder.record(caller, 'lambda', [
      {
        action: match ? 'lambda:InvokeFunction' : 'lambda:Unrecognized',
        resources: [parsed ? functionArn(parsed.name, qualifier) : (requested ?? '*')],
        operation: match ? 'Invoke' : `${req.method} ${url.pathname}`,
      },
    ]);
    try {
      if (!match)
        throw new AwsFault(
          'UnknownOperationException',
          `The stand-in does not serve ${req.method} ${url.pathname}`,
          400,
        );
      if (!parsed || !functions.has(parsed.name)) {
        throw new AwsFault(
          'ResourceNotFoundException',
          `Function not found: ${parsed ? functionArn(parsed.name, qualifier) : requested}`,
          404,
          {
            extra: { Type: 'User' },
          },
        );
      }
      const typeHeader = String(req.headers['x-amz-invocation-type'] ?? 'RequestResponse');
      if (!invocationTypes.includes(typeHeader)) {
        throw new AwsFault('InvalidParameterValueException', `Invalid invocation type: ${typeHeader}`, 400, {
          extra: { Type: 'User' },
        });
      }
      const invocationType = typeHeader as InvocationType;
      let payload: unknown = {};
      if (raw.length > 0) {
        try {
          payload = JSON.parse(raw.toString('utf8'));
        } catch (err) {
          throw new AwsFault(
            'InvalidRequestContentException',
            `Could not parse request body into json: ${String(err)}`,
            400,
            {
              extra: { Type: 'User' },
            },
          );
        }
      }
      const name = parsed.name;
      invocations.push({
        functionName: name,
        invocationType,
        payload,
        caller,
        at: new Date(),
        ...(qualifier ? { qualifier } : {}),
      });
      if (invocationType === 'DryRun') return sendRestJson(res, 204, '');
      const run = dispatch;
      if (!run)
        throw new AwsFault('ServiceException', 'the Lambda stand-in has no dispatcher registered', 500);
      if (invocationType === 'Event') {
        const job: Promise<void> = run(name, payload, invocationType).then(
          () => undefined,
          (error: unknown) => {
            asyncErrors.push({ functionName: name, payload, error });
          },
        );
        background.add(job);
        void job.finally(() => background.delete(job));
        return sendRestJson(res, 202, '');
      }
      const headers = { 'x-amz-executed-version': qualifier ?? '$LATEST' };
      try {
        const result = await run(name, payload, invocationType);
        sendRestJson(res, 200, JSON.stringify(result ?? null), headers);
      } catch (err) {
        sendRestJson(res, 200, errorPayload(err), { ...headers, 'x-amz-function-error': 'Unhandled' });
      }
    } catch (err) {
      sendRestJsonFault(res, toFault(err));
    }
  });

  return {
    endpoint,
    invocations,
    asyncErrors,
    addFunction: (name) => {
      functions.add(name);
    },
    setDispatcher: (d) => {
      dispatch = d;
    },
    async settled() {
      while (background.size > 0) await Promise.all([...background]);
    },
    close: () => closeServer(server),
  };
}
