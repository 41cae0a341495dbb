import type { CallRecorder, DescribedCall, KeyedItem } from './calls';
import { asArray, asObject, type JsonObject, parseJsonObject, stringField } from './json';
import { jsonTarget } from './protocol';
import { type ProxiedRequest, type RecordingProxy, startRecordingProxy } from './proxy';

const targetPrefix = 'DynamoDB_20120810';

// A transaction is authorized item by item, as the underlying single-item action: "Permissions
// for Put, Update, Delete, and Get actions are governed by the permissions used for the
// underlying PutItem, UpdateItem, DeleteItem, and GetItem operations. For the ConditionCheck
// action, you can use the dynamodb:ConditionCheckItem permission"
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html).
// There is no dynamodb:TransactWriteItems action for a role to grant.
const transactionActions: Record<string, string> = {
  Put: 'dynamodb:PutItem',
  Update: 'dynamodb:UpdateItem',
  Delete: 'dynamodb:DeleteItem',
  ConditionCheck: 'dynamodb:ConditionCheckItem',
  Get: 'dynamodb:GetItem',
};

// PartiQL is authorized per statement verb (dynamodb:PartiQLSelect, ...), on the table it names.
const partiqlStatement =
  /^\s*(SELECT)\b[\s\S]*?\bFROM\s+"?([\w.-]+)"?|^\s*(INSERT)\s+INTO\s+"?([\w.-]+)"?|^\s*(UPDATE)\s+"?([\w.-]+)"?|^\s*(DELETE)\s+FROM\s+"?([\w.-]+)"?/i;

function tableArn(recorder: CallRecorder, table: string, index?: string): string {
  // A table may be named by its ARN (the SDK allows it since 2024): keep the ARN as it is.
  const base = table.startsWith('arn:') ? table : recorder.arn('dynamodb', `table/${table}`);
  return index ? `${base}/index/${index}` : base;
}

/** The string and number attributes of a DynamoDB JSON item or key (`{"pk": {"S": "..."}}`), as text. */
function scalarAttributes(item: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(asObject(item))) {
    const typed = asObject(value);
    const text = stringField(typed, 'S') ?? stringField(typed, 'N');
    if (text !== undefined) out[name] = text;
  }
  return out;
}

/** The items a single-item or batch request names by key (Query and Scan name none). */
function keyedItems(recorder: CallRecorder, operation: string, body: JsonObject): KeyedItem[] {
  const table = stringField(body, 'TableName');
  switch (operation) {
    case 'GetItem':
    case 'UpdateItem':
    case 'DeleteItem':
      return table ? [{ resource: tableArn(recorder, table), attributes: scalarAttributes(body.Key) }] : [];
    case 'PutItem':
      return table ? [{ resource: tableArn(recorder, table), attributes: scalarAttributes(body.Item) }] : [];
    case 'BatchGetItem':
      return Object.entries(asObject(body.RequestItems)).flatMap(([t, request]) =>
        asArray(asObject(request).Keys).map((key) => ({
          resource: tableArn(recorder, t),
          attributes: scalarAttributes(key),
        })),
      );
    case 'BatchWriteItem':
      return Object.entries(asObject(body.RequestItems)).flatMap(([t, writes]) =>
        asArray(writes).map((write) => {
          const w = asObject(write);
          const item = asObject(w.PutRequest).Item ?? asObject(w.DeleteRequest).Key;
          return { resource: tableArn(recorder, t), attributes: scalarAttributes(item) };
        }),
      );
    default:
      return [];
  }
}

/** Distinct values of `pairs` grouped by key, in first-seen order. */
function grouped(pairs: readonly (readonly [string, string])[]): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  for (const [key, value] of pairs) {
    const group = groups.get(key) ?? [];
    if (!group.includes(value)) group.push(value);
    groups.set(key, group);
  }
  return groups;
}

function transactionCalls(recorder: CallRecorder, operation: string, body: JsonObject): DescribedCall[] {
  const pairs: [string, string][] = [];
  for (const item of asArray(body.TransactItems)) {
    for (const [kind, request] of Object.entries(asObject(item))) {
      const action = transactionActions[kind];
      const table = stringField(asObject(request), 'TableName');
      if (action && table) pairs.push([action, tableArn(recorder, table)]);
    }
  }
  return [...grouped(pairs)].map(([action, resources]) => ({ action, resources, operation }));
}

function partiqlCalls(
  recorder: CallRecorder,
  operation: string,
  statements: readonly string[],
): DescribedCall[] {
  const pairs: [string, string][] = statements.map((statement) => {
    const m = partiqlStatement.exec(statement);
    const verb = m?.[1] ?? m?.[3] ?? m?.[5] ?? m?.[7];
    const table = m?.[2] ?? m?.[4] ?? m?.[6] ?? m?.[8];
    if (!verb || !table) return ['dynamodb:PartiQLUnrecognized', '*'];
    const name = `${verb.charAt(0).toUpperCase()}${verb.slice(1).toLowerCase()}`;
    return [`dynamodb:PartiQL${name}`, tableArn(recorder, table)];
  });
  return [...grouped(pairs)].map(([action, resources]) => ({ action, resources, operation }));
}

/**
 * The IAM calls of one DynamoDB request (JSON 1.0, `X-Amz-Target: DynamoDB_20120810.<Op>`):
 * `dynamodb:<Op>` on `table/<TableName>` (plus `/index/<IndexName>` when the request names an
 * index); BatchGetItem / BatchWriteItem on every table of `RequestItems`; TransactWriteItems /
 * TransactGetItems as one call per underlying item action (see above), each on its tables;
 * PartiQL per verb; operations without a table (ListTables) on `*`. Item and batch requests
 * also carry the keys they name (`keyedItems`), for the leading-keys conditions.
 */
export function describeDynamoDbRequest(request: ProxiedRequest, recorder: CallRecorder): DescribedCall[] {
  const operation = jsonTarget(request.headers['x-amz-target'], targetPrefix);
  if (!operation) return [{ action: 'dynamodb:Unrecognized', resources: ['*'], operation: request.method }];
  const body = parseJsonObject(request.body) ?? {};
  switch (operation) {
    case 'TransactWriteItems':
    case 'TransactGetItems':
      return transactionCalls(recorder, operation, body);
    case 'BatchGetItem':
    case 'BatchWriteItem':
      return [
        {
          action: `dynamodb:${operation}`,
          resources: Object.keys(asObject(body.RequestItems)).map((t) => tableArn(recorder, t)),
          operation,
          keyedItems: keyedItems(recorder, operation, body),
        },
      ];
    case 'ExecuteStatement':
      return partiqlCalls(recorder, operation, [stringField(body, 'Statement') ?? '']);
    case 'BatchExecuteStatement':
    case 'ExecuteTransaction': {
      const list = operation === 'ExecuteTransaction' ? body.TransactStatements : body.Statements;
      return partiqlCalls(
        recorder,
        operation,
        asArray(list).map((s) => stringField(asObject(s), 'Statement') ?? ''),
      );
    }
  }
  const table = stringField(body, 'TableName');
  const resourceArn = stringField(body, 'ResourceArn');
  const resources = table
    ? [tableArn(recorder, table, stringField(body, 'IndexName'))]
    : resourceArn
      ? [resourceArn]
      : ['*'];
  const items = keyedItems(recorder, operation, body);
  return [
    { action: `dynamodb:${operation}`, resources, operation, ...(items.length ? { keyedItems: items } : {}) },
  ];
}

/** A recording proxy in front of a DynamoDB engine (dynalite, DynamoDB Local) at `backend`. */
export function startDynamoDbProxy(options: {
  backend: string;
  recorder: CallRecorder;
}): Promise<RecordingProxy> {
  return startRecordingProxy({ service: 'dynamodb', describe: describeDynamoDbRequest, ...options });
}
