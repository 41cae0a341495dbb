/** A JSON object from a request body, members unchecked until read through the helpers below. */
export type JsonObject = Readonly<Record<string, unknown>>;

/** `value` as an object, or an empty one when it is anything else (array, null, scalar). */
export function asObject(value: unknown): JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as JsonObject) : {};
}

/** `value` as an array, or an empty one. */
export function asArray(value: unknown): readonly unknown[] {
  return Array.isArray(value) ? value : [];
}

/** The string member `key`, or undefined when absent or not a string. */
export function stringField(object: JsonObject, key: string): string | undefined {
  const value = object[key];
  return typeof value === 'string' ? value : undefined;
}

/** The number member `key`, or undefined when absent or not a number. */
export function numberField(object: JsonObject, key: string): number | undefined {
  const value = object[key];
  return typeof value === 'number' ? value : undefined;
}

/** The string members of the array `key` (others dropped). */
export function stringsField(object: JsonObject, key: string): string[] {
  return asArray(object[key]).filter((v): v is string => typeof v === 'string');
}

/** Parses a body as a JSON object; undefined when it is not one (describers then fall back). */
export function parseJsonObject(body: Buffer | string): JsonObject | undefined {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  if (text.trim() === '') return {};
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
      ? (parsed as JsonObject)
      : undefined;
  } catch {
    return undefined;
  }
}
