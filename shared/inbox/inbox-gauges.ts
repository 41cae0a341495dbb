import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { consumerDimension, inboxGaugeMetricNames } from '../consumers/contract';
import type { ConsumerName } from '../topology';
import type { InboxStore } from './inbox-store';

/** What one gauge run counted and sent, per consumer (the function's return value, for a test invoke). */
export type InboxGaugeReport = Readonly<
  Record<ConsumerName, { readonly dead: number; readonly sent: boolean }>
>;

/**
 * Which consumers' inbox-dead alarms are OK now; undefined when that cannot be told (then
 * every gauge is sent, as it would be without this look).
 */
export type OkAlarms = () => Promise<ReadonlySet<ConsumerName> | undefined>;

/**
 * Counts each consumer's DEAD records from the inbox's sparse index and emits a gauge for each
 * consumer that has some, or whose alarm is not OK yet: the alarm keeps its state between data
 * points (missing data ignored), so it stays in ALARM until a zero arrives, once someone
 * redrove or discarded the records, and then OK needs no more zeros. An idle, healthy
 * pipeline therefore sends none: CloudWatch bills a custom metric for every hour it receives
 * data, which would be the full month at one point every few minutes.
 */
export async function emitInboxGauges(deps: {
  readonly inbox: Pick<InboxStore, 'openCounts'>;
  readonly metrics: Pick<Metrics, 'addMetric' | 'addDimension' | 'publishStoredMetrics'>;
  readonly consumers: readonly ConsumerName[];
  readonly okAlarms?: OkAlarms;
}): Promise<InboxGaugeReport> {
  const [counts, ok] = await Promise.all([
    Promise.all(deps.consumers.map((c) => deps.inbox.openCounts(c))),
    deps.okAlarms ? deps.okAlarms().catch(() => undefined) : Promise.resolve(undefined),
  ]);
  const report: Record<string, { dead: number; sent: boolean }> = {};
  deps.consumers.forEach((consumer, i) => {
    const dead = counts[i]?.DEAD ?? 0;
    const sent = dead > 0 || !ok?.has(consumer);
    report[consumer] = { dead, sent };
    if (!sent) return;
    // One EMF document per consumer: the dimension differs.
    deps.metrics.addDimension(consumerDimension, consumer);
    deps.metrics.addMetric(inboxGaugeMetricNames.dead, MetricUnit.Count, dead);
    deps.metrics.publishStoredMetrics();
  });
  return report as InboxGaugeReport;
}
