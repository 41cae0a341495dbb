/**
 * What the ops API needs that differs between the realizations: the bus's dead letters and
 * how a stored event reaches a consumer again, alarm states and the relay's health, and (locally
 * only) what the effects did. One adapter per realization: `adapters/aws/` (SQS, Lambda,
 * CloudWatch) and `infra/local/local-ops.ts` (the local bus, the relay runner, local alarms).
 */
import type { InboxHealth } from '../inbox/inbox-health';
import type { OutboxStats } from '../outbox/outbox-store';
import type { ConsumerName } from '../topology';

/** An event the bus gave up delivering to one consumer: a rule DLQ or on-failure message on AWS. */
export interface DeadLetter {
  /** The EventBridge event id (`event.id`). */
  readonly id: string;
  readonly consumer: ConsumerName;
  /** The rule that routed it, or `on-failure` for a consumer's on-failure destination. */
  readonly rule: string;
  readonly attempts: number;
  readonly error: string;
  readonly deadAt: string;
  /** The event as the consumer receives it, re-sent on redrive. */
  readonly event: unknown;
}

/** The bus's dead letters: counted, listed, and put back on their way. */
export interface DeadLetterStore {
  count(): Promise<number>;
  list(limit: number): Promise<readonly DeadLetter[]>;
  /**
   * Re-delivers every letter of event `id` (only `consumer`'s when given), or every letter
   * there is (`'all'`), and forgets each once its re-delivery was accepted; returns how many
   * (0: there was none). `stopBy` (epoch ms) ends a long redrive early, with what it did so far.
   * `deadBefore` (epoch ms) leaves the letters that died at or after it: a redrive of
   * everything passes it its own start, so a letter it redrove that dies again meanwhile is
   * not redriven again by the same request (a redrive of letters that keep dying would loop
   * until its deadline).
   */
  redrive(
    target: { readonly id: string; readonly consumer?: ConsumerName } | 'all',
    stopBy?: number,
    deadBefore?: number,
  ): Promise<number>;
}

/** Hands a stored event to a consumer again (an inbox redrive): an async invoke on AWS. */
export interface ConsumerRedelivery {
  redeliver(consumer: ConsumerName, event: unknown): Promise<void>;
}

/** The state of one alarm: CloudWatch's states, or the local evaluation of the same thresholds. */
export type AlarmState = 'OK' | 'ALARM' | 'INSUFFICIENT_DATA';

/**
 * One consumer's inbox by state. `processed` is a maintained count of events processed, null
 * where none is kept (AWS: the consumers' `processed` metric is that figure); the others (the
 * open records' counts, the oldest lease and the oldest retry age) are read from the operator's index.
 */
export interface InboxStatusCounts extends InboxHealth {
  readonly processed: number | null;
}

/**
 * The figures the alarms watch, for a realization that evaluates them itself (locally); null
 * where the store holding it could not be read (its alarms then have insufficient data).
 */
export interface StatusFigures {
  readonly outbox: OutboxStats | null;
  readonly consumers: Readonly<Record<ConsumerName, InboxStatusCounts>> | null;
  readonly deadLetters: number | null;
  /** Delivered events the audit found missing, per consumer (its open findings). */
  readonly undelivered: Readonly<Record<ConsumerName, number>> | null;
  /** Local only: effects the audit found of events the pipeline never committed (foreign-effects.ts). */
  readonly foreignEffects?: number | null;
}

/** The stores a status section is read from: the database, the inbox's DynamoDB, the bus (its dead letters). */
export const statusComponents = ['postgres', 'dynamo', 'bus'] as const;
export type StatusComponent = (typeof statusComponents)[number];

/** Whether a component serves, and if not, why and since when. */
export interface ComponentState {
  readonly up: boolean;
  /** What failed, as its error said (absent while up). */
  readonly cause?: string;
  /** When it went down (ISO 8601), where the realization watches it (locally). */
  readonly since?: string;
}

/** When the relay last ran and how many of its runs failed. */
export interface RelayHealth {
  readonly lastRunAt: string | null;
  readonly errors: number;
}

/** The pipeline's alarms and the relay's health. */
export interface PipelineHealth {
  alarms(figures: StatusFigures): Promise<Record<string, AlarmState>>;
  relay(): Promise<RelayHealth>;
  /**
   * The components the realization watches itself (the local runtime supervises its engines):
   * those it knows to be down, with their cause. A component missing here is judged by whether
   * its sections could be read.
   */
  components?(): Promise<Partial<Record<StatusComponent, ComponentState>>>;
}

/**
 * What the effects have done, read from their own stores (the local runtime's files and tables):
 * one figure per counter the consumers declare (`defineConsumer`'s `counters`), by its name.
 */
export type EffectCounts = Readonly<Record<string, number>>;
