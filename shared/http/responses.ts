import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';

/** Builds a JSON response, so every route and error answers with the same content type. */
export function jsonResponse(
  statusCode: number,
  body: unknown,
  headers: Record<string, string> = {},
): APIGatewayProxyResult {
  return {
    statusCode,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
    body: JSON.stringify(body),
  };
}

/**
 * Reads a request header by name, case-insensitively (HTTP header names are; API Gateway
 * passes them as the client sent them, and a local server may lower-case them).
 */
export function getHeader(
  event: Pick<APIGatewayProxyEvent, 'headers' | 'multiValueHeaders'>,
  name: string,
): string | undefined {
  const wanted = name.toLowerCase();
  // Events built by hand (tests, the local server) may carry null for either map.
  for (const [key, value] of Object.entries(event.headers ?? {})) {
    if (key.toLowerCase() === wanted && value !== undefined) return value;
  }
  for (const [key, values] of Object.entries(event.multiValueHeaders ?? {})) {
    if (key.toLowerCase() === wanted && values?.[0] !== undefined) return values[0];
  }
  return undefined;
}
