import type { EventBridgeEvent, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { isInboxError } from '../inbox/errors';
import type { ConsumerPolicy } from './define-consumer';
import { queueFailureDelaySeconds } from './queue-timing';

/**
 * A consumer on AWS reads its own queue: rule -> SQS queue -> event source mapping -> function,
 * the buffered fan-out AWS documents (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html).
 * The queue is the buffer and the backpressure (the mapping runs at most the policy's
 * `maxConcurrency` invocations), and it is how a day of retries holds with nobody involved:
 *
 * - each message is handled on its own and reported on its own (`ReportBatchItemFailures`): a
 *   message that failed goes back to the queue and only it;
 * - before it goes back, its visibility is set to a backoff ({@link queueFailureDelaySeconds}):
 *   at least the inbox record's own (an early attempt would only be refused), growing with the
 *   message's receives up to {@link queueBackoffMaxSeconds}; the queue hands it over again then;
 * - the inbox decides when to stop: a permanent failure spends `maxPermanentAttempts`, a
 *   transient one runs until the consumer's maximum age since its first attempt, and either way
 *   the record goes DEAD (alarmed, listed, redrivable) and the message is acknowledged;
 * - what never reaches the inbox (a function that crashes or times out on every receive, the
 *   inbox itself unreachable all day) goes to the queue's DLQ after {@link queueMaxReceiveCount}
 *   receives, which span more than the retry budget either way; the DLQ is alarmed and an ops
 *   redrive sends its messages back to the queue.
 */

export {
  queueBackoffMaxSeconds,
  queueFailureDelaySeconds,
  queueMaxReceiveCount,
  queueSecondsToDeadLetter,
  visibilityTimeoutPerFunctionTimeout,
} from './queue-timing';

/**
 * The receipt of a message as SQS knows it: proof that a record came from the queue, and its
 * visibility. `confirm` answers false when SQS does not know the receipt handle (a record that
 * did not come from a receive of this queue, or one received again since).
 */
export interface QueueReceipts {
  confirm(receiptHandle: string): Promise<boolean>;
  hide(receiptHandle: string, seconds: number): Promise<void>;
}

/**
 * The consumer's body as its queue hands it events: one EventBridge event at a time, with the
 * invocation's context (`createConsumer`'s function fits). Declared here rather than imported
 * from `consumer.ts`, which wires this module: an import each way would be a cycle.
 */
export type QueuedConsumer<C> = (event: EventBridgeEvent<string, unknown>, context: C) => Promise<unknown>;

/** What the batch handler logs; a consumer's logger fits. */
export interface QueueConsumerLogger {
  warn(message: string, ...extra: unknown[]): void;
  error(message: string, ...extra: unknown[]): void;
}

export interface QueueConsumerDeps<C> {
  /** The consumer's body: one EventBridge event at a time (`createConsumer`). */
  readonly consumer: QueuedConsumer<C>;
  /** The consumer's queue: only its records are taken. */
  readonly queueArn: string;
  readonly receipts: QueueReceipts;
  readonly policy: Pick<ConsumerPolicy, 'backoff'>;
  readonly logger: QueueConsumerLogger;
  readonly random?: () => number;
}

/**
 * A consumer's SQS batch handler. Each record, on its own and all at once:
 * 1. must come from the consumer's own queue and carry a receipt handle SQS recognises (one
 *    ChangeMessageVisibility call, to the visibility it already has): nothing but the event
 *    source mapping can hand a consumer an event, so an invoke by anyone else (a forged
 *    `content.approved` sent straight to the function) is refused without acting. Lambda's
 *    resource policies cannot deny an identity policy of the same account; this can;
 * 2. its body, the event EventBridge sent to the queue, goes to the consumer;
 * 3. a failure hides the message for its backoff and is reported, so only it comes back.
 *
 * Hand-written rather than Powertools' batch utility: the backoff per failed message, and the
 * receipt check before any effect, are this pipeline's, and the utility runs neither.
 */
export function createQueueConsumer<C>(deps: QueueConsumerDeps<C>) {
  const { consumer, receipts, logger } = deps;

  async function handle(record: SQSRecord, context: C): Promise<void> {
    if (record.eventSourceARN !== deps.queueArn) {
      logger.error('a record not from this consumer’s queue: not acted on', {
        messageId: record.messageId,
        eventSourceARN: record.eventSourceARN,
      });
      throw new Error(`record ${record.messageId} is not from ${deps.queueArn}`);
    }
    if (!(await receipts.confirm(record.receiptHandle))) {
      logger.error('a record SQS does not recognise (not handed over by the queue): not acted on', {
        messageId: record.messageId,
      });
      throw new Error(`record ${record.messageId} has a receipt SQS does not recognise`);
    }
    let event: unknown;
    try {
      event = JSON.parse(record.body);
    } catch {
      // Not JSON: the consumer records it as poison (DEAD with the reason), like any bad event.
      event = record.body;
    }
    try {
      await consumer(event as EventBridgeEvent<string, unknown>, context);
    } catch (err) {
      const retryAfterMs = isInboxError(err, 'IN_PROGRESS', 'BACKOFF')
        ? Number((err.details as { retryAfterMs?: unknown }).retryAfterMs)
        : undefined;
      const receives = Number(record.attributes?.ApproximateReceiveCount ?? 1);
      const delay = queueFailureDelaySeconds(
        deps.policy,
        receives,
        Number.isFinite(retryAfterMs) ? retryAfterMs : undefined,
        deps.random,
      );
      // A hide that fails leaves the message to come back after the queue's own visibility timeout.
      await receipts.hide(record.receiptHandle, delay).catch((hideError: unknown) =>
        logger.warn('could not set a failed message’s backoff; it comes back after the queue’s timeout', {
          messageId: record.messageId,
          error: hideError,
        }),
      );
      throw err;
    }
  }

  return async (event: SQSEvent, context: C): Promise<SQSBatchResponse> => {
    // Anything but its mapping's batch (an event sent straight to the function) is refused whole.
    if (!Array.isArray((event as Partial<SQSEvent> | null)?.Records)) {
      logger.error('an invocation that is no batch of this consumer’s queue: not acted on');
      throw new Error('not a batch of the consumer’s queue: refused');
    }
    const outcomes = await Promise.allSettled(event.Records.map((record) => handle(record, context)));
    return {
      batchItemFailures: event.Records.flatMap((record, i) =>
        outcomes[i]?.status === 'rejected' ? [{ itemIdentifier: record.messageId }] : [],
      ),
    };
  };
}
