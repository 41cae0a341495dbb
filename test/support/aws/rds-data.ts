import type { CallRecorder, DescribedCall } from './calls';
import { parseJsonObject, stringField } from './json';
import { type ProxiedRequest, type RecordingProxy, startRecordingProxy } from './proxy';

// The Data API is restJson: the SDK POSTs each operation to `/<path>`.
const actionsByPath: Record<string, string> = {
  '/Execute': 'rds-data:ExecuteStatement',
  '/BatchExecute': 'rds-data:BatchExecuteStatement',
  '/BeginTransaction': 'rds-data:BeginTransaction',
  '/CommitTransaction': 'rds-data:CommitTransaction',
  '/RollbackTransaction': 'rds-data:RollbackTransaction',
  '/ExecuteSql': 'rds-data:ExecuteSql',
};

/**
 * The IAM calls of one RDS Data API request: the operation on `body.resourceArn` (the cluster),
 * and `secretsmanager:GetSecretValue` on `body.secretArn` for the same caller, because the Data
 * API reads the database secret with the caller's own permissions.
 */
export function describeRdsDataRequest(request: ProxiedRequest, _recorder: CallRecorder): DescribedCall[] {
  const path = request.url.pathname.replace(/\/+$/, '');
  const action = actionsByPath[path] ?? 'rds-data:Unrecognized';
  const operation = path.slice(1) || request.method;
  const body = parseJsonObject(request.body) ?? {};
  const resourceArn = stringField(body, 'resourceArn');
  const secretArn = stringField(body, 'secretArn');
  const calls: DescribedCall[] = [{ action, resources: [resourceArn ?? '*'], operation }];
  if (secretArn) calls.push({ action: 'secretsmanager:GetSecretValue', resources: [secretArn], operation });
  return calls;
}

/** A recording proxy in front of a Data API endpoint (test/support/data-api-server.ts) at `backend`. */
export function startRdsDataProxy(options: {
  backend: string;
  recorder: CallRecorder;
}): Promise<RecordingProxy> {
  return startRecordingProxy({ service: 'rds-data', describe: describeRdsDataRequest, ...options });
}
