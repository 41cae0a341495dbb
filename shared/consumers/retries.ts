import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import * as z from 'zod';
import { type ConsumerName, type ConsumerPolicy, topology } from '../topology';

/**
 * A consumer's transient failures retried for a day on AWS, with nobody involved: what the
 * local bus does (`infra/local/bus/target-dispatch.ts`: retry with the consumer's capped backoff
 * until the delivery is `maxEventAgeSeconds` plus one backoff old, then a dead letter).
 *
 * On AWS a delivery gets Lambda's asynchronous attempts (1 + 2 retries, about three minutes),
 * then Lambda sends its on-failure record to the consumers' retry queue. There, the record:
 * 1. comes in fresh from Lambda: if the event is younger than its consumer's age limit it goes
 *    back on the queue delayed by the consumer's backoff cap (`DelaySeconds`), else to the
 *    consumers' dead letters (alarmed: a person is needed);
 * 2. comes back due: the consumer is invoked again, asynchronously with the original event, as
 *    EventBridge invoked it, and gets Lambda's attempts once more.
 * Only the inbox says DEAD: a permanent failure spends its budget, a transient one passes its
 * maximum age, and either way the consumer then returns normally (acknowledged), so no
 * on-failure record follows. What reaches the dead letters is what the local bus would
 * dead-letter too: failures that kept the inbox from recording anything for the whole day.
 */
export interface RetryPorts {
  /** Puts `body` back on the retry queue, handed over again after `delaySeconds`, marked due. */
  requeue(body: string, delaySeconds: number): Promise<void>;
  /** Hands `body` to the consumers' dead letters, with why the retries gave up. */
  deadLetter(body: string, reason: string): Promise<void>;
  /** Invokes the consumer asynchronously with `event` (resolves once Lambda accepted it). */
  invoke(functionName: string, event: unknown): Promise<void>;
}

/** The message attribute that marks a record whose delay is over: invoke now. */
export const retryDueAttribute = 'RETRY_DUE';

/** What the retries need to know. */
export interface RetryDeps {
  readonly ports: RetryPorts;
  /** Each consumer's function name, as the on-failure record's `functionArn` names it. */
  readonly consumerFunctions: Readonly<Record<ConsumerName, string>>;
  /** The consumers' policies: their age limits and backoff. @default topology.consumers */
  readonly policies?: Readonly<Record<ConsumerName, ConsumerPolicy>>;
  /** Epoch milliseconds. @default Date.now */
  readonly clock?: () => number;
  readonly random?: () => number;
  readonly logger: {
    warn(message: string, ...extra: unknown[]): void;
    info(message: string, ...extra: unknown[]): void;
  };
}

/**
 * Lambda's on-failure record, as much of it as the retries read
 * (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html).
 */
const onFailureRecord = z.object({
  requestContext: z.object({ functionArn: z.string().min(1) }),
  requestPayload: z.looseObject({ time: z.string().optional() }),
});

/**
 * How long a consumer's deliveries are retried: its maximum event age plus one backoff, as
 * the local bus's `maxAgeMs` (so the inbox, judging the age at an attempt, has one attempt past
 * its own limit and marks the record DEAD before the retries would give up).
 */
export function retryAgeLimitMs(policy: ConsumerPolicy): number {
  return policy.maxEventAgeSeconds * 1_000 + policy.backoff.maxMs;
}

/**
 * The delay before a retry: the consumer's backoff cap plus jitter of up to its base, in whole
 * seconds. Lambda's own retries already waited a minute and two; a retry never lands before
 * the inbox's backoff of the attempt that just failed (at most the cap) is over, so it is not
 * refused as early (InboxBackoffError) and does not spend an attempt.
 */
export function retryDelaySeconds(policy: ConsumerPolicy, random: () => number = Math.random): number {
  return Math.ceil((policy.backoff.maxMs + random() * policy.backoff.baseMs) / 1_000);
}

/**
 * The longest delay SQS gives a message (`DelaySeconds`, 15 minutes): a retry's delay must fit,
 * or it would come back before the inbox's backoff is over and be refused as early.
 * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html
 */
export const maxSqsDelaySeconds = 900;

/**
 * Refuses (at synth) a consumer whose longest retry delay SQS cannot give: its backoff cap plus
 * its jitter base over {@link maxSqsDelaySeconds}. Only a topology change can cause it.
 */
export function assertRetryDelayFitsSqs(consumer: ConsumerName, policy: ConsumerPolicy): void {
  const longest = retryDelaySeconds(policy, () => 1);
  if (longest > maxSqsDelaySeconds) {
    throw new Error(
      `consumer ${consumer}: a retry waits up to ${longest} s (backoff cap plus jitter), longer than SQS delays a message (${maxSqsDelaySeconds} s); lower backoff.maxMs`,
    );
  }
}

/** The function's name in an ARN (`arn:aws:lambda:r:a:function:name[:qualifier]`) or a bare name. */
function functionNameOf(arnOrName: string): string {
  const parts = arnOrName.split(':');
  const at = parts.indexOf('function');
  return (at >= 0 ? parts[at + 1] : parts[0]) ?? '';
}

/**
 * The consumer retries' Lambda body: an SQS batch of the retry queue in, the records it could
 * not handle out (`ReportBatchItemFailures`, so only those come back, and after the queue's
 * `maxReceiveCount` go to the dead letters). Each record is handled on its own.
 */
export function createConsumerRetries(deps: RetryDeps) {
  const policies = deps.policies ?? topology.consumers;
  const clock = deps.clock ?? Date.now;
  const byFunction = new Map(
    Object.entries(deps.consumerFunctions).map(([consumer, name]) => [name, consumer as ConsumerName]),
  );

  async function handle(record: SQSRecord): Promise<void> {
    let parsed: z.infer<typeof onFailureRecord>;
    try {
      parsed = onFailureRecord.parse(JSON.parse(record.body));
    } catch {
      await deps.ports.deadLetter(record.body, 'not a Lambda on-failure record: nothing to retry');
      return;
    }
    const functionName = functionNameOf(parsed.requestContext.functionArn);
    const consumer = byFunction.get(functionName);
    if (!consumer) {
      await deps.ports.deadLetter(record.body, `function ${functionName} is no consumer of this stack`);
      return;
    }
    if (record.messageAttributes?.[retryDueAttribute]?.stringValue) {
      await deps.ports.invoke(functionName, parsed.requestPayload);
      deps.logger.info('consumer invoked again', { consumer, eventId: parsed.requestPayload.id });
      return;
    }
    const policy = policies[consumer];
    const sent = Date.parse(parsed.requestPayload.time ?? '');
    const age = clock() - sent;
    const limit = retryAgeLimitMs(policy);
    if (!(age < limit)) {
      const reason = Number.isNaN(sent)
        ? 'the event carries no time to judge its age by'
        : `retried for ${Math.round(age / 60_000)} min since the event's time (limit ${Math.round(limit / 60_000)} min): the inbox could record none of its attempts`;
      deps.logger.warn('consumer retries gave up: a person is needed', {
        consumer,
        eventId: parsed.requestPayload.id,
        reason,
      });
      await deps.ports.deadLetter(record.body, reason);
      return;
    }
    await deps.ports.requeue(record.body, retryDelaySeconds(policy, deps.random));
  }

  return async (event: SQSEvent): Promise<SQSBatchResponse> => {
    const batchItemFailures: SQSBatchResponse['batchItemFailures'] = [];
    for (const record of event.Records) {
      try {
        await handle(record);
      } catch (err) {
        deps.logger.warn('could not handle a retry record; the queue hands it over again', {
          messageId: record.messageId,
          error: err,
        });
        batchItemFailures.push({ itemIdentifier: record.messageId });
      }
    }
    return { batchItemFailures };
  };
}
