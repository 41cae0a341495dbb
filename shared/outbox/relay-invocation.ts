import { randomUUID } from 'node:crypto';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import type { OutboxStats } from './outbox-store';
import { type RelayDeps, type RunReport, runRelay } from './relay';
import { addRelayMetrics } from './relay-metrics';

/**
 * What invokes the relay: a sweep (a scheduled rule's event, ignored) or the tasks API's nudge
 * `{"nudge": true}` after a commit. Every run does the same: drain what is due and return.
 */
export type RelayEvent = { readonly nudge?: boolean } | Record<string, unknown> | null | undefined;

/**
 * The busy sweep: a frequent schedule that runs only while rows stay pending after a run (a
 * backoff, another relay's lease), so retries happen within a minute while an idle pipeline
 * is swept only by the long safety sweep. An EventBridge rule enabled and disabled on AWS; the
 * relay runner's period locally.
 */
export interface SweepControl {
  /** Sets the sweep; resolves true when it may have changed (false: known to be so already). */
  setBusy(busy: boolean): Promise<boolean>;
}

export interface RelayInvocationDeps extends Omit<RelayDeps, 'owner'> {
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Turned busy while rows stay pending; absent where a fixed schedule runs the relay. */
  readonly sweep?: SweepControl;
  /** Aborted on shutdown (local runtime): stop claiming, settle the round in flight. */
  readonly signal?: AbortSignal;
}

/** The JSON the relay function returns (visible in a test invoke and in the local runtime). */
export type RelaySummary = Omit<RunReport, 'stats'> & RunReport['stats'] & { readonly owner: string };

/**
 * Builds the relay's Lambda body: one run under a fresh owner id, then the busy sweep set to
 * match what is left, then the metrics. Turning the busy sweep off is checked once more
 * against the outbox: a run that committed meanwhile left rows behind would otherwise wait
 * for the long sweep.
 */
export function createRelayInvocation(deps: RelayInvocationDeps) {
  return async (_event: RelayEvent, context: Pick<Context, 'getRemainingTimeInMillis' | 'awsRequestId'>) => {
    const owner = `relay-${context.awsRequestId || randomUUID()}`;
    const report = await runRelay(
      { outbox: deps.outbox, publisher: deps.publisher, settings: deps.settings, random: deps.random, owner },
      { remainingMs: () => context.getRemainingTimeInMillis(), signal: deps.signal },
    );
    const stats = deps.sweep ? await settleSweep(deps.sweep, deps.outbox, report.stats) : report.stats;
    const settled: RunReport = { ...report, stats };
    addRelayMetrics(deps.metrics, settled);
    const { stats: _, ...counts } = settled;
    const summary: RelaySummary = { owner, ...counts, ...stats };
    if (report.dead > 0) deps.logger.warn('events went dead', { dead: report.dead, totalDead: stats.dead });
    if (report.expiredLeases > 0)
      deps.logger.warn('took over expired leases', { expiredLeases: report.expiredLeases });
    deps.logger.info('relay run', { ...summary });
    return summary;
  };
}

async function settleSweep(
  sweep: SweepControl,
  outbox: RelayInvocationDeps['outbox'],
  stats: OutboxStats,
): Promise<OutboxStats> {
  if (stats.pending > 0) {
    await sweep.setBusy(true);
    return stats;
  }
  if (!(await sweep.setBusy(false))) return stats;
  const after = await outbox.stats();
  if (after.pending > 0) await sweep.setBusy(true);
  return after;
}
