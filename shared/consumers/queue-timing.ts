/**
 * The timing of a consumer's queue on AWS: how long a failed message waits hidden, how many
 * receives the queue allows before its DLQ, and how long that can take at the longest. Both the
 * batch handler (`queue-delivery.ts`) and the policy's checks at synth (`define-consumer.ts`)
 * read it, so it imports neither.
 */

/** The figures of a consumer's policy the queue's timing follows (`ConsumerPolicy` fits). */
export interface QueueTimingPolicy {
  readonly maxEventAgeSeconds: number;
  readonly backoff: { readonly baseMs: number; readonly maxMs: number };
}

/** The longest a failed message waits hidden in its queue before its next receive: 10 minutes. */
export const queueBackoffMaxSeconds = 600;

/**
 * A consumer function's timeout on AWS, unless its construct is given another: a consumer that
 * reads the database may wait on an auto-paused Aurora resuming.
 */
export const consumerFunctionTimeoutSeconds = 60;

/**
 * Lambda's advice for an SQS source: the queue's visibility timeout at least six times the
 * function's timeout, so a message is not handed over again while a throttled batch waits
 * (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html).
 */
export const visibilityTimeoutPerFunctionTimeout = 6;

/** The most visibility SQS gives a message: 12 hours (ChangeMessageVisibility). */
const maxVisibilitySeconds = 43_200;

/** The most receives SQS lets a redrive policy allow before the DLQ (`maxReceiveCount`). */
export const sqsMaxReceiveCount = 1_000;

/**
 * How long a message that failed stays hidden before its next receive: the consumer's base
 * backoff doubled per receive, with jitter upwards of it (up to half as much again, so many
 * messages that failed together do not come back together), capped at
 * {@link queueBackoffMaxSeconds}; never less than the longest backoff the inbox may have set the
 * record (its full-jitter ceiling for that attempt, `shared/db/retry.ts`), nor than
 * `retryAfterMs`, when the inbox said when it takes the event again: a receive before then would
 * only be refused.
 */
export function queueFailureDelaySeconds(
  policy: Pick<QueueTimingPolicy, 'backoff'>,
  receiveCount: number,
  retryAfterMs: number | undefined,
  random: () => number = Math.random,
): number {
  const step = Math.max(0, Math.min(30, Math.floor(receiveCount) - 1));
  const exponential = policy.backoff.baseMs * 2 ** step;
  const jittered = Math.min(queueBackoffMaxSeconds * 1_000, exponential * (1 + random() / 2));
  const inboxCeiling = Math.min(policy.backoff.maxMs, exponential);
  const seconds = Math.ceil(Math.max(jittered, inboxCeiling, retryAfterMs ?? 0) / 1_000);
  return Math.min(maxVisibilitySeconds, Math.max(1, seconds));
}

/** Receives before the backoff reaches its cap: the base doubled until it is {@link queueBackoffMaxSeconds}. */
export function queueGrowingReceives(policy: Pick<QueueTimingPolicy, 'backoff'>): number {
  return Math.ceil(Math.log2((queueBackoffMaxSeconds * 1_000) / policy.backoff.baseMs)) + 1;
}

/**
 * Receives of one message before its queue moves it to the DLQ: twice as many as the failures
 * the retry budget (maximum age plus a backoff) can hold at half the longest wait
 * {@link queueFailureDelaySeconds} gives once grown, plus the growing ones, at most SQS's 1,000.
 * A message that is never handled at all (the function dies on it) comes back after the queue's
 * visibility timeout instead (six function timeouts): the longest either can take is
 * {@link queueSecondsToDeadLetter}.
 * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html
 */
export function queueMaxReceiveCount(policy: QueueTimingPolicy): number {
  const budgetSeconds = policy.maxEventAgeSeconds + policy.backoff.maxMs / 1_000;
  const grown = Math.ceil(budgetSeconds / (queueBackoffMaxSeconds / 2));
  return Math.min(sqsMaxReceiveCount, 2 * (queueGrowingReceives(policy) + grown));
}

/**
 * The longest a message the function fails on at every receive (one that never reaches the
 * inbox: the function crashes on it, or the inbox is unreachable for days) stays in its queue
 * before the queue moves it to the DLQ: at each of its {@link queueMaxReceiveCount} receives the
 * function runs up to its timeout and then hides the message for the longest
 * {@link queueFailureDelaySeconds} (the inbox's longest say), or never finishes and the queue's
 * visibility timeout hands it over again. The queue must keep a message at least this long, or
 * it drops one it would have dead-lettered.
 */
export function queueSecondsToDeadLetter(
  policy: QueueTimingPolicy,
  functionTimeoutSeconds = consumerFunctionTimeoutSeconds,
): number {
  const visibility = functionTimeoutSeconds * visibilityTimeoutPerFunctionTimeout;
  let seconds = 0;
  for (let receive = 1; receive <= queueMaxReceiveCount(policy); receive++) {
    const hidden = queueFailureDelaySeconds(policy, receive, policy.backoff.maxMs, () => 1);
    seconds += Math.max(functionTimeoutSeconds + hidden, visibility);
  }
  return seconds;
}
