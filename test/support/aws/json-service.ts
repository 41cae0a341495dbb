import { type CallRecorder, callerOf } from './calls';
import type { RequestHandler } from './http';
import { decodeBody, readRawBody, requestUrl } from './http';
import { type JsonObject, parseJsonObject } from './json';
import {
  AwsFault,
  type AwsJsonProtocol,
  jsonRequest,
  jsonTarget,
  sendAwsJson,
  sendAwsJsonFault,
  toFault,
} from './protocol';

/** One awsJson stand-in: how a call is named, checked against IAM, and answered. */
export interface AwsJsonService {
  /** The IAM service prefix (`cloudwatch`), also the recorder's service name. */
  readonly service: string;
  readonly protocol: AwsJsonProtocol;
  /** `X-Amz-Target: <targetPrefix>.<Operation>`. */
  readonly targetPrefix: string;
  readonly recorder: CallRecorder;
  /** What IAM checks the call against: the action (default `<service>:<Operation>`) and its resources. */
  readonly authorize: (
    operation: string,
    body: JsonObject,
  ) => { readonly action?: string; readonly resources: readonly string[] };
  /** The answer, or an `AwsFault` thrown in the service's own error shape. */
  readonly serve: (operation: string, body: JsonObject, caller: string) => unknown;
}

/**
 * The request handler every awsJson stand-in shares: read the operation from the target header,
 * undo any Content-Encoding, record the call with what IAM would check (before the body is
 * validated, as IAM authorizes before the service parses), then answer or render the fault.
 */
export function awsJsonHandler(spec: AwsJsonService): RequestHandler {
  return async (req, res) => {
    const caller = callerOf(req.headers, requestUrl(req));
    const operation = jsonTarget(req.headers['x-amz-target'], spec.targetPrefix) ?? '';
    const raw = await decodeBody(req, await readRawBody(req));
    const { action, resources } = spec.authorize(operation, parseJsonObject(raw) ?? {});
    spec.recorder.record(caller, spec.service, [
      {
        action: action ?? `${spec.service}:${operation || 'Unrecognized'}`,
        resources: [...resources],
        operation,
      },
    ]);
    try {
      sendAwsJson(res, spec.protocol, await spec.serve(operation, jsonRequest(raw), caller));
    } catch (err) {
      sendAwsJsonFault(res, spec.protocol, toFault(err));
    }
  };
}

/** What a JSON service answers an operation the stand-in does not serve. */
export function unknownOperation(operation: string): AwsFault {
  return new AwsFault('UnknownOperationException', `The stand-in does not serve ${operation || '(none)'}.`);
}
