import type { MiddlewareObj } from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { HttpError, validationError } from './error-responses';
import { getHeader } from './responses';

/** An API Gateway event after {@link jsonBody}: `jsonBody` is the parsed body, `undefined` when none was sent. */
export type JsonBodyEvent = APIGatewayProxyEvent & { jsonBody?: unknown };

/** The largest request body the API reads, in bytes (after base64 decoding). */
export const maxJsonBodyBytes = 64 * 1024;

const jsonMediaType = /^application\/(?:[\w.+-]+\+)?json$/;

// Fatal: a byte sequence that is not UTF-8 is refused, never replaced by U+FFFD and stored.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Middy middleware that checks and parses a JSON request body: 413 when it is over `maxBytes`
 * (bytes, not characters, base64 bodies decoded first), 415 when a body comes with a non-JSON
 * content type, 400 with `fields` when it is not valid JSON.
 *
 * Hand-written rather than @middy/http-json-body-parser because we need those exact statuses
 * and the 400 field list; that package answers 415/422 its own way, has no size limit, and its
 * errors carry no `fields`.
 */
export function jsonBody(
  options: { readonly maxBytes?: number } = {},
): MiddlewareObj<JsonBodyEvent, APIGatewayProxyResult> {
  const maxBytes = options.maxBytes ?? maxJsonBodyBytes;
  return {
    before(request) {
      const event = request.event;
      if (event.body === null || event.body === undefined || event.body === '') {
        event.jsonBody = undefined;
        return;
      }
      const raw = event.isBase64Encoded ? Buffer.from(event.body, 'base64') : Buffer.from(event.body, 'utf8');
      if (raw.byteLength > maxBytes) {
        throw new HttpError(413, `request body is larger than ${maxBytes} bytes`, { maxBytes });
      }
      const contentType = getHeader(event, 'content-type');
      const [type, ...params] = contentType?.split(';') ?? [];
      const mediaType = type?.trim().toLowerCase() ?? '';
      if (!jsonMediaType.test(mediaType)) {
        throw new HttpError(415, `content-type must be application/json, got ${contentType ?? 'none'}`);
      }
      // JSON is UTF-8 (RFC 8259 §8.1): a body declared in another charset would be read wrongly.
      const charset = params
        .map((p) => p.trim().toLowerCase())
        .find((p) => p.startsWith('charset='))
        ?.slice('charset='.length)
        .replace(/^"(.*)"$/, '$1');
      if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
        throw validationError('request body must be UTF-8', [
          { path: '', message: `charset ${charset} is not supported; send UTF-8` },
        ]);
      }
      let text: string;
      try {
        text = utf8.decode(raw);
      } catch {
        throw validationError('request body is not valid UTF-8', [
          { path: '', message: 'the body holds bytes that are not UTF-8' },
        ]);
      }
      try {
        event.jsonBody = JSON.parse(text);
      } catch (err) {
        throw validationError('request body is not valid JSON', [
          { path: '', message: err instanceof Error ? err.message : String(err) },
        ]);
      }
    },
  };
}
