import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { auditMetricNames, consumerDimension } from '../consumers/contract';
import { alarmIds } from '../ops/alarm-ids';
import type { ConsumerName } from '../topology';

/**
 * After an audit run: `UndeliveredToConsumer` (its open findings) per consumer, for the
 * dashboard, and for all consumers together on a document without the `Consumer` dimension,
 * which the one `undelivered` alarm watches. Sent only while some consumer has findings or the
 * alarm is not OK yet, as the inbox gauges are: the alarm keeps its state between points
 * (missing data ignored), so an idle, healthy pipeline sends no point and pays for no metric.
 * `okAlarms` gives the ids of the alarms that are OK (undefined, or failing: sent). Returns
 * whether it sent.
 */
export async function emitAuditGauges(deps: {
  readonly undelivered: Readonly<Record<ConsumerName, number>>;
  readonly metrics: Pick<Metrics, 'addMetric' | 'addDimension' | 'publishStoredMetrics'>;
  readonly okAlarms?: () => Promise<ReadonlySet<string> | undefined>;
}): Promise<boolean> {
  const ok = deps.okAlarms ? await deps.okAlarms().catch(() => undefined) : undefined;
  const counts = Object.entries(deps.undelivered) as [ConsumerName, number][];
  const total = counts.reduce((n, [, c]) => n + c, 0);
  if (total === 0 && ok?.has(alarmIds.undelivered)) return false;
  // One EMF document per consumer (the dimension differs), then one for all of them.
  for (const [consumer, n] of counts) {
    deps.metrics.addDimension(consumerDimension, consumer);
    deps.metrics.addMetric(auditMetricNames.undelivered, MetricUnit.Count, n);
    deps.metrics.publishStoredMetrics();
  }
  deps.metrics.addMetric(auditMetricNames.undelivered, MetricUnit.Count, total);
  deps.metrics.publishStoredMetrics();
  return true;
}
