import type * as z from 'zod';
import { PipelineError } from '../errors';

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
