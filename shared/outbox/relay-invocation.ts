import { randomUUID } from 'node:crypto';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import { type RelayDeps, type RunReport, runRelay } from './relay';
import { addRelayMetrics } from './relay-metrics';

/**
 * What invokes the relay: the schedule (an EventBridge Scheduler payload, ignored) or the
 * tasks API's nudge `{"nudge": true}` after a commit.
 */
export type RelayEvent = { readonly nudge?: boolean } | null | undefined;

export interface RelayInvocationDeps extends Omit<RelayDeps, 'owner'> {
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Aborted on shutdown (local runtime): stop claiming, settle the round in flight. */
  readonly signal?: AbortSignal;
}

/** The JSON the relay function returns (visible in a test invoke and in the local runtime). */
export type RelaySummary = Omit<RunReport, 'stats'> & RunReport['stats'] & { readonly owner: string };

/**
 * Builds the relay's Lambda body. A scheduled run polls until the time budget is spent, so
 * one invocation covers the schedule period; a nudge drains what is due and returns at once,
 * so many nudges do not pile up pollers. Each invocation claims under a fresh owner id.
 */
export function createRelayInvocation(deps: RelayInvocationDeps) {
  return async (event: RelayEvent, context: Pick<Context, 'getRemainingTimeInMillis' | 'awsRequestId'>) => {
    const owner = `relay-${context.awsRequestId || randomUUID()}`;
    const report = await runRelay(
      { outbox: deps.outbox, publisher: deps.publisher, settings: deps.settings, random: deps.random, owner },
      {
        remainingMs: () => context.getRemainingTimeInMillis(),
        untilDrained: event?.nudge === true,
        signal: deps.signal,
      },
    );
    addRelayMetrics(deps.metrics, report);
    const { stats, ...counts } = report;
    const summary: RelaySummary = { owner, ...counts, ...stats };
    if (report.dead > 0) deps.logger.warn('events went dead', { dead: report.dead, totalDead: stats.dead });
    if (report.expiredLeases > 0)
      deps.logger.warn('took over expired leases', { expiredLeases: report.expiredLeases });
    deps.logger.info('relay run', { ...summary });
    return summary;
  };
}
