import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { auditMetricNames, consumerDimension } from '../consumers/contract';
import { alarmIds } from '../ops/alarm-ids';
import type { ConsumerName } from '../topology';

/**
 * After an audit run: `UndeliveredToConsumer` per consumer (its open findings), for each
 * consumer that has some or whose `undelivered-<c>` alarm is not OK yet, as the inbox gauges
 * send theirs: the alarm keeps its state between points (missing data ignored), so an idle,
 * healthy pipeline sends no point and pays for no metric. `okAlarms` gives the ids of the
 * alarms that are OK (undefined or failing: every consumer's point is sent). Returns the
 * consumers whose point was sent.
 */
export async function emitAuditGauges(deps: {
  readonly undelivered: Readonly<Record<ConsumerName, number>>;
  readonly metrics: Pick<Metrics, 'addMetric' | 'addDimension' | 'publishStoredMetrics'>;
  readonly okAlarms?: () => Promise<ReadonlySet<string> | undefined>;
}): Promise<ConsumerName[]> {
  const ok = deps.okAlarms ? await deps.okAlarms().catch(() => undefined) : undefined;
  const sent: ConsumerName[] = [];
  for (const [consumer, n] of Object.entries(deps.undelivered) as [ConsumerName, number][]) {
    if (n === 0 && ok?.has(alarmIds.undelivered(consumer))) continue;
    // One EMF document per consumer: the dimension differs.
    deps.metrics.addDimension(consumerDimension, consumer);
    deps.metrics.addMetric(auditMetricNames.undelivered, MetricUnit.Count, n);
    deps.metrics.publishStoredMetrics();
    sent.push(consumer);
  }
  return sent;
}
