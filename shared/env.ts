import * as z from 'zod';
import { PipelineError } from './errors';

/** Variables by name: the process environment, or settings read the same way (CDK context). */
type Env = Readonly<Record<string, unknown>>;

/**
 * An optional variable. Deploy tooling often sets a variable to '' rather than leaving it out,
 * so a blank value counts as unset.
 */
export const blankIsUnset = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => (typeof v === 'string' && v.trim() === '' ? undefined : v), schema.optional());

/** A variable holding JSON, checked by `schema` after parsing ('must be JSON' when it does not parse). */
export const jsonVariable = <T extends z.ZodType>(schema: T) =>
  z
    .string()
    .transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be JSON' });
        return z.NEVER;
      }
    })
    .pipe(schema);

/** One failing variable, as a CONFIG error's `details.fields` lists it. */
export interface ConfigField {
  readonly path: string;
  readonly message: string;
}

/** The CONFIG error's fields for zod's issues: each issue's dotted path and message. */
export function configFields(error: z.ZodError): ConfigField[] {
  return error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
}

/**
 * Parses `env` with `schema`. On failure throws PipelineError CONFIG naming every bad variable
 * (`details.fields`), never echoing a value (a URL may hold a password). Call it at module
 * scope in a handler so a bad deploy fails on cold start, not on the first request.
 */
export function parseEnvironment<T extends z.ZodType>(schema: T, env: Env, what: string): z.output<T> {
  const parsed = schema.safeParse(env);
  if (parsed.success) return parsed.data;
  throw configError(what, configFields(parsed.error));
}

/** The CONFIG error for `fields`: "invalid <what>: PATH: message; …". */
export function configError(what: string, fields: readonly ConfigField[]): PipelineError {
  return new PipelineError(
    'CONFIG',
    `invalid ${what}: ${fields.map((f) => `${f.path}: ${f.message}`).join('; ')}`,
    { fields },
  );
}
