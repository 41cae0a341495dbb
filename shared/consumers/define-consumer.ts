import { allEventTypes, type EventType } from '../events/event-types';
import type { ConsumerEffect, EffectResult } from './effect';
import {
  queueBackoffMaxSeconds,
  queueGrowingReceives,
  queueSecondsToDeadLetter,
  sqsMaxReceiveCount,
} from './queue-timing';
import { type Ports, type ResourceSpecs, resourceKeyPattern } from './resources';

/** The longest SQS keeps a message: 14 days (`MessageRetentionPeriod`). */
const sqsMaxRetentionSeconds = 14 * 24 * 3600;

/**
 * Retry policy of one consumer: the inbox's limits (`DEAD` only for what needs a person), the
 * rule target's retries, the consumer's queue on AWS and its event source mapping, and how long
 * the dead letters keep a message.
 */
export interface ConsumerPolicy {
  readonly description: string;
  /**
   * Transient failures (throttling, 5xx, timeouts, connection errors) and attempts that lost
   * their lease (a crash, a timeout) are retried, with capped backoff, until the event's first
   * attempt at this consumer is this old; one after that makes the record `DEAD`. The first
   * attempt, not the event's commit: a replayed or redriven event gets its whole budget.
   */
  readonly maxEventAgeSeconds: number;
  /** Permanent failures (validation, 4xx other than throttling) before a record goes `DEAD`; poison is `DEAD` at once. */
  readonly maxPermanentAttempts: number;
  /** Inbox backoff between attempts (full jitter), capped at `maxMs`; on AWS a failed message waits it out hidden in the queue. */
  readonly backoff: { readonly baseMs: number; readonly maxMs: number };
  /** Rule target retry policy: EventBridge's retries of a delivery its target (the consumer's queue) did not take. */
  readonly targetRetry: { readonly maximumRetryAttempts: number; readonly maximumEventAgeSeconds: number };
  /**
   * The consumer's queue on AWS (rule -> queue -> event source mapping -> function): messages
   * per invocation (`batchSize`, each handled on its own and reported on its own), the most
   * invocations the mapping runs at once (`maxConcurrency`, 2 to 1,000: the consumer's share of
   * the account's concurrency, so a slow downstream holds at most this many), and how long the
   * queue keeps a message (`retentionSeconds`, at least the retry budget).
   */
  readonly queue: {
    readonly batchSize: number;
    readonly maxConcurrency: number;
    readonly retentionSeconds: number;
  };
  /** How long the consumer's dead letters (its queue's DLQ and its rule targets' DLQ) keep a message (SQS: at most 14 days). */
  readonly deadLetterRetentionSeconds: number;
}

/** What a consumer does not set of its policy. */
export const defaultConsumerPolicy: Omit<ConsumerPolicy, 'description'> = {
  // A day of transient failures with nobody involved. On AWS a failed message goes back to the
  // consumer's queue hidden for the record's backoff (ChangeMessageVisibility), and the queue
  // hands it over again until the inbox says DEAD; locally the bus retries until this age.
  maxEventAgeSeconds: 24 * 3600,
  maxPermanentAttempts: 3,
  backoff: { baseMs: 1_000, maxMs: 60_000 },
  targetRetry: { maximumRetryAttempts: 185, maximumEventAgeSeconds: 24 * 3600 },
  // 50 invocations of 10 messages: at ~0.2 s an invocation, 2,500 events a second, well above
  // the 1,000 approvals a second prod is sized for, while three consumers hold at most 150 of
  // the account's executions. A week keeps a message the function fails on at every receive
  // until the queue moves it to the DLQ (at most ~4.5 days for a day of retries, see
  // queueSecondsToDeadLetter), and leaves the DLQ's 14 days longer.
  queue: { batchSize: 10, maxConcurrency: 50, retentionSeconds: 7 * 24 * 3600 },
  // The longest SQS keeps a message: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SetQueueAttributes.html
  deadLetterRetentionSeconds: 14 * 24 * 3600,
};

/**
 * A figure of what a consumer's effect did (`index documents`), shown by the ops API, the CLI
 * and the dashboard. The local runtime keeps it as a counter that each effect result moves by
 * `delta`, and counts it again from `counts` after an unclean stop; on AWS it is not counted
 * (the stores would have to be scanned).
 */
export interface EffectCounterSpec<R extends ResourceSpecs = ResourceSpecs> {
  /** What the CLI and the dashboard call it. */
  readonly label: string;
  /** What one effect result adds to it (0 for a stale write or a duplicate; may be negative). */
  readonly delta: (result: EffectResult) => number;
  /**
   * Where it is counted again: the items of a table (those whose attributes equal `where`), the
   * objects of a bucket, or the messages of a topic.
   */
  readonly counts: {
    readonly resource: keyof R & string;
    readonly where?: Readonly<Record<string, string>>;
  };
}

/** A consumer as its folder declares it (`functions/consumers/<name>/consumer.ts`). */
export interface ConsumerSpec<N extends string, R extends ResourceSpecs> {
  /** Its name: lowercase letters, digits and dashes, a letter first (it names its function, queues, alarms and inbox records). */
  readonly name: N;
  /** One line: what its effect does. */
  readonly description: string;
  /** The event types it takes: the bus routes each to it. */
  readonly subscribes: readonly EventType[];
  /** What it changes of `defaultConsumerPolicy`. */
  readonly policy?: Partial<Omit<ConsumerPolicy, 'description'>>;
  /**
   * Its folder, `new URL('.', import.meta.url)`: where each runtime finds the rest of the
   * plug-in, `effect.ts` (exports `effect`, built from the ports of `resources`) and
   * `handler.ts` (exports the Lambda `handler`).
   */
  readonly folder: URL;
  /** What its effect writes to or reads from, by key (`shared/consumers/resources.ts`). */
  readonly resources?: R;
  /** Figures of what its effect did, by the name the ops API's `effects` gives them. */
  readonly counters?: Readonly<Record<string, EffectCounterSpec<R>>>;
}

/** A consumer of the registry: its spec, checked, with its whole policy. */
export interface ConsumerDefinition<N extends string = string, R extends ResourceSpecs = ResourceSpecs> {
  readonly name: N;
  readonly description: string;
  readonly subscribes: readonly EventType[];
  readonly policy: ConsumerPolicy;
  readonly folder: URL;
  readonly resources: R;
  /** Its counters, each naming one of its resources (checked by `defineConsumer`). */
  readonly counters: Readonly<Record<string, EffectCounterSpec>>;
}

/**
 * Declares a consumer. Throws on a spec no realization could build (a name that cannot name an
 * AWS resource, no event or an unknown one, a resource key that cannot name a variable, two
 * databases, a counter of no resource), so a mistake fails where it is written, before a synth
 * or a start.
 */
export function defineConsumer<const N extends string, const R extends ResourceSpecs = Record<never, never>>(
  spec: ConsumerSpec<N, R>,
): ConsumerDefinition<N, R> {
  const problems: string[] = [];
  // Short enough for `<stack>-<consumer>-...` physical names (Lambda: 64 characters).
  if (!/^[a-z][a-z0-9-]{0,19}$/.test(spec.name))
    problems.push('its name must be 1-20 lowercase letters, digits or dashes, a letter first');
  if (spec.description.trim() === '') problems.push('it needs a description');
  if (spec.subscribes.length === 0) problems.push('it must subscribe to at least one event type');
  for (const type of spec.subscribes)
    if (!allEventTypes.includes(type))
      problems.push(
        `it subscribes to ${JSON.stringify(type)}, which is not an event type (${allEventTypes.join(', ')})`,
      );
  if (new Set(spec.subscribes).size !== spec.subscribes.length)
    problems.push('it subscribes to an event type twice');
  const resources = (spec.resources ?? {}) as R;
  for (const key of Object.keys(resources))
    if (!resourceKeyPattern.test(key))
      problems.push(
        `its resource ${JSON.stringify(key)} needs a camelCase key of at most 40 letters and digits`,
      );
  if (Object.values(resources).filter((r) => r.kind === 'database').length > 1)
    problems.push('it may reach the database as one role only');
  const counters = spec.counters ?? {};
  for (const [name, counter] of Object.entries(counters)) {
    const counted = resources[counter.counts.resource];
    if (!counted || counted.kind === 'database')
      problems.push(
        `its counter ${name} counts ${JSON.stringify(counter.counts.resource)}, which is not its table, bucket or topic`,
      );
    else if (counter.counts.where && counted.kind !== 'table')
      problems.push(`its counter ${name} filters a ${counted.kind}: only a table's items can be filtered`);
  }
  const policy: ConsumerPolicy = { description: spec.description, ...defaultConsumerPolicy, ...spec.policy };
  problems.push(...queuePolicyProblems(policy));
  if (problems.length > 0) throw new Error(`consumer ${JSON.stringify(spec.name)}: ${problems.join('; ')}`);
  return Object.freeze({
    name: spec.name,
    description: spec.description,
    subscribes: Object.freeze([...spec.subscribes]),
    policy: Object.freeze(policy),
    folder: spec.folder,
    resources: Object.freeze({ ...resources }),
    counters: Object.freeze({ ...counters }) as Readonly<Record<string, EffectCounterSpec>>,
  });
}

/**
 * What SQS and Lambda refuse of a consumer's queue settings, found at synth rather than at
 * deploy: a standard queue's batch of at most 10 without a batching window, a mapping's maximum
 * concurrency of 2 to 1,000, a retention of at most 14 days and, so a failing message is not
 * dropped before its retries end, at least the longest a message can take to reach the DLQ
 * ({@link queueSecondsToDeadLetter}), which is longer than the retry budget; and a DLQ that
 * keeps a message longer than the queue does, as SQS counts a dead letter's retention from its
 * first enqueue
 * (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-parameters.html,
 * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SetQueueAttributes.html,
 * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html).
 */
export function queuePolicyProblems(policy: ConsumerPolicy): string[] {
  const { batchSize, maxConcurrency, retentionSeconds } = policy.queue;
  const problems: string[] = [];
  if (!(Number.isInteger(batchSize) && batchSize >= 1 && batchSize <= 10))
    problems.push(`its queue.batchSize ${batchSize} is not a whole number from 1 to 10`);
  if (!(Number.isInteger(maxConcurrency) && maxConcurrency >= 2 && maxConcurrency <= 1_000))
    problems.push(`its queue.maxConcurrency ${maxConcurrency} is not a whole number from 2 to 1000`);
  const budget = policy.maxEventAgeSeconds + policy.backoff.maxMs / 1_000;
  const toDeadLetter = queueSecondsToDeadLetter(policy);
  if (!(retentionSeconds >= toDeadLetter && retentionSeconds <= sqsMaxRetentionSeconds))
    problems.push(
      `its queue.retentionSeconds ${retentionSeconds} must cover the longest a failing message takes to reach its DLQ (${toDeadLetter} s) and be at most 14 days`,
    );
  if (
    !(
      policy.deadLetterRetentionSeconds > retentionSeconds &&
      policy.deadLetterRetentionSeconds <= sqsMaxRetentionSeconds
    )
  )
    problems.push(
      `its deadLetterRetentionSeconds ${policy.deadLetterRetentionSeconds} must be longer than its queue's retention (${retentionSeconds} s: SQS counts a dead letter's from its first enqueue) and at most 14 days`,
    );
  // SQS moves a message to the DLQ after at most 1,000 receives: those must outlast the budget at
  // the capped wait, or the queue gives up on a message the inbox would still retry.
  const receivable = (sqsMaxReceiveCount - queueGrowingReceives(policy)) * queueBackoffMaxSeconds;
  if (budget > receivable)
    problems.push(
      `its retries (${budget} s) outlast the ${sqsMaxReceiveCount} receives SQS allows a message (${receivable} s at ${queueBackoffMaxSeconds} s each): a shorter maxEventAgeSeconds`,
    );
  return problems;
}

/**
 * Checks a registry: names unique, and no two consumers counting under one name (the ops API
 * lists every counter together). Returns it, typed as listed.
 */
export function consumerRegistry<const T extends readonly ConsumerDefinition[]>(consumers: T): T {
  const names = consumers.map((c) => c.name);
  const twice = names.filter((n, i) => names.indexOf(n) !== i);
  if (twice.length > 0) throw new Error(`the consumer registry lists ${twice.join(', ')} more than once`);
  if (consumers.length === 0) throw new Error('the consumer registry is empty');
  const counters = consumers.flatMap((c) => Object.keys(c.counters));
  const counted = counters.filter((n, i) => counters.indexOf(n) !== i);
  if (counted.length > 0)
    throw new Error(`two consumers count ${counted.join(', ')}: counter names must differ`);
  return consumers;
}

/**
 * A consumer's effect as its folder's `effect.ts` exports it (`export const effect = ...`):
 * built once per function (or local start) from the ports of the resources its declaration
 * names, whichever runtime made them.
 */
export type EffectFactory<R extends ResourceSpecs> = (ports: Ports<R>) => ConsumerEffect;

/** Types an effect factory by its consumer's declaration (the ports it gets are the resources it declared). */
export function defineEffect<R extends ResourceSpecs>(
  _consumer: ConsumerDefinition<string, R>,
  build: EffectFactory<R>,
): EffectFactory<R> {
  return build;
}

/** One counter of a registry, with the consumer that declares it. */
export interface RegisteredCounter {
  readonly name: string;
  readonly consumer: ConsumerDefinition;
  readonly spec: EffectCounterSpec;
}

/** Every counter of a registry, in the registry's order: what the ops API's `effects` lists. */
export function countersOf(registry: readonly ConsumerDefinition[]): readonly RegisteredCounter[] {
  return registry.flatMap((consumer) =>
    Object.entries(consumer.counters).map(([name, spec]) => ({ name, consumer, spec })),
  );
}
