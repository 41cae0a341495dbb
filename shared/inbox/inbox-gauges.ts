import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { consumerDimension, inboxGaugeMetricNames } from '../consumers/contract';
import type { ConsumerName } from '../topology';
import type { InboxStore } from './inbox-store';

/** What one gauge run counted, per consumer (the function's return value, for a test invoke). */
export type InboxGaugeReport = Readonly<Record<ConsumerName, { readonly dead: number }>>;

/**
 * Counts each consumer's DEAD records from the inbox's sparse index and emits one gauge per
 * consumer. Emitted every run, zero included: the alarm on it keeps its state between runs and
 * goes back to OK only when a count of zero arrives, i.e. once someone redrove or discarded them.
 */
export async function emitInboxGauges(deps: {
  readonly inbox: Pick<InboxStore, 'openCounts'>;
  readonly metrics: Pick<Metrics, 'addMetric' | 'addDimension' | 'publishStoredMetrics'>;
  readonly consumers: readonly ConsumerName[];
}): Promise<InboxGaugeReport> {
  const report: Record<string, { dead: number }> = {};
  for (const consumer of deps.consumers) {
    const counts = await deps.inbox.openCounts(consumer);
    report[consumer] = { dead: counts.DEAD };
    // One EMF document per consumer: the dimension differs.
    deps.metrics.addDimension(consumerDimension, consumer);
    deps.metrics.addMetric(inboxGaugeMetricNames.dead, MetricUnit.Count, counts.DEAD);
    deps.metrics.publishStoredMetrics();
  }
  return report as InboxGaugeReport;
}
