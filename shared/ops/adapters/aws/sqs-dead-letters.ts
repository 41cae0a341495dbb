import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { type ConsumerName, topology } from '../../../topology';
import type { ConsumerRedelivery, DeadLetter, DeadLetterStore } from '../../ops-ports';

/**
 * The message attribute the consumer retries put on an on-failure record they gave up on
 * (`shared/consumers/retries.ts`): why, for the dead list.
 */
export const retryGaveUpAttribute = 'RETRY_GAVE_UP';

/**
 * The kind of queue the consumers' dead letters are, as `DeadLetterQueueRef.rule` names it:
 * Lambda's on-failure records of every consumer whose retries gave up (a person is needed).
 */
export const onFailureRule = 'on-failure';

/**
 * A queue that holds undeliverable events: a rule target's DLQ (one consumer's), or the
 * consumers' dead letters (every consumer's: each message names its function).
 */
export interface DeadLetterQueueRef {
  readonly url: string;
  /** Whose events the queue holds; absent: each message's on-failure record says (its function). */
  readonly consumer?: ConsumerName;
  /** The rule whose target DLQ this is, or `on-failure`. */
  readonly rule: string;
}

export interface SqsDeadLettersOptions {
  /** How long a listed message stays hidden while the list is read; released at once after. @default 2 */
  readonly listVisibilitySeconds?: number;
  /** How long a message being redriven stays hidden: longer than one invoke. @default 30 */
  readonly redriveVisibilitySeconds?: number;
  /** Receives per queue per list or redrive, 10 messages each. @default 100 */
  readonly maxReceivesPerQueue?: number;
  /** Each consumer's function name: an on-failure record names the function it failed in. */
  readonly consumerFunctions?: Readonly<Record<ConsumerName, string>>;
}

interface Received {
  readonly queue: DeadLetterQueueRef;
  readonly message: Message;
  readonly letter: DeadLetter | undefined;
}

/**
 * The bus's dead letters on AWS: every rule target DLQ and the consumers' dead letters (the
 * on-failure records the consumer retries gave up on).
 *
 * SQS cannot be read without receiving, so a list receives each queue's messages under a short
 * visibility timeout and releases them right after. A redrive receives until it finds the
 * event's messages, re-invokes the consumer with each stored event (asynchronously, as
 * EventBridge does), and deletes a message only after Lambda accepted that invoke: a failed
 * invoke leaves the message where it was.
 *
 * A rule DLQ message is the event itself, with the error in message attributes; an on-failure
 * message is Lambda's invocation record, the event in `requestPayload`. Both are read here
 * (docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html,
 * docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html).
 */
export class SqsDeadLetters implements DeadLetterStore {
  private readonly listVisibility: number;
  private readonly redriveVisibility: number;
  private readonly maxReceives: number;
  private readonly consumerOf: (functionArn: string) => ConsumerName | undefined;

  constructor(
    private readonly sqs: SQSClient,
    private readonly queues: readonly DeadLetterQueueRef[],
    private readonly redelivery: ConsumerRedelivery,
    options: SqsDeadLettersOptions = {},
  ) {
    this.listVisibility = options.listVisibilitySeconds ?? 2;
    this.redriveVisibility = options.redriveVisibilitySeconds ?? 30;
    this.maxReceives = options.maxReceivesPerQueue ?? 100;
    this.consumerOf = consumerOfFunction(options.consumerFunctions ?? {});
  }

  async count(): Promise<number> {
    const counts = await Promise.all(
      this.queues.map(async (q) => {
        const out = await this.sqs.send(
          new GetQueueAttributesCommand({
            QueueUrl: q.url,
            AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
          }),
        );
        const a = out.Attributes ?? {};
        return (
          Number(a.ApproximateNumberOfMessages ?? 0) + Number(a.ApproximateNumberOfMessagesNotVisible ?? 0)
        );
      }),
    );
    return counts.reduce((n, c) => n + c, 0);
  }

  async list(limit: number): Promise<readonly DeadLetter[]> {
    // Every queue at once: each read ends with a one-second long poll that found nothing.
    const perQueue = await Promise.all(
      this.queues.map(async (queue) => {
        const received = await this.receiveAll(queue, this.listVisibility, limit);
        await this.release(queue, received);
        return received.flatMap((r) => (r.letter ? [r.letter] : []));
      }),
    );
    return perQueue.flat().slice(0, limit);
  }

  async redrive(
    target: { readonly id: string; readonly consumer?: ConsumerName } | 'all',
    stopBy = Number.POSITIVE_INFINITY,
    deadBefore = Number.POSITIVE_INFINITY,
  ): Promise<number> {
    let redriven = 0;
    for (const queue of this.queues) {
      if (target !== 'all' && target.consumer && queue.consumer && queue.consumer !== target.consumer)
        continue;
      if (Date.now() >= stopBy) break;
      const received = await this.receiveAll(queue, this.redriveVisibility, Number.POSITIVE_INFINITY);
      const matching = received.filter(
        (r) =>
          r.letter &&
          // A message that arrived since (a redriven event that failed again) is another request's.
          Date.parse(r.letter.deadAt) < deadBefore &&
          (target === 'all' ||
            (r.letter.id === target.id && (!target.consumer || r.letter.consumer === target.consumer))),
      );
      await this.release(
        queue,
        received.filter((r) => !matching.includes(r)),
      );
      let done = 0;
      try {
        for (const r of matching) {
          if (Date.now() >= stopBy) break;
          const letter = r.letter as DeadLetter;
          await this.redelivery.redeliver(letter.consumer, letter.event);
          await this.sqs.send(
            new DeleteMessageCommand({ QueueUrl: queue.url, ReceiptHandle: r.message.ReceiptHandle }),
          );
          done++;
          redriven++;
        }
      } finally {
        // What is not redriven (the invoke failed, or the time ran out) is visible again at once.
        await this.release(queue, matching.slice(done)).catch(() => undefined);
      }
    }
    return redriven;
  }

  /**
   * Receives up to `max` messages of `queue`, each hidden for `visibility` seconds: one
   * one-second long poll (it asks every SQS server, so a small queue is read whole), then short
   * polls until a receive brings nothing new.
   */
  private async receiveAll(queue: DeadLetterQueueRef, visibility: number, max: number): Promise<Received[]> {
    const out: Received[] = [];
    const seen = new Set<string>();
    for (let i = 0; i < this.maxReceives && out.length < max; i++) {
      const page = await this.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queue.url,
          MaxNumberOfMessages: 10,
          VisibilityTimeout: visibility,
          WaitTimeSeconds: i === 0 ? 1 : 0,
          MessageSystemAttributeNames: ['SentTimestamp', 'ApproximateReceiveCount'],
          MessageAttributeNames: ['All'],
        }),
      );
      const messages = (page.Messages ?? []).filter((m) => m.MessageId && !seen.has(m.MessageId));
      if (messages.length === 0) break;
      for (const message of messages) {
        seen.add(message.MessageId as string);
        out.push({ queue, message, letter: toDeadLetter(queue, message, this.consumerOf) });
      }
    }
    return out;
  }

  /**
   * Makes received messages visible again at once. A message this cannot release (its receipt
   * handle went stale) becomes visible by itself when its short visibility timeout ends.
   */
  private async release(queue: DeadLetterQueueRef, received: readonly Received[]): Promise<void> {
    for (let i = 0; i < received.length; i += 10) {
      const batch = received.slice(i, i + 10);
      await this.sqs.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: queue.url,
          Entries: batch.map((r, n) => ({
            Id: String(n),
            ReceiptHandle: r.message.ReceiptHandle,
            VisibilityTimeout: 0,
          })),
        }),
      );
    }
  }
}

/**
 * Which consumer a function ARN (or name) is, from each consumer's function name: an on-failure
 * record's `requestContext.functionArn` may carry a version qualifier (`:$LATEST`).
 */
export function consumerOfFunction(
  functions: Readonly<Partial<Record<ConsumerName, string>>>,
): (functionArn: string) => ConsumerName | undefined {
  const byName = new Map(
    Object.entries(functions).map(([consumer, name]) => [name, consumer as ConsumerName]),
  );
  return (functionArn) => {
    const parts = functionArn.split(':');
    const at = parts.indexOf('function');
    const name = at >= 0 ? parts[at + 1] : parts[0];
    return name === undefined ? undefined : byName.get(name);
  };
}

/**
 * Reads one DLQ or on-failure message; undefined when its body is no event we know, or when it
 * is in the consumers' shared queue and names no consumer's function.
 */
export function toDeadLetter(
  queue: DeadLetterQueueRef,
  message: Message,
  consumerOf: (functionArn: string) => ConsumerName | undefined = () => undefined,
): DeadLetter | undefined {
  let body: unknown;
  try {
    body = JSON.parse(message.Body ?? '');
  } catch {
    return undefined;
  }
  if (typeof body !== 'object' || body === null) return undefined;
  const sentAt = Number(message.Attributes?.SentTimestamp);
  const deadAt = Number.isFinite(sentAt) ? new Date(sentAt).toISOString() : new Date(0).toISOString();
  const record = body as {
    requestPayload?: unknown;
    requestContext?: { condition?: string; approximateInvokeCount?: number; functionArn?: string };
    responsePayload?: { errorMessage?: string; errorType?: string } | null;
    timestamp?: string;
  };
  if (record.requestContext && 'requestPayload' in record) {
    const event = record.requestPayload as { id?: unknown } | null;
    if (typeof event?.id !== 'string') return undefined;
    const consumer = queue.consumer ?? consumerOf(record.requestContext.functionArn ?? '');
    if (!consumer) return undefined;
    const response = record.responsePayload;
    const gaveUp = message.MessageAttributes?.[retryGaveUpAttribute]?.StringValue;
    return {
      id: event.id,
      consumer,
      rule: queue.rule,
      attempts: record.requestContext.approximateInvokeCount ?? 0,
      error: [
        gaveUp,
        response?.errorMessage
          ? `${response.errorType ?? 'Error'}: ${response.errorMessage}`
          : (record.requestContext.condition ?? 'unknown'),
      ]
        .filter(Boolean)
        .join('; last error '),
      deadAt: record.timestamp ?? deadAt,
      event,
    };
  }
  const event = body as { id?: unknown };
  if (typeof event.id !== 'string' || !queue.consumer) return undefined;
  const attribute = (name: string) => message.MessageAttributes?.[name]?.StringValue;
  return {
    id: event.id,
    consumer: queue.consumer,
    rule: ruleOf(attribute('RULE_ARN')) ?? queue.rule,
    attempts: Number(attribute('RETRY_ATTEMPTS') ?? 0),
    error: [attribute('ERROR_CODE'), attribute('ERROR_MESSAGE')].filter(Boolean).join(': ') || 'unknown',
    deadAt,
    event,
  };
}

/**
 * The topology rule a rule DLQ message names in its RULE_ARN attribute
 * (docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html): a consumer's queue is
 * shared by its rules. The deployed rule's name ends with the topology's (`<stack>-<rule>`).
 */
function ruleOf(ruleArn: string | undefined): string | undefined {
  const deployed = ruleArn?.split('/').at(-1);
  if (!deployed) return undefined;
  return topology.rules
    .map((r) => r.name)
    .filter((name) => deployed === name || deployed.endsWith(`-${name}`))
    .sort((a, b) => b.length - a.length)[0];
}
