import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { allEventTypes, ruleNameOf } from '../../../events/event-types';
import type { ConsumerName } from '../../../topology';
import type { ConsumerRedelivery, DeadLetter, DeadLetterStore } from '../../ops-ports';

/**
 * The kind of queue a consumer's own queue's DLQ is, as `DeadLetterQueueRef.rule` names it: the
 * messages its queue received as often as its redrive policy allows without the consumer
 * handling them (a function that fails before the inbox decides, every time).
 */
export const consumerQueueRule = 'consumer-queue';

/**
 * A queue that holds undeliverable events for one consumer: a rule target's DLQ (what
 * EventBridge could not send to the consumer's queue), or the consumer's queue's own DLQ.
 */
export interface DeadLetterQueueRef {
  readonly url: string;
  readonly consumer: ConsumerName;
  /** The rule whose target DLQ this is, or {@link consumerQueueRule}. */
  readonly rule: string;
}

export interface SqsDeadLettersOptions {
  /** How long a listed message stays hidden while the list is read; released at once after. @default 2 */
  readonly listVisibilitySeconds?: number;
  /** How long a message being redriven stays hidden: longer than one invoke. @default 30 */
  readonly redriveVisibilitySeconds?: number;
  /** Receives per queue per list or redrive, 10 messages each. @default 100 */
  readonly maxReceivesPerQueue?: number;
}

interface Received {
  readonly queue: DeadLetterQueueRef;
  readonly message: Message;
  readonly letter: DeadLetter | undefined;
}

/**
 * The bus's dead letters on AWS: every rule target DLQ and each consumer queue's DLQ.
 *
 * SQS cannot be read without receiving, so a list receives each queue's messages under a short
 * visibility timeout and releases them right after. A redrive receives until it finds the
 * event's messages, sends each stored event to its consumer's queue (as its rule does), and
 * deletes a message only after SQS accepted that send: a failed send leaves the message where
 * it was.
 *
 * Both kinds hold the event itself as the body: a rule DLQ message with the error in message
 * attributes (docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html), a queue's DLQ
 * message as its queue received it, moved by its redrive policy
 * (docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html).
 */
export class SqsDeadLetters implements DeadLetterStore {
  private readonly listVisibility: number;
  private readonly redriveVisibility: number;
  private readonly maxReceives: number;

  constructor(
    private readonly sqs: SQSClient,
    private readonly queues: readonly DeadLetterQueueRef[],
    private readonly redelivery: ConsumerRedelivery,
    options: SqsDeadLettersOptions = {},
  ) {
    this.listVisibility = options.listVisibilitySeconds ?? 2;
    this.redriveVisibility = options.redriveVisibilitySeconds ?? 30;
    this.maxReceives = options.maxReceivesPerQueue ?? 100;
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
      if (target !== 'all' && target.consumer && queue.consumer !== target.consumer) continue;
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
        out.push({ queue, message, letter: toDeadLetter(queue, message) });
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
 * Reads one dead letter; undefined when its body is no event. A rule DLQ message says why in its
 * attributes; a queue's DLQ message says nothing (SentTimestamp is its first enqueue).
 */
export function toDeadLetter(queue: DeadLetterQueueRef, message: Message): DeadLetter | undefined {
  let event: { id?: unknown } | null;
  try {
    event = JSON.parse(message.Body ?? '');
  } catch {
    return undefined;
  }
  if (typeof event !== 'object' || event === null || typeof event.id !== 'string') return undefined;
  const sentAt = Number(message.Attributes?.SentTimestamp);
  const deadAt = Number.isFinite(sentAt) ? new Date(sentAt).toISOString() : new Date(0).toISOString();
  const attribute = (name: string) => message.MessageAttributes?.[name]?.StringValue;
  if (queue.rule === consumerQueueRule) {
    return {
      id: event.id,
      consumer: queue.consumer,
      rule: queue.rule,
      attempts: 0,
      error:
        'received as often as its queue’s redrive policy allows without being handled (the function failed before its inbox decided)',
      deadAt,
      event,
    };
  }
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
 * The pipeline rule a rule DLQ message names in its RULE_ARN attribute
 * (docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html): a consumer's queue is
 * shared by its rules. The deployed rule's name ends with the topology's (`<stack>-<rule>`).
 */
function ruleOf(ruleArn: string | undefined): string | undefined {
  const deployed = ruleArn?.split('/').at(-1);
  if (!deployed) return undefined;
  // Rule names follow from event types alone (one rule per type), whatever a topology's consumers.
  return allEventTypes
    .map(ruleNameOf)
    .filter((name) => deployed === name || deployed.endsWith(`-${name}`))
    .sort((a, b) => b.length - a.length)[0];
}
