/**
 * A UUID in its text form, 8-4-4-4-12 hexadecimal digits in either case (RFC 9562 §4: read
 * case-insensitively), of any version. The tasks and ops APIs validate ids with zod's stricter
 * `z.uuid()`; clients check this shape first because a task id goes into a URL path, where
 * anything else (`..`, `a/b`) could address another route. The dashboard is served it
 * (`source` and `flags`), since its browser code cannot import this module.
 */
export const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
