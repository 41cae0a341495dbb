import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CallRecorder } from './calls';
import { closeServer, type LocalEndpoint, listenOnLoopback } from './http';
import { asArray, asObject, type JsonObject, numberField, stringField, stringsField } from './json';
import { awsJsonHandler } from './json-service';
import { AwsFault, type AwsJsonProtocol, toFault } from './protocol';

const protocol: AwsJsonProtocol = { version: '1.0', queryCompatible: true };
const targetPrefix = 'AmazonSQS';

/** One message attribute as the JSON protocol carries it (`BinaryValue` base64). */
export interface SqsMessageAttribute {
  readonly DataType: string;
  readonly StringValue?: string;
  readonly BinaryValue?: string;
}

/** A queue to create up front. */
export interface QueueDefinition {
  /** The queue name, or its ARN (the name is its last segment). */
  readonly name: string;
  /** @default 30 */
  readonly visibilityTimeoutSeconds?: number;
  /** @default 0 */
  readonly delaySeconds?: number;
  /**
   * The queue's RedrivePolicy: a message received `maxReceiveCount` times moves to the DLQ (a
   * queue of this stand-in, by name) on its next receive, its SentTimestamp kept, as SQS moves a
   * standard queue's message (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html).
   */
  readonly redrive?: { readonly deadLetterQueue: string; readonly maxReceiveCount: number };
}

/** How the SQS stand-in is set up. */
export interface SqsStandinOptions {
  readonly recorder: CallRecorder;
  readonly queues?: readonly (string | QueueDefinition)[];
  /**
   * ReceiveMessage honours WaitTimeSeconds up to this many milliseconds, so a long poll in a
   * rehearsal costs at most this. @default 1000
   */
  readonly maxWaitMs?: number;
  /** The clock visibility timeouts, delays and the purge limit run on. @default Date.now */
  readonly now?: () => number;
  /**
   * The clock SentTimestamp is stamped from. A test that moves `now` to stand for waiting (a delay
   * come due) passes the wall clock here, as AWS stamps it: a reader comparing SentTimestamp with
   * its own clock (the ops API redrives only letters dead before its request) must not see a
   * message sent in its future. @default now
   */
  readonly sentClock?: () => number;
}

/** A message as tests see it. */
export interface SqsMessageView {
  readonly messageId: string;
  readonly body: string;
  readonly messageAttributes: Readonly<Record<string, SqsMessageAttribute>>;
  readonly receiveCount: number;
  readonly inFlight: boolean;
}

/** A running SQS stand-in (awsJson1_0, query-compatible errors). */
export interface SqsStandin extends LocalEndpoint {
  /** Creates a queue (if it does not exist) and returns its QueueUrl. */
  createQueue(queue: string | QueueDefinition): string;
  /** `http://127.0.0.1:<port>/<account>/<name>`. */
  queueUrl(name: string): string;
  /** `arn:aws:sqs:<region>:<account>:<name>`. */
  queueArn(name: string): string;
  /** The queue's messages not yet deleted, in send order. */
  messages(name: string): SqsMessageView[];
  /**
   * Resolves once a ReceiveMessage on the queue has found nothing to return and waits (a long
   * poll): a test sends "while a long poll waits" at that point, not after a guessed delay.
   */
  nextLongPoll(name: string): Promise<void>;
  /**
   * Refuses every `operation` by `caller` (an access key id) with `fault` until called again
   * without one: a role that lost a grant, an API that fails for one function.
   */
  refuse(
    operation: string,
    caller: string,
    fault?: { readonly code: string; readonly message: string; readonly status: number },
  ): void;
}

interface StoredMessage {
  readonly id: string;
  readonly body: string;
  readonly md5OfBody: string;
  readonly attributes: Readonly<Record<string, SqsMessageAttribute>>;
  readonly sentAt: number;
  readonly senderId: string;
  visibleAt: number;
  receiveCount: number;
  firstReceiveAt?: number;
  /** The most recent receipt handle: only it deletes the message. */
  receiptHandle?: string;
  deleted: boolean;
}

interface Queue {
  readonly name: string;
  readonly arn: string;
  readonly url: string;
  readonly visibilityTimeout: number;
  readonly delaySeconds: number;
  readonly createdAt: number;
  readonly messages: StoredMessage[];
  /** Every receipt handle ever issued for this queue. */
  readonly handles: Map<string, StoredMessage>;
  readonly redrive?: QueueDefinition['redrive'];
  lastPurgeAt?: number;
}

const md5 = (data: Buffer | string) => createHash('md5').update(data).digest('hex');

/**
 * MD5OfMessageAttributes as SQS computes it: attributes sorted by name, each encoded as
 * length-prefixed (4-byte big-endian) name, data type, a transport byte (1 string, 2 binary)
 * and length-prefixed value bytes.
 */
export function md5OfMessageAttributes(attributes: Readonly<Record<string, SqsMessageAttribute>>): string {
  const parts: Buffer[] = [];
  const lengthPrefixed = (bytes: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    parts.push(length, bytes);
  };
  for (const name of Object.keys(attributes).sort()) {
    const a = attributes[name] as SqsMessageAttribute;
    lengthPrefixed(Buffer.from(name, 'utf8'));
    lengthPrefixed(Buffer.from(a.DataType, 'utf8'));
    const binary = a.DataType.startsWith('Binary');
    parts.push(Buffer.from([binary ? 2 : 1]));
    lengthPrefixed(
      binary ? Buffer.from(a.BinaryValue ?? '', 'base64') : Buffer.from(a.StringValue ?? '', 'utf8'),
    );
  }
  return md5(Buffer.concat(parts));
}

// SendMessage: "A message can include only XML, JSON, and unformatted text. The following
// Unicode characters are allowed: #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD |
// #x10000 to #x10FFFF. Any characters not included in this list will be rejected."
const invalidBodyCharacter = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;

const systemAttributeNames = [
  'SenderId',
  'SentTimestamp',
  'ApproximateReceiveCount',
  'ApproximateFirstReceiveTimestamp',
] as const;

const queueAttributeNames = [
  'QueueArn',
  'ApproximateNumberOfMessages',
  'ApproximateNumberOfMessagesNotVisible',
  'ApproximateNumberOfMessagesDelayed',
  'VisibilityTimeout',
  'DelaySeconds',
  'CreatedTimestamp',
  'LastModifiedTimestamp',
  'MessageRetentionPeriod',
  'ReceiveMessageWaitTimeSeconds',
  'MaximumMessageSize',
] as const;

const nonExistentQueue = () =>
  new AwsFault('QueueDoesNotExist', 'The specified queue does not exist.', 400, {
    queryCode: 'AWS.SimpleQueueService.NonExistentQueue',
  });

const invalidValue = (message: string) => new AwsFault('InvalidParameterValue', message);

function integerIn(body: JsonObject, key: string, min: number, max: number): number | undefined {
  const value = numberField(body, key);
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw invalidValue(
      `Value ${value} for parameter ${key} is invalid. Reason: Must be between ${min} and ${max}, if provided.`,
    );
  }
  return value;
}

function parseMessageAttributes(value: unknown): Record<string, SqsMessageAttribute> {
  const attributes: Record<string, SqsMessageAttribute> = {};
  for (const [name, raw] of Object.entries(asObject(value))) {
    const a = asObject(raw);
    const dataType = stringField(a, 'DataType');
    const stringValue = stringField(a, 'StringValue');
    const binaryValue = stringField(a, 'BinaryValue');
    if (!dataType)
      throw invalidValue(`The message attribute '${name}' must contain a non-empty attribute type.`);
    const binary = dataType.startsWith('Binary');
    if (binary ? !binaryValue : !stringValue) {
      throw invalidValue(
        `The message attribute '${name}' with type '${dataType}' must use field '${binary ? 'Binary' : 'String'}'.`,
      );
    }
    attributes[name] = {
      DataType: dataType,
      ...(binary ? { BinaryValue: binaryValue } : { StringValue: stringValue }),
    };
  }
  if (Object.keys(attributes).length > 10) {
    throw invalidValue(
      `Number of message attributes [${Object.keys(attributes).length}] exceeds the allowed maximum [10].`,
    );
  }
  return attributes;
}

/** The attributes `names` asks for: `All` / `.*`, exact names, or `prefix.*`. */
function selectAttributes(
  attributes: Readonly<Record<string, SqsMessageAttribute>>,
  names: readonly string[],
): Record<string, SqsMessageAttribute> {
  const selected: Record<string, SqsMessageAttribute> = {};
  for (const [name, value] of Object.entries(attributes)) {
    const wanted = names.some(
      (n) => n === 'All' || n === '.*' || n === name || (n.endsWith('.*') && name.startsWith(n.slice(0, -1))),
    );
    if (wanted) selected[name] = value;
  }
  return selected;
}

/**
 * Starts an SQS stand-in on 127.0.0.1 speaking the JSON protocol the SDK's SQS client uses
 * (`X-Amz-Target: AmazonSQS.<Op>`): CreateQueue, GetQueueUrl, SendMessage, ReceiveMessage,
 * DeleteMessage, ChangeMessageVisibility, GetQueueAttributes, PurgeQueue. Each call is recorded
 * as `sqs:<Op>` on the queue's ARN.
 *
 * Receipt handles follow the documented rule: each receive issues a new handle, and "If you use
 * an old ReceiptHandle, the request will succeed, but the message might not be deleted"
 * (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_DeleteMessage.html);
 * the stand-in takes the unkind branch: a stale handle deletes nothing. Standard queues only:
 * FIFO ordering, groups and deduplication are not modelled.
 */
export async function startSqsStandin(options: SqsStandinOptions): Promise<SqsStandin> {
  const { recorder } = options;
  const now = options.now ?? Date.now;
  const sentClock = options.sentClock ?? now;
  const maxWaitMs = options.maxWaitMs ?? 1_000;
  const queues = new Map<string, Queue>();
  const longPollWatchers = new Map<string, (() => void)[]>();
  const refusals: { operation: string; caller: string; code: string; message: string; status: number }[] = [];
  let origin = '';

  const nameOf = (nameOrArn: string) =>
    nameOrArn.startsWith('arn:') ? (nameOrArn.split(':').pop() ?? '') : nameOrArn;
  const queueArn = (name: string) => recorder.arn('sqs', name);
  const queueUrl = (name: string) => `${origin}/${recorder.accountId}/${name}`;

  function createQueue(definition: string | QueueDefinition): Queue {
    const d = typeof definition === 'string' ? { name: definition } : definition;
    const name = nameOf(d.name);
    const existing = queues.get(name);
    if (existing) {
      const differs =
        (d.visibilityTimeoutSeconds !== undefined &&
          d.visibilityTimeoutSeconds !== existing.visibilityTimeout) ||
        (d.delaySeconds !== undefined && d.delaySeconds !== existing.delaySeconds);
      if (differs) {
        throw new AwsFault(
          'QueueNameExists',
          'A queue already exists with the same name and a different value for attribute(s)',
          400,
          {
            queryCode: 'QueueAlreadyExists',
          },
        );
      }
      return existing;
    }
    const queue: Queue = {
      name,
      arn: queueArn(name),
      url: queueUrl(name),
      visibilityTimeout: d.visibilityTimeoutSeconds ?? 30,
      delaySeconds: d.delaySeconds ?? 0,
      createdAt: now(),
      messages: [],
      handles: new Map(),
      ...(d.redrive ? { redrive: d.redrive } : {}),
    };
    queues.set(name, queue);
    return queue;
  }

  /** The queue a QueueUrl names (any host: the SDK may rewrite it), or undefined. */
  function queueNamedBy(url: string | undefined): string | undefined {
    if (!url) return undefined;
    try {
      const segments = new URL(url).pathname.split('/').filter(Boolean);
      return segments.length === 2 && segments[0] === recorder.accountId ? segments[1] : undefined;
    } catch {
      return undefined; // not a URL: no queue, answered as NonExistentQueue below
    }
  }

  function queueOf(body: JsonObject): Queue {
    const name = queueNamedBy(stringField(body, 'QueueUrl'));
    const queue = name ? queues.get(name) : undefined;
    if (!queue) throw nonExistentQueue();
    return queue;
  }

  const live = (q: Queue) => q.messages.filter((m) => !m.deleted);
  const inFlight = (m: StoredMessage, t: number) => m.receiveCount > 0 && m.visibleAt > t;

  function handleOf(queue: Queue, body: JsonObject): { handle: string; message: StoredMessage } {
    const handle = stringField(body, 'ReceiptHandle') ?? '';
    const message = queue.handles.get(handle);
    if (!message) {
      throw new AwsFault(
        'ReceiptHandleIsInvalid',
        `The input receipt handle "${handle}" is not a valid receipt handle.`,
        404,
      );
    }
    return { handle, message };
  }

  function sendMessage(body: JsonObject, caller: string): JsonObject {
    const queue = queueOf(body);
    const text = stringField(body, 'MessageBody');
    if (!text) {
      throw new AwsFault('MissingParameter', 'The request must contain the parameter MessageBody.');
    }
    if (invalidBodyCharacter.test(text)) {
      throw new AwsFault(
        'InvalidMessageContents',
        'Invalid characters found. Deleted message body contains invalid characters.',
      );
    }
    const delay = integerIn(body, 'DelaySeconds', 0, 900) ?? queue.delaySeconds;
    const attributes = parseMessageAttributes(body.MessageAttributes);
    const sentAt = sentClock();
    const message: StoredMessage = {
      id: randomUUID(),
      body: text,
      md5OfBody: md5(text),
      attributes,
      sentAt,
      senderId: caller,
      visibleAt: now() + delay * 1_000,
      receiveCount: 0,
      deleted: false,
    };
    queue.messages.push(message);
    return {
      MessageId: message.id,
      MD5OfMessageBody: message.md5OfBody,
      ...(Object.keys(attributes).length > 0
        ? { MD5OfMessageAttributes: md5OfMessageAttributes(attributes) }
        : {}),
    };
  }

  /** Moves each visible message received `maxReceiveCount` times to the queue's DLQ. */
  function moveSpentToDeadLetters(queue: Queue, t: number): void {
    if (!queue.redrive) return;
    const target = queues.get(queue.redrive.deadLetterQueue);
    if (!target) return;
    for (const m of live(queue)) {
      if (m.visibleAt > t || m.receiveCount < queue.redrive.maxReceiveCount) continue;
      m.deleted = true;
      target.messages.push({
        ...m,
        visibleAt: t,
        receiveCount: 0,
        deleted: false,
        firstReceiveAt: undefined,
        receiptHandle: undefined,
      } as StoredMessage);
    }
  }

  async function receiveMessage(body: JsonObject): Promise<JsonObject> {
    const queue = queueOf(body);
    const max = integerIn(body, 'MaxNumberOfMessages', 1, 10) ?? 1;
    const visibility = integerIn(body, 'VisibilityTimeout', 0, 43_200) ?? queue.visibilityTimeout;
    const waitSeconds = integerIn(body, 'WaitTimeSeconds', 0, 20) ?? 0;
    const systemNames = [
      ...stringsField(body, 'AttributeNames'),
      ...stringsField(body, 'MessageSystemAttributeNames'),
    ];
    const attributeNames = stringsField(body, 'MessageAttributeNames');
    const deadline = Date.now() + Math.min(waitSeconds * 1_000, maxWaitMs);
    for (let polls = 0; ; polls++) {
      const t = now();
      moveSpentToDeadLetters(queue, t);
      const ready = live(queue)
        .filter((m) => m.visibleAt <= t)
        .slice(0, max);
      if (ready.length > 0 || Date.now() >= deadline) {
        const messages = ready.map((m) => {
          m.receiveCount += 1;
          m.firstReceiveAt ??= t;
          m.visibleAt = t + visibility * 1_000;
          const handle = randomBytes(48).toString('base64url');
          m.receiptHandle = handle;
          queue.handles.set(handle, m);
          const system: Record<string, string> = {
            SenderId: m.senderId,
            SentTimestamp: String(m.sentAt),
            ApproximateReceiveCount: String(m.receiveCount),
            ApproximateFirstReceiveTimestamp: String(m.firstReceiveAt),
          };
          const wantAll = systemNames.includes('All');
          const attributes = Object.fromEntries(
            systemAttributeNames.filter((n) => wantAll || systemNames.includes(n)).map((n) => [n, system[n]]),
          );
          const messageAttributes = selectAttributes(m.attributes, attributeNames);
          const hasAttributes = Object.keys(messageAttributes).length > 0;
          return {
            MessageId: m.id,
            ReceiptHandle: handle,
            MD5OfBody: m.md5OfBody,
            Body: m.body,
            ...(Object.keys(attributes).length > 0 ? { Attributes: attributes } : {}),
            ...(hasAttributes
              ? {
                  MessageAttributes: messageAttributes,
                  MD5OfMessageAttributes: md5OfMessageAttributes(messageAttributes),
                }
              : {}),
          };
        });
        return messages.length > 0 ? { Messages: messages } : {};
      }
      if (polls === 0) for (const watcher of longPollWatchers.get(queue.name)?.splice(0) ?? []) watcher();
      // A message turns visible on `now`, which may be a clock the test moves: the wait reads
      // the queue again shortly rather than waiting for a send.
      await sleep(20);
    }
  }

  function deleteMessage(body: JsonObject): JsonObject {
    const queue = queueOf(body);
    const { handle, message } = handleOf(queue, body);
    if (message.receiptHandle === handle) message.deleted = true;
    return {};
  }

  function changeMessageVisibility(body: JsonObject): JsonObject {
    const queue = queueOf(body);
    const { handle, message } = handleOf(queue, body);
    const timeout = integerIn(body, 'VisibilityTimeout', 0, 43_200);
    if (timeout === undefined) {
      throw new AwsFault('MissingParameter', 'The request must contain the parameter VisibilityTimeout.');
    }
    if (message.deleted || message.receiptHandle !== handle) {
      throw invalidValue(
        `Value ${handle} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.`,
      );
    }
    const t = now();
    if (!inFlight(message, t)) {
      throw new AwsFault('MessageNotInflight', 'The message referred to is not in flight.', 400, {
        queryCode: 'AWS.SimpleQueueService.MessageNotInflight',
      });
    }
    message.visibleAt = t + timeout * 1_000;
    return {};
  }

  /**
   * A batch of 1-10 entries, each answered on its own (`Successful` / `Failed`), as the SQS
   * batch actions answer: one bad entry does not fail the others.
   */
  function batch(body: JsonObject, one: (entry: JsonObject) => JsonObject): JsonObject {
    const entries = asArray(body.Entries).map(asObject);
    if (entries.length === 0) {
      throw new AwsFault('EmptyBatchRequest', 'There should be at least one entry in the request.', 400, {
        queryCode: 'AWS.SimpleQueueService.EmptyBatchRequest',
      });
    }
    if (entries.length > 10) {
      throw new AwsFault(
        'TooManyEntriesInBatchRequest',
        'Maximum number of entries per request are 10.',
        400,
        {
          queryCode: 'AWS.SimpleQueueService.TooManyEntriesInBatchRequest',
        },
      );
    }
    const successful: JsonObject[] = [];
    const failed: JsonObject[] = [];
    for (const entry of entries) {
      const id = stringField(entry, 'Id') ?? '';
      try {
        one({ ...entry, QueueUrl: body.QueueUrl });
        successful.push({ Id: id });
      } catch (err) {
        const fault = toFault(err);
        failed.push({ Id: id, SenderFault: true, Code: fault.code, Message: fault.message });
      }
    }
    return { Successful: successful, Failed: failed };
  }

  function getQueueAttributes(body: JsonObject): JsonObject {
    const queue = queueOf(body);
    const names = stringsField(body, 'AttributeNames');
    const t = now();
    const messages = live(queue);
    const values: Record<(typeof queueAttributeNames)[number], string> = {
      QueueArn: queue.arn,
      ApproximateNumberOfMessages: String(messages.filter((m) => m.visibleAt <= t).length),
      ApproximateNumberOfMessagesNotVisible: String(messages.filter((m) => inFlight(m, t)).length),
      ApproximateNumberOfMessagesDelayed: String(
        messages.filter((m) => m.receiveCount === 0 && m.visibleAt > t).length,
      ),
      VisibilityTimeout: String(queue.visibilityTimeout),
      DelaySeconds: String(queue.delaySeconds),
      CreatedTimestamp: String(Math.floor(queue.createdAt / 1_000)),
      LastModifiedTimestamp: String(Math.floor(queue.createdAt / 1_000)),
      MessageRetentionPeriod: '345600',
      ReceiveMessageWaitTimeSeconds: '0',
      MaximumMessageSize: '262144',
    };
    const attributes: Record<string, string> = {};
    for (const name of names) {
      if (name === 'All') {
        Object.assign(attributes, values);
        continue;
      }
      if (!(queueAttributeNames as readonly string[]).includes(name)) {
        throw new AwsFault('InvalidAttributeName', `Unknown Attribute ${name}.`);
      }
      attributes[name] = values[name as (typeof queueAttributeNames)[number]];
    }
    return Object.keys(attributes).length > 0 ? { Attributes: attributes } : {};
  }

  function purgeQueue(body: JsonObject): JsonObject {
    const queue = queueOf(body);
    const t = now();
    // "Only one PurgeQueue operation on each queue is allowed every 60 seconds."
    if (queue.lastPurgeAt !== undefined && t - queue.lastPurgeAt < 60_000) {
      throw new AwsFault(
        'PurgeQueueInProgress',
        `Only one PurgeQueue operation on ${queue.name} is allowed every 60 seconds.`,
        403,
        {
          queryCode: 'AWS.SimpleQueueService.PurgeQueueInProgress',
        },
      );
    }
    queue.lastPurgeAt = t;
    for (const m of queue.messages) m.deleted = true;
    return {};
  }

  function queueAttribute(attributes: JsonObject, key: string): number | undefined {
    const value = stringField(attributes, key);
    if (value === undefined) return undefined;
    const n = Number(value);
    if (!Number.isInteger(n))
      throw new AwsFault('InvalidAttributeValue', `Invalid value for the parameter ${key}.`);
    return n;
  }

  async function serve(operation: string, body: JsonObject, caller: string): Promise<JsonObject> {
    const refusal = refusals.find((r) => r.operation === operation && r.caller === caller);
    if (refusal) throw new AwsFault(refusal.code, refusal.message, refusal.status);
    switch (operation) {
      case 'CreateQueue': {
        const name = stringField(body, 'QueueName');
        if (!name)
          throw new AwsFault('MissingParameter', 'The request must contain the parameter QueueName.');
        const attributes = asObject(body.Attributes);
        const visibilityTimeoutSeconds = queueAttribute(attributes, 'VisibilityTimeout');
        const delaySeconds = queueAttribute(attributes, 'DelaySeconds');
        const queue = createQueue({
          name,
          ...(visibilityTimeoutSeconds !== undefined ? { visibilityTimeoutSeconds } : {}),
          ...(delaySeconds !== undefined ? { delaySeconds } : {}),
        });
        return { QueueUrl: queue.url };
      }
      case 'GetQueueUrl': {
        const queue = queues.get(stringField(body, 'QueueName') ?? '');
        if (!queue) throw nonExistentQueue();
        return { QueueUrl: queue.url };
      }
      case 'SendMessage':
        return sendMessage(body, caller);
      case 'ReceiveMessage':
        return receiveMessage(body);
      case 'DeleteMessage':
        return deleteMessage(body);
      case 'ChangeMessageVisibility':
        return changeMessageVisibility(body);
      case 'ChangeMessageVisibilityBatch':
        return batch(body, changeMessageVisibility);
      case 'DeleteMessageBatch':
        return batch(body, deleteMessage);
      case 'GetQueueAttributes':
        return getQueueAttributes(body);
      case 'PurgeQueue':
        return purgeQueue(body);
      default:
        throw new AwsFault('UnsupportedOperation', `The stand-in does not serve ${operation}.`, 400, {
          queryCode: 'AWS.SimpleQueueService.UnsupportedOperation',
        });
    }
  }

  const { server, endpoint } = await listenOnLoopback(
    awsJsonHandler({
      service: 'sqs',
      protocol,
      targetPrefix,
      recorder,
      authorize(operation, body) {
        const named =
          operation === 'CreateQueue' || operation === 'GetQueueUrl'
            ? stringField(body, 'QueueName')
            : queueNamedBy(stringField(body, 'QueueUrl'));
        // A batch action is authorized as its single counterpart: IAM has no sqs:*Batch actions
        // (docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-api-permissions-reference.html).
        const action = operation.replace(/Batch$/, '') || 'Unrecognized';
        return { action: `sqs:${action}`, resources: [named ? queueArn(named) : '*'] };
      },
      serve,
    }),
  );
  origin = endpoint;
  for (const q of options.queues ?? []) createQueue(q);

  return {
    endpoint,
    createQueue: (queue) => createQueue(queue).url,
    queueUrl,
    queueArn,
    messages: (name) => {
      const queue = queues.get(nameOf(name));
      if (!queue) throw new Error(`the SQS stand-in has no queue ${name}`);
      return live(queue).map((m) => ({
        messageId: m.id,
        body: m.body,
        messageAttributes: m.attributes,
        receiveCount: m.receiveCount,
        inFlight: inFlight(m, now()),
      }));
    },
    refuse: (operation, caller, fault) => {
      const at = refusals.findIndex((r) => r.operation === operation && r.caller === caller);
      if (at >= 0) refusals.splice(at, 1);
      if (fault) refusals.push({ operation, caller, ...fault });
    },
    nextLongPoll: (name) =>
      new Promise<void>((resolve) => {
        const queueName = nameOf(name);
        longPollWatchers.set(queueName, [...(longPollWatchers.get(queueName) ?? []), resolve]);
      }),
    close: () => closeServer(server),
  };
}
