import type { CallRecorder, DescribedCall } from './calls';
import { asArray, asObject, parseJsonObject, stringField } from './json';
import { jsonTarget } from './protocol';
import { type ProxiedRequest, type RecordingProxy, startRecordingProxy } from './proxy';

const targetPrefix = 'AWSEvents';
const defaultBus = 'default';

// Operations addressed to one rule, and the member that names it (PutTargets says `Rule`).
const ruleOperations: Record<string, 'Name' | 'Rule'> = {
  DescribeRule: 'Name',
  EnableRule: 'Name',
  DisableRule: 'Name',
  DeleteRule: 'Name',
  PutRule: 'Name',
  PutTargets: 'Rule',
  RemoveTargets: 'Rule',
  ListTargetsByRule: 'Rule',
};

/** The bus name in an `EventBusName` member, which may be a name or a bus ARN. */
function busNameOf(eventBusName: string | undefined): string {
  if (!eventBusName) return defaultBus;
  if (!eventBusName.startsWith('arn:')) return eventBusName;
  const marker = ':event-bus/';
  const at = eventBusName.indexOf(marker);
  return at >= 0 ? eventBusName.slice(at + marker.length) : eventBusName;
}

/** `arn:aws:events:<region>:<account>:event-bus/<name>`; an ARN is kept as it is. */
export function eventBusArn(recorder: CallRecorder, eventBusName: string | undefined): string {
  if (eventBusName?.startsWith('arn:')) return eventBusName;
  return recorder.arn('events', `event-bus/${eventBusName || defaultBus}`);
}

/** `rule/<name>` on the default bus, `rule/<bus>/<name>` on a custom one (the ARN EventBridge gives). */
export function ruleArn(recorder: CallRecorder, ruleName: string, eventBusName: string | undefined): string {
  if (ruleName.startsWith('arn:')) return ruleName;
  const bus = busNameOf(eventBusName);
  return recorder.arn('events', bus === defaultBus ? `rule/${ruleName}` : `rule/${bus}/${ruleName}`);
}

/**
 * The IAM calls of one EventBridge request (JSON 1.1, `X-Amz-Target: AWSEvents.<Op>`):
 * PutEvents on the bus of each entry (`default` when an entry names none); rule operations on
 * the rule's ARN; anything else on `*`.
 */
export function describeEventBridgeRequest(request: ProxiedRequest, recorder: CallRecorder): DescribedCall[] {
  const operation = jsonTarget(request.headers['x-amz-target'], targetPrefix);
  if (!operation) return [{ action: 'events:Unrecognized', resources: ['*'], operation: request.method }];
  const body = parseJsonObject(request.body) ?? {};
  const action = `events:${operation}`;
  if (operation === 'PutEvents') {
    const buses = asArray(body.Entries).map((e) =>
      eventBusArn(recorder, stringField(asObject(e), 'EventBusName')),
    );
    const sources = asArray(body.Entries).flatMap((e) => stringField(asObject(e), 'Source') ?? []);
    return [
      {
        action,
        resources: [...new Set(buses)],
        operation,
        context: { 'events:source': [...new Set(sources)] },
      },
    ];
  }
  const member = ruleOperations[operation];
  const rule = member ? stringField(body, member) : undefined;
  if (rule)
    return [{ action, resources: [ruleArn(recorder, rule, stringField(body, 'EventBusName'))], operation }];
  return [{ action, resources: ['*'], operation }];
}

/** A recording proxy in front of an EventBridge endpoint (the local bus's PutEvents) at `backend`. */
export function startEventBridgeProxy(options: {
  backend: string;
  recorder: CallRecorder;
}): Promise<RecordingProxy> {
  return startRecordingProxy({ service: 'events', describe: describeEventBridgeRequest, ...options });
}
