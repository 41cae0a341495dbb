import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { type JsonObject, parseJsonObject } from './json';
import { type XmlFragment, xml, xmlDocument } from './xml';

/**
 * An AWS error a stand-in answers with. Each endpoint throws it from its operations and renders
 * it in its protocol's shape, so the SDK raises the exception class AWS would make it raise.
 */
export class AwsFault extends Error {
  override readonly name = 'AwsFault';

  constructor(
    /** The error code: the exception name the SDK raises (`ResourceNotFoundException`). */
    readonly code: string,
    message: string,
    readonly status = 400,
    readonly options: {
      /**
       * For awsQuery-compatible JSON services (SQS, CloudWatch): the legacy Query code the SDK
       * reads first from `x-amzn-query-error` (`AWS.SimpleQueueService.NonExistentQueue`).
       */
      readonly queryCode?: string;
      /** Extra members of the JSON error body (Lambda's `Type`). */
      readonly extra?: Readonly<Record<string, unknown>>;
    } = {},
  ) {
    super(message);
  }
}

/** The wire details of one awsJson service. */
export interface AwsJsonProtocol {
  readonly version: '1.0' | '1.1';
  /** Sends `x-amzn-query-error` with each error, as SQS and CloudWatch do. */
  readonly queryCompatible?: boolean;
}

/** The operation an awsJson request names: `X-Amz-Target: <prefix>.<Operation>`. */
export function jsonTarget(target: string | string[] | undefined, prefix: string): string | undefined {
  const value = Array.isArray(target) ? target[0] : target;
  return value?.startsWith(`${prefix}.`) ? value.slice(prefix.length + 1) : undefined;
}

/** The body of an awsJson request, or a `SerializationException` as AWS answers a bad one. */
export function jsonRequest(body: Buffer): JsonObject {
  const parsed = parseJsonObject(body);
  if (!parsed)
    throw new AwsFault('SerializationException', 'Start of structure or map found where not expected.');
  return parsed;
}

function send(res: ServerResponse, status: number, headers: Record<string, string>, body: string | Buffer) {
  res.writeHead(status, { ...headers, 'content-length': String(Buffer.byteLength(body)) });
  res.end(body);
}

/** A successful awsJson answer. */
export function sendAwsJson(res: ServerResponse, protocol: AwsJsonProtocol, body: unknown): void {
  send(
    res,
    200,
    { 'content-type': `application/x-amz-json-${protocol.version}`, 'x-amzn-requestid': randomUUID() },
    JSON.stringify(body),
  );
}

/**
 * An awsJson error: `x-amzn-ErrorType` and `{"__type","message"}`, plus `x-amzn-query-error:
 * <code>;Sender|Receiver` for query-compatible services (the SDK reads that first and maps the
 * legacy code to the modelled exception through its `awsQueryError` trait).
 */
export function sendAwsJsonFault(res: ServerResponse, protocol: AwsJsonProtocol, fault: AwsFault): void {
  const headers: Record<string, string> = {
    'content-type': `application/x-amz-json-${protocol.version}`,
    'x-amzn-requestid': randomUUID(),
    'x-amzn-errortype': fault.code,
  };
  if (protocol.queryCompatible) {
    headers['x-amzn-query-error'] =
      `${fault.options.queryCode ?? fault.code};${fault.status < 500 ? 'Sender' : 'Receiver'}`;
  }
  send(
    res,
    fault.status,
    headers,
    JSON.stringify({ __type: fault.code, message: fault.message, ...fault.options.extra }),
  );
}

/** A successful awsQuery answer: `<OpResponse xmlns><OpResult>…</OpResult><ResponseMetadata>`. */
export function sendQueryResult(
  res: ServerResponse,
  xmlns: string,
  operation: string,
  result: readonly XmlFragment[],
): void {
  const body = xmlDocument(
    xml(
      `${operation}Response`,
      [xml(`${operation}Result`, result), xml('ResponseMetadata', [xml('RequestId', randomUUID())])],
      { xmlns },
    ),
  );
  send(res, 200, { 'content-type': 'text/xml' }, body);
}

/** An awsQuery error: `<ErrorResponse><Error><Type/><Code/><Message/></Error><RequestId/>`. */
export function sendQueryFault(res: ServerResponse, xmlns: string, fault: AwsFault): void {
  const body = xmlDocument(
    xml(
      'ErrorResponse',
      [
        xml('Error', [
          xml('Type', fault.status < 500 ? 'Sender' : 'Receiver'),
          xml('Code', fault.code),
          xml('Message', fault.message),
        ]),
        xml('RequestId', randomUUID()),
      ],
      { xmlns },
    ),
  );
  send(res, fault.status, { 'content-type': 'text/xml' }, body);
}

/** A restJson answer with any status and headers. */
export function sendRestJson(
  res: ServerResponse,
  status: number,
  body: string | Buffer,
  headers: Record<string, string> = {},
): void {
  send(
    res,
    status,
    { 'content-type': 'application/json', 'x-amzn-requestid': randomUUID(), ...headers },
    body,
  );
}

/** A restJson error: `x-amzn-ErrorType` names it; the body carries the message. */
export function sendRestJsonFault(res: ServerResponse, fault: AwsFault): void {
  sendRestJson(res, fault.status, JSON.stringify({ message: fault.message, ...fault.options.extra }), {
    'x-amzn-errortype': fault.code,
  });
}

/** `err` as an AwsFault: a stand-in's own bug becomes a 500 `InternalFailure` naming it. */
export function toFault(err: unknown): AwsFault {
  if (err instanceof AwsFault) return err;
  return new AwsFault(
    'InternalFailure',
    `stand-in failure: ${err instanceof Error ? err.message : String(err)}`,
    500,
  );
}
