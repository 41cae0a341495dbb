import { randomUUID } from 'node:crypto';
import type { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import type { EventBridgeEvent } from 'aws-lambda';
import { isInboxError } from '../inbox/errors';
import type { InboxStore } from '../inbox/inbox-store';
import { type ProcessOutcome, poisonKey, processOnce, recordPoison } from '../inbox/process-once';
import type { InboxSettings } from '../inbox/settings';
import type { ConsumerName, Topology } from '../topology';
import { consumerDimension, consumerMetricNames } from './contract';
import { readDelivery, type ValidDelivery } from './delivery';
import type { ConsumerEffect, EffectResult } from './effect';
import { createQueueConsumer, type QueueConsumerDeps } from './queue-delivery';

/** The part of Lambda's context a consumer reads; the local runtime passes a look-alike. */
export interface ConsumerContext {
  readonly awsRequestId: string;
  readonly functionName: string;
  getRemainingTimeInMillis(): number;
}

/** The logging a consumer does; a Powertools Logger fits, tests pass a recorder. */
export interface ConsumerLogger {
  info(message: string, ...extra: unknown[]): void;
  warn(message: string, ...extra: unknown[]): void;
  error(message: string, ...extra: unknown[]): void;
}

/** The metrics a consumer emits; a Powertools Metrics fits. */
export type ConsumerMetrics = Pick<Metrics, 'addMetric' | 'setDefaultDimensions'>;

/** Everything one consumer needs, injected so Lambda, the local runtime and tests share one body. */
export interface ConsumerDeps {
  readonly name: ConsumerName;
  readonly effect: ConsumerEffect;
  readonly inbox: InboxStore;
  readonly logger: ConsumerLogger;
  readonly metrics: ConsumerMetrics;
  /** Its topology's inbox settings for `name` (`inboxSettingsFor`). */
  readonly settings: InboxSettings;
  /** The rules a delivery must have come by (see readDelivery): its topology's. */
  readonly routes: Pick<Topology, 'source' | 'rules'>;
  /** Epoch milliseconds; defaults to `Date.now`. */
  readonly clock?: () => number;
  readonly random?: () => number;
}

/** What an invocation that did not throw did with its event (the Lambda's return value). */
export interface ConsumerResult {
  readonly consumer: ConsumerName;
  /** `dead` and `poison` are acknowledged on purpose: the record is DEAD, alarmed, redrivable. */
  readonly status: 'processed' | 'duplicate' | 'dead' | 'poison';
  readonly eventId: string;
  readonly subject: string | null;
  readonly attempt?: number;
  readonly reason?: string;
  readonly effect?: EffectResult;
}

/** The Lambda body of a consumer: an EventBridge event and a Lambda-like context in, a result out. */
export type ConsumerFunction = (
  event: EventBridgeEvent<string, unknown>,
  context: ConsumerContext,
) => Promise<ConsumerResult>;

type Counts = Record<keyof typeof consumerMetricNames, number>;

/**
 * Builds a consumer's Lambda body over the inbox. Per invocation: validate the delivery
 * (poison -> recorded DEAD, acknowledged); run the effect through {@link processOnce}; emit
 * every consumer metric once (0 or 1, dimension `Consumer`). Errors reach the platform only
 * when a retry can help: a live attempt elsewhere or a pending backoff (InboxInProgressError,
 * InboxBackoffError), an effect failure (recorded FAILED first), a lost lease, a store error.
 */
export function createConsumer(deps: ConsumerDeps): ConsumerFunction {
  const { name, effect, inbox, logger, metrics } = deps;
  const { settings } = deps;
  const clock = deps.clock ?? Date.now;
  metrics.setDefaultDimensions({ [consumerDimension]: name });

  return async (event, context) => {
    const counts: Counts = { processed: 0, duplicate: 0, failed: 0, dead: 0, poison: 0 };
    const delivery = readDelivery(event, name, deps.routes);
    const keys = {
      consumer: name,
      eventId: delivery.eventId,
      subject: delivery.subject,
      busEventId: (event as { id?: unknown } | null)?.id,
    };
    try {
      const outcome = delivery.valid
        ? await runEffect(delivery, event, context)
        : await recordPoison(
            {
              consumer: name,
              eventId: delivery.eventId,
              cloudEventId: delivery.cloudEventId,
              subject: delivery.subject,
              eventType: delivery.eventType,
              payloadHash: delivery.payloadHash,
              reason: delivery.reason,
              event,
            },
            { inbox, settings },
            clock(),
          );
      switch (outcome.kind) {
        case 'processed':
          counts.processed++;
          logger.info('event processed', {
            ...keys,
            attempt: outcome.attempt,
            takenOver: outcome.takenOver,
            effect: outcome.result,
          });
          return { ...result('processed'), attempt: outcome.attempt, effect: outcome.result };
        case 'duplicate':
          counts.duplicate++;
          if (!delivery.valid) {
            logger.info('duplicate delivery of a recorded poison event acknowledged', {
              ...keys,
              poisonKey: poisonKey(delivery.eventId, delivery.payloadHash),
            });
          } else {
            logger.info('duplicate delivery acknowledged', { ...keys, recordStatus: outcome.status });
          }
          return result('duplicate');
        case 'dead':
          counts.failed++;
          counts.dead++;
          logger.error('event is dead: its failures need a person', {
            ...keys,
            attempt: outcome.attempt,
            reason: outcome.reason,
          });
          return { ...result('dead'), attempt: outcome.attempt, reason: outcome.reason };
        case 'poison':
          counts.poison++;
          counts.dead++;
          logger.error('poison event recorded dead', {
            ...keys,
            poisonKey: outcome.poisonKey,
            reason: outcome.reason,
          });
          return { ...result('poison'), reason: outcome.reason };
      }
    } catch (err) {
      if (isInboxError(err, 'IN_PROGRESS', 'BACKOFF')) {
        logger.warn('event not due here yet; failing so the platform retries later', {
          ...keys,
          code: err.code,
          retryAfterMs: err.details.retryAfterMs,
        });
      } else {
        counts.failed++;
        logger.error(isInboxError(err, 'FENCED_OUT') ? 'lease lost before completion' : 'attempt failed', {
          ...keys,
          error: err,
        });
      }
      throw err;
    } finally {
      for (const [metric, value] of Object.entries(counts) as [keyof Counts, number][]) {
        metrics.addMetric(consumerMetricNames[metric], MetricUnit.Count, value);
      }
    }

    function result(status: ConsumerResult['status']): ConsumerResult {
      return { consumer: name, status, eventId: delivery.eventId, subject: delivery.subject };
    }
  };

  /** Runs the effect on a valid delivery through {@link processOnce}, as one attempt of its own. */
  function runEffect(
    delivery: ValidDelivery,
    event: EventBridgeEvent<string, unknown>,
    context: ConsumerContext,
  ): Promise<ProcessOutcome<EffectResult>> {
    const now = clock();
    const remaining = context.getRemainingTimeInMillis();
    // Lambda reuses awsRequestId across its async retries: the owner must be unique per attempt.
    const owner = `${context.awsRequestId || 'local'}/${randomUUID()}`;
    return processOnce(
      {
        consumer: name,
        eventId: delivery.eventId,
        subject: delivery.subject,
        eventType: delivery.cloudEvent.type,
        payloadHash: delivery.payloadHash,
        event,
      },
      (ctx) => effect(delivery.cloudEvent, ctx),
      {
        inbox,
        settings,
        clock,
        owner,
        random: deps.random,
        logger,
        deadline: Number.isFinite(remaining) ? now + remaining : undefined,
      },
    );
  }
}

/** Dependencies of the deployed handler: Powertools Logger and Metrics, which its middlewares need. */
export interface ConsumerHandlerDeps extends ConsumerDeps {
  readonly logger: Logger;
  readonly metrics: Metrics;
}

/**
 * The consumer Lambda handler on AWS: a batch of its queue's messages (see
 * `createQueueConsumer`), each run through {@link createConsumer}, wrapped in middy with the
 * Lambda context in the logs and the metrics flushed as EMF after every invocation.
 */
export function createConsumerHandler(
  deps: ConsumerHandlerDeps,
  queue: Omit<QueueConsumerDeps<ConsumerContext>, 'consumer' | 'logger'>,
) {
  return middy(createQueueConsumer({ ...queue, consumer: createConsumer(deps), logger: deps.logger }))
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .use(logMetrics(deps.metrics, { throwOnEmptyMetrics: false }));
}
