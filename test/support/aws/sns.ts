import { randomUUID } from 'node:crypto';
import type { CallRecorder } from './calls';
import { callerOf } from './calls';
import { closeServer, type LocalEndpoint, listenOnLoopback, readRawBody, requestUrl } from './http';
import { AwsFault, sendQueryFault, sendQueryResult, toFault } from './protocol';
import { xml } from './xml';

const xmlns = 'http://sns.amazonaws.com/doc/2010-03-31/';

/** One message attribute as Publish sent it (`BinaryValue` still base64, as on the wire). */
export interface SnsMessageAttribute {
  readonly DataType: string;
  readonly StringValue?: string;
  readonly BinaryValue?: string;
}

/** A message the stand-in accepted, for tests to read. */
export interface PublishedMessage {
  readonly messageId: string;
  readonly topicArn: string;
  readonly message: string;
  readonly subject?: string;
  readonly messageStructure?: string;
  readonly messageAttributes: Readonly<Record<string, SnsMessageAttribute>>;
  readonly messageGroupId?: string;
  readonly messageDeduplicationId?: string;
  readonly caller: string;
  readonly at: Date;
}

/** How the SNS stand-in is set up. */
export interface SnsStandinOptions {
  readonly recorder: CallRecorder;
  /** Topic ARNs that exist; Publish to any other answers NotFound. */
  readonly topics?: readonly string[];
}

/** A running SNS stand-in (awsQuery, `Publish` only). */
export interface SnsStandin extends LocalEndpoint {
  /** Every accepted message, in order (a FIFO duplicate within 5 minutes is not added again). */
  readonly published: readonly PublishedMessage[];
  addTopic(topicArn: string): void;
  /**
   * Answers the next `count` Publish calls with `fault` instead (an outage: `ServiceUnavailable`
   * 503 passes, `AuthorizationError` 403 does not), after recording them; 0 ends it.
   */
  failNext(
    count: number,
    fault?: { readonly code: string; readonly message: string; readonly status: number },
  ): void;
  /** Publish calls answered with a fault so far. */
  readonly failed: number;
}

// "Constraints: Subjects must be UTF-8 text with no line breaks or control characters, and less
// than 100 characters long." (https://docs.aws.amazon.com/sns/latest/api/API_Publish.html, the
// same text as the `Subject` TSDoc of the installed @aws-sdk/client-sns; older revisions said
// "must be ASCII text that begins with a letter, number, or punctuation mark"). This rule is
// written here from the documentation, independently of shared/effects/sns-subject.ts, so the
// stand-in checks that sanitizer instead of agreeing with it by construction.
// Where the text is loose this takes the strict reading: "characters" are UTF-16 code units (a
// JVM service's String.length()), line breaks include U+2028/U+2029, and an empty subject is
// refused ("Invalid parameter: Subject", reported against AWS in getmoto/moto#4679 and
// localstack/localstack#597).
const subjectMaxLength = 99;
const controlOrLineBreak = /[\p{Cc}\u2028\u2029]/u;

function checkSubject(subject: string): void {
  if (subject.length === 0 || subject.length > subjectMaxLength || controlOrLineBreak.test(subject)) {
    throw new AwsFault('InvalidParameter', 'Invalid parameter: Subject');
  }
}

// Publish: "messages must be UTF-8 encoded strings and at most 256 KB in size (262,144 bytes,
// not 262,144 characters)"; the limit counts the message attributes too.
const maxMessageBytes = 262_144;
const fifoDeduplicationMs = 5 * 60_000;

/** `MessageAttributes.entry.N.{Name,Value.DataType,Value.StringValue,Value.BinaryValue}`. */
function parseAttributes(form: URLSearchParams): Record<string, SnsMessageAttribute> {
  const attributes: Record<string, SnsMessageAttribute> = {};
  for (let n = 1; form.has(`MessageAttributes.entry.${n}.Name`); n++) {
    const prefix = `MessageAttributes.entry.${n}`;
    const name = form.get(`${prefix}.Name`) ?? '';
    const dataType = form.get(`${prefix}.Value.DataType`) ?? '';
    const stringValue = form.get(`${prefix}.Value.StringValue`) ?? undefined;
    const binaryValue = form.get(`${prefix}.Value.BinaryValue`) ?? undefined;
    if (!dataType) {
      throw new AwsFault(
        'ParameterValueInvalid',
        `The message attribute '${name}' must contain a data type.`,
      );
    }
    const binary = dataType.startsWith('Binary');
    if (binary ? !binaryValue : !stringValue) {
      // SNS refuses empty attribute values, with this code (InvalidParameterValueException).
      throw new AwsFault(
        'ParameterValueInvalid',
        `The message attribute '${name}' must contain non-empty message attribute value for message attribute type '${dataType}'.`,
      );
    }
    attributes[name] = {
      DataType: dataType,
      ...(stringValue !== undefined ? { StringValue: stringValue } : {}),
      ...(binaryValue !== undefined ? { BinaryValue: binaryValue } : {}),
    };
  }
  return attributes;
}

function attributesBytes(attributes: Readonly<Record<string, SnsMessageAttribute>>): number {
  let n = 0;
  for (const [name, a] of Object.entries(attributes)) {
    n += Buffer.byteLength(name) + Buffer.byteLength(a.DataType);
    n += a.StringValue !== undefined ? Buffer.byteLength(a.StringValue) : 0;
    n += a.BinaryValue !== undefined ? Buffer.from(a.BinaryValue, 'base64').length : 0;
  }
  return n;
}

/**
 * Starts an SNS stand-in on 127.0.0.1: form-encoded awsQuery POSTs, `Publish` to registered
 * topics, answered with `PublishResponse/PublishResult/MessageId` or an awsQuery
 * `ErrorResponse`. Each request is recorded as `sns:<Action>` on its TopicArn.
 */
export async function startSnsStandin(options: SnsStandinOptions): Promise<SnsStandin> {
  const topics = new Set(options.topics ?? []);
  const published: PublishedMessage[] = [];
  // FIFO topics: deduplication id -> message id and when it was first accepted.
  const deduplication = new Map<string, { messageId: string; at: number }>();
  let failing = {
    count: 0,
    fault: { code: 'ServiceUnavailable', message: 'Service unavailable', status: 503 },
  };
  let failed = 0;

  function publish(form: URLSearchParams, caller: string): string {
    const topicArn = form.get('TopicArn') ?? '';
    if (!topicArn) {
      throw new AwsFault(
        'InvalidParameter',
        'Invalid parameter: TopicArn or TargetArn Reason: no value for required parameter',
      );
    }
    if (!topics.has(topicArn)) throw new AwsFault('NotFound', 'Topic does not exist', 404);
    const message = form.get('Message') ?? '';
    if (message === '') throw new AwsFault('InvalidParameter', 'Invalid parameter: Empty message');
    const subject = form.get('Subject') ?? undefined;
    if (subject !== undefined) checkSubject(subject);
    const messageAttributes = parseAttributes(form);
    if (Buffer.byteLength(message) + attributesBytes(messageAttributes) > maxMessageBytes) {
      throw new AwsFault('InvalidParameter', 'Invalid parameter: Message too long');
    }
    const messageGroupId = form.get('MessageGroupId') ?? undefined;
    const messageDeduplicationId = form.get('MessageDeduplicationId') ?? undefined;
    const fifo = topicArn.endsWith('.fifo');
    if (fifo && !messageGroupId) {
      throw new AwsFault(
        'InvalidParameter',
        'Invalid parameter: The MessageGroupId parameter is required for FIFO topics',
      );
    }
    if (fifo && !messageDeduplicationId) {
      // The stand-in's FIFO topics have no content-based deduplication.
      throw new AwsFault(
        'InvalidParameter',
        'Invalid parameter: The topic should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly',
      );
    }
    const now = Date.now();
    const messageId = randomUUID();
    if (fifo && messageDeduplicationId) {
      const key = `${topicArn}\n${messageDeduplicationId}`;
      const seen = deduplication.get(key);
      // A duplicate is accepted and answered with the first message's id, but not delivered again.
      if (seen && now - seen.at < fifoDeduplicationMs) return seen.messageId;
      deduplication.set(key, { messageId, at: now });
    }
    const messageStructure = form.get('MessageStructure') ?? undefined;
    published.push({
      messageId,
      topicArn,
      message,
      messageAttributes,
      caller,
      at: new Date(now),
      ...(subject !== undefined ? { subject } : {}),
      ...(messageStructure !== undefined ? { messageStructure } : {}),
      ...(messageGroupId !== undefined ? { messageGroupId } : {}),
      ...(messageDeduplicationId !== undefined ? { messageDeduplicationId } : {}),
    });
    return messageId;
  }

  const { server, endpoint } = await listenOnLoopback(async (req, res) => {
    const url = requestUrl(req);
    const raw = await readRawBody(req);
    const form = new URLSearchParams(req.method === 'POST' ? raw.toString('utf8') : url.search);
    const action = form.get('Action') ?? '';
    const caller = callerOf(req.headers, url);
    options.recorder.record(caller, 'sns', [
      {
        action: `sns:${action || 'Unrecognized'}`,
        resources: [form.get('TopicArn') || '*'],
        operation: action,
      },
    ]);
    try {
      if (action !== 'Publish') {
        throw new AwsFault(
          'InvalidAction',
          `The action ${action || '(none)'} is not valid for this web service.`,
        );
      }
      if (failing.count > 0) {
        failing.count--;
        failed++;
        throw new AwsFault(failing.fault.code, failing.fault.message, failing.fault.status);
      }
      const messageId = publish(form, caller);
      sendQueryResult(res, xmlns, 'Publish', [xml('MessageId', messageId)]);
    } catch (err) {
      sendQueryFault(res, xmlns, toFault(err));
    }
  });

  return {
    endpoint,
    published,
    addTopic: (topicArn) => {
      topics.add(topicArn);
    },
    failNext: (count, fault) => {
      failing = { count, fault: fault ?? failing.fault };
    },
    get failed() {
      return failed;
    },
    close: () => closeServer(server),
  };
}
