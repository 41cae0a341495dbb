import type { MiddlewareObj } from '@middy/core';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { isPipelineError, type PipelineErrorCode } from '../errors';
import { HttpError } from './http-error';
import { jsonResponse } from './responses';
import { retryAfterSeconds, unavailableCause } from './unavailable';

/** The logging the error middleware needs; a Powertools Logger fits. */
export interface ErrorLogger {
  error(message: string, ...extra: unknown[]): void;
}

// Only these codes are the caller's fault; their message and details are meant for the caller.
const clientErrorStatus: Partial<Record<PipelineErrorCode, number>> = {
  VALIDATION: 400,
  NOT_FOUND: 404,
  CONFLICT: 409,
};

/**
 * Middy middleware that turns any error into the response the caller gets: HttpError and the
 * client-fault PipelineError codes become 4xx `{ error, ...details }`; an outage of the database
 * or the disk (see {@link unavailableCause}) a 503 with `Retry-After`, so a client knows the same
 * request may succeed later; everything else a generic 500 `{ error: "internal error" }`. The
 * details of a 503 or a 500 go only to the log, so database messages and stack traces never leak.
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
