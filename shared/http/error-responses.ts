import type { MiddlewareObj } from '@middy/core';
import type { APIGatewayProxyResult } from 'aws-lambda';
import type * as z from 'zod';
import { isPipelineError, PipelineError, type PipelineErrorCode } from '../errors';
import { jsonResponse } from './responses';
import { retryAfterSeconds, unavailableCause } from './unavailable';

/**
 * A transport-level refusal (404 route, 405, 413, 415) that has no domain meaning, so it is
 * not a PipelineError code; its message and `extra` are safe to show the caller.
 */
export class HttpError extends Error {
  override readonly name = 'HttpError';
  constructor(
    readonly statusCode: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** One failing input field as the API reports it in a 400's `fields`. */
export interface FieldError {
  /** Dotted path of the field (`title`, `tags.0`); `''` is the request body as a whole. */
  readonly path: string;
  readonly message: string;
}

/** Turns zod issues into `fields`, prefixing paths that come from a part of the request. */
export function toFieldErrors(error: z.ZodError, prefix: readonly PropertyKey[] = []): FieldError[] {
  const at = (path: readonly PropertyKey[]) => [...prefix, ...path].map(String).join('.');
  return error.issues.flatMap((issue) =>
    // zod reports unknown keys on the parent object; name each key so the caller sees which.
    issue.code === 'unrecognized_keys'
      ? issue.keys.map((key) => ({ path: at([...issue.path, key]), message: 'unknown field' }))
      : [{ path: at(issue.path), message: issue.message }],
  );
}

/** The VALIDATION error every bad input maps to (400 with `fields`), whichever check caught it. */
export function validationError(message: string, fields: readonly FieldError[]): PipelineError {
  return new PipelineError('VALIDATION', message, { fields });
}

/** The logging the error middleware needs; a Powertools Logger fits. */
export interface ErrorLogger {
  error(message: string, ...extra: unknown[]): void;
}

// Only these codes are the caller's fault; their message and details are meant for the caller.
const clientErrorStatus: Partial<Record<PipelineErrorCode, number>> = {
  VALIDATION: 400,
  NOT_FOUND: 404,
  CONFLICT: 409,
  // The IETF draft on the Idempotency-Key header answers a key reused with another request 422:
  // https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/ (section 2.7).
  IDEMPOTENCY_KEY_REUSED: 422,
};

/**
 * What a caller is told when the database did not answer a statement in time: it was sent, so
 * it may still take effect. Not a 503 ("try again later", which promises nothing happened): a
 * 504, as a gateway answers when what it waited on did not answer (RFC 9110, 15.6.5).
 */
export const outcomeUnknownMessage =
  'the database did not answer in time; the change may still be made: read it back, or send the request again with the same Idempotency-Key';

/**
 * Middy middleware that turns any error into the response the caller gets: HttpError and the
 * client-fault PipelineError codes become 4xx `{ error, ...details }`; an outage of the database
 * or the disk (see {@link unavailableCause}) a 503 with `Retry-After`, so a client knows the same
 * request may succeed later; a statement the database never answered (`DB_OUTCOME_UNKNOWN`) a 504
 * saying the change may still be made; everything else a generic 500 `{ error: "internal error" }`.
 * The details of a 5xx go only to the log, so database messages and stack traces never leak.
 */
export function httpErrors(options: {
  readonly logger: ErrorLogger;
}): MiddlewareObj<unknown, APIGatewayProxyResult> {
  return {
    onError(request) {
      const err = request.error;
      const status = isPipelineError(err) ? clientErrorStatus[err.code] : undefined;
      if (err instanceof HttpError) {
        request.response = jsonResponse(err.statusCode, { ...err.extra, error: err.message }, err.headers);
      } else if (isPipelineError(err) && status !== undefined) {
        request.response = jsonResponse(status, { ...err.details, error: err.message });
      } else if (isPipelineError(err, 'DB_OUTCOME_UNKNOWN')) {
        options.logger.error('outcome unknown', err);
        request.response = jsonResponse(504, { error: outcomeUnknownMessage });
      } else if (unavailableCause(err) !== undefined) {
        options.logger.error('unavailable', err);
        request.response = jsonResponse(
          503,
          { error: `${unavailableCause(err)}; try again later` },
          { 'retry-after': String(retryAfterSeconds) },
        );
      } else {
        options.logger.error('unhandled error', err);
        request.response = jsonResponse(500, { error: 'internal error' });
      }
      // No return value: returning would end the onError chain, and other middlewares
      // (the Powertools logger's) still need to see the error.
    },
  };
}
