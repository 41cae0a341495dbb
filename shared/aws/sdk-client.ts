import { AsyncLocalStorage } from 'node:async_hooks';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { HttpHandlerOptions } from '@smithy/types';
import type { Context } from 'aws-lambda';

/**
 * How long one kind of AWS call may take, and how often the SDK tries it. Each SDK client of a
 * function is made with one of these (`sdkClientConfig`), so no call can hang a function until
 * its own timeout: a hung downstream costs each invocation at most `maxAttempts` x
 * `requestTimeoutMs` (plus the SDK's backoff), and never more than the invocation has left.
 *
 * The knobs are the SDK's own (https://docs.aws.amazon.com/sdk-for-javascript/v3/developer-guide/node-configuring-maxsockets.html
 * and the client's `maxAttempts`, https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html,
 * both read 2026-12-05): `connectionTimeout` bounds the TCP connect, `requestTimeout` the time
 * until the response starts (with `throwOnRequestTimeout`, which @smithy/node-http-handler 4.4
 * and later need to fail rather than only warn), and `maxAttempts` the tries, the first included.
 */
export interface SdkCallLimits {
  readonly connectionTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly maxAttempts: number;
  /**
   * Time kept back from the invocation's deadline: a call gives up this long before the function's
   * own timeout, so the handler can still record the failure, log it and return rather than be cut
   * off by Lambda mid-way. Calls to the services a handler's work depends on keep more back than
   * the DynamoDB calls that record how the work went (an inbox record's FAILED write), so a hung
   * effect gives up while the inbox still has time to say so.
   */
  readonly reserveMs: number;
}

/**
 * The call limits by kind of call. Every figure is far above what the call takes when the service
 * is well (DynamoDB answers item operations in milliseconds; a Data API statement of ours in well
 * under a second) and far below the timeouts of the functions that make them (29 s to 15 min).
 */
export const sdkCallLimits = {
  /**
   * DynamoDB item operations and queries: single-digit milliseconds when well. A consumer's
   * ChangeMessageVisibility calls on its own queue too: like the inbox's FAILED write, a failed
   * message's hide records how the work went.
   */
  item: { connectionTimeoutMs: 2_000, requestTimeoutMs: 3_000, maxAttempts: 3, reserveMs: 250 },
  /** A request to any other service (SNS, S3, SQS, EventBridge, Lambda's Invoke, CloudWatch, Secrets Manager). */
  request: { connectionTimeoutMs: 2_000, requestTimeoutMs: 5_000, maxAttempts: 3, reserveMs: 1_500 },
  /**
   * An RDS Data API statement: the service runs one for up to 45 s before it cancels it
   * (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/data-api.limitations.html, read
   * 2026-12-05), and ours take far less. The request timeout is above that, so the client never
   * gives up on (and the SDK never re-sends) a statement the server may still run: it ends only a
   * connection that hangs. The invocation's deadline bounds it further. The adapter retries a
   * resuming Aurora itself, so the SDK tries a statement twice at most.
   */
  statement: { connectionTimeoutMs: 2_000, requestTimeoutMs: 50_000, maxAttempts: 2, reserveMs: 1_500 },
  /**
   * A synchronous Invoke that waits for another function's run (the migration waits for the first
   * relay run): bounded by the caller's deadline, not by a figure of its own.
   */
  run: { connectionTimeoutMs: 2_000, requestTimeoutMs: 15 * 60_000, maxAttempts: 1, reserveMs: 1_500 },
} as const satisfies Record<string, SdkCallLimits>;

/** A kind of call (`sdkCallLimits`). */
export type SdkCallKind = keyof typeof sdkCallLimits;

/** The running invocation's remaining time, as Lambda counts it; absent outside an invocation. */
const invocations = new AsyncLocalStorage<Pick<Context, 'getRemainingTimeInMillis'>>();

/**
 * Milliseconds a call may still take in the running invocation: its remaining time less
 * `reserveMs`; undefined outside an invocation (a script, a test), where only the call limits
 * bound it.
 */
export function callBudgetMs(reserveMs: number): number | undefined {
  const context = invocations.getStore();
  return context === undefined ? undefined : context.getRemainingTimeInMillis() - reserveMs;
}

/**
 * Runs a Lambda handler with its invocation's deadline in reach of every SDK client made with
 * `sdkClientConfig`: the clients live across invocations (built once per container), so each
 * call reads the deadline of the invocation it runs in. Wrap each function's exported handler.
 */
export function withInvocationDeadline<E, C extends Pick<Context, 'getRemainingTimeInMillis'>, R>(
  handler: (event: E, context: C) => Promise<R>,
): (event: E, context: C) => Promise<R> {
  return (event, context) => invocations.run(context, () => handler(event, context));
}

/**
 * A call given up because its invocation's deadline was near. It is transient (the same call may
 * pass in the next invocation: the inbox retries it, `failureKind`), but the SDK does not retry it
 * within this invocation, which has no time left for another try.
 */
export class InvocationDeadlineError extends Error {
  override readonly name = 'InvocationDeadlineError';
}

/**
 * The SDK's Node.js handler with each attempt bounded by the invocation's deadline as well as by
 * its call limits: the request timeout ends an attempt whose answer does not start in time (the
 * SDK may try again), an abort signal ends it (the response body included) when the invocation's
 * budget runs out, and an attempt that would start with no budget left fails at once.
 */
class DeadlineHttpHandler extends NodeHttpHandler {
  constructor(private readonly limits: SdkCallLimits) {
    super({
      connectionTimeout: limits.connectionTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      throwOnRequestTimeout: true,
    });
  }

  override async handle(
    request: Parameters<NodeHttpHandler['handle']>[0],
    options: HttpHandlerOptions = {},
  ): ReturnType<NodeHttpHandler['handle']> {
    const reserve = this.limits.reserveMs;
    const budget = callBudgetMs(reserve);
    if (budget === undefined) return super.handle(request, options);
    if (budget <= 0) {
      throw new InvocationDeadlineError(
        `no time left in this invocation for a call to ${request.hostname} (${reserve} ms are kept for the handler)`,
      );
    }
    const deadline = AbortSignal.timeout(budget);
    const caller = options.abortSignal as AbortSignal | undefined;
    try {
      return await super.handle(request, {
        ...options,
        abortSignal: caller ? AbortSignal.any([caller, deadline]) : deadline,
      });
    } catch (err) {
      if (deadline.aborted && !caller?.aborted) {
        // No cause: the SDK would find a retryable timeout in it and try again without time to.
        throw new InvocationDeadlineError(
          `a call to ${request.hostname} gave up after ${budget} ms, at this invocation's deadline less ${reserve} ms`,
        );
      }
      throw err;
    }
  }
}

/**
 * What every AWS SDK client of a handler is made with: `new SNSClient(sdkClientConfig())`,
 * `new DynamoDBClient(sdkClientConfig('item'))`. Each client gets its own handler (its own
 * connections) with the kind's connection and request timeouts, and the kind's attempts.
 */
export function sdkClientConfig(kind: SdkCallKind = 'request'): {
  readonly requestHandler: NodeHttpHandler;
  readonly maxAttempts: number;
} {
  const limits = sdkCallLimits[kind];
  return { requestHandler: new DeadlineHttpHandler(limits), maxAttempts: limits.maxAttempts };
}
