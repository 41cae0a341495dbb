import { createHash } from 'node:crypto';

/**
 * JSON with object keys sorted at every level, so the same event hashes the same however its
 * producer ordered the keys (PostgreSQL jsonb reorders them, EventBridge may too).
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

/**
 * SHA-256 of the canonical JSON of a CloudEvent (the EventBridge `detail`, not the envelope:
 * the envelope's id and time change on every re-publish, the CloudEvent does not).
 */
export function payloadHash(cloudEvent: unknown): string {
  return createHash('sha256').update(canonicalJson(cloudEvent)).digest('hex');
}
