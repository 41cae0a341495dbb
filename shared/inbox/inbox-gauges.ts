import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { consumerDimension, inboxGaugeMetricNames } from '../consumers/contract';
import { alarmIds } from '../ops/alarm-ids';
import type { ConsumerName } from '../topology';
import { type InboxHealth, inboxHealth } from './inbox-health';
import type { InboxStore } from './inbox-store';

/**
 * The gauges that go out together for one consumer, each group watched by one alarm of that
 * consumer: `dead` (`inbox-dead-<c>`), `lease` (`inbox-oldest-lease-<c>`), `retry`
 * (`inbox-retry-age-<c>`; the FAILED count rides along, for the dashboard).
 */
export type InboxGaugeGroup = 'dead' | 'lease' | 'retry';

/** Every gauge group, in the order the alarms are listed. */
export const inboxGaugeGroups: readonly InboxGaugeGroup[] = ['dead', 'lease', 'retry'];

/** The id of the alarm that watches `group` of `consumer` (the same id on AWS and locally). */
export function inboxGaugeAlarmId(group: InboxGaugeGroup, consumer: string): string {
  switch (group) {
    case 'dead':
      return alarmIds.inboxDead(consumer);
    case 'lease':
      return alarmIds.inboxOldestLease(consumer);
    case 'retry':
      return alarmIds.inboxRetryAge(consumer);
  }
}

/** What one gauge run read and sent, per consumer (the function's return value, for a test invoke). */
export type InboxGaugeReport = Readonly<
  Record<ConsumerName, InboxHealth & { readonly sent: readonly InboxGaugeGroup[] }>
>;

/**
 * The ids of the alarms ({@link inboxGaugeAlarmId}) that are OK now; undefined when that cannot
 * be told (then every group is sent, as it would be without this look).
 */
export type OkAlarms = () => Promise<ReadonlySet<string> | undefined>;

/** A gauge of a group: its metric, its unit and its value in one consumer's figures. */
interface Gauge {
  readonly name: string;
  readonly unit: (typeof MetricUnit)[keyof typeof MetricUnit];
  readonly of: (h: InboxHealth) => number;
}

const groupGauges: Readonly<Record<InboxGaugeGroup, readonly Gauge[]>> = {
  dead: [{ name: inboxGaugeMetricNames.dead, unit: MetricUnit.Count, of: (h) => h.dead }],
  lease: [
    {
      name: inboxGaugeMetricNames.oldestLease,
      unit: MetricUnit.Seconds,
      of: (h) => h.oldestLeaseSeconds ?? 0,
    },
  ],
  retry: [
    {
      name: inboxGaugeMetricNames.retryAge,
      unit: MetricUnit.Seconds,
      of: (h) => h.oldestRetryAgeSeconds ?? 0,
    },
    { name: inboxGaugeMetricNames.failed, unit: MetricUnit.Count, of: (h) => h.failed },
  ],
};

/**
 * Reads each consumer's figures from the inbox's operator index (one Query per shard and
 * status while nothing is open) and emits, per consumer, each group of gauges that has a value
 * above zero or whose alarm is not OK yet: an alarm keeps its state between data points
 * (missing data ignored), so it stays in ALARM until a zero arrives, and then OK needs no more
 * zeros. An idle, healthy pipeline therefore sends none: CloudWatch bills a custom metric for
 * every hour it receives data, which would be the full month at one point every few minutes.
 * Ages are whole seconds, so an attempt in flight for less than a second sends no lease gauge.
 */
export async function emitInboxGauges(deps: {
  readonly inbox: Pick<InboxStore, 'openFigures'>;
  readonly metrics: Pick<Metrics, 'addMetric' | 'addDimension' | 'publishStoredMetrics'>;
  readonly consumers: readonly ConsumerName[];
  readonly okAlarms?: OkAlarms;
  /** Epoch ms; `Date.now` by default. */
  readonly clock?: () => number;
}): Promise<InboxGaugeReport> {
  const [open, ok] = await Promise.all([
    Promise.all(deps.consumers.map((c) => deps.inbox.openFigures(c))),
    deps.okAlarms ? deps.okAlarms().catch(() => undefined) : Promise.resolve(undefined),
  ]);
  const now = (deps.clock ?? Date.now)();
  const report: Record<string, InboxHealth & { sent: InboxGaugeGroup[] }> = {};
  deps.consumers.forEach((consumer, i) => {
    const health = inboxHealth(open[i] as (typeof open)[number], now);
    const sent = inboxGaugeGroups.filter(
      (group) =>
        !ok?.has(inboxGaugeAlarmId(group, consumer)) || groupGauges[group].some((g) => g.of(health) > 0),
    );
    report[consumer] = { ...health, sent };
    if (sent.length === 0) return;
    // One EMF document per consumer: the dimension differs.
    deps.metrics.addDimension(consumerDimension, consumer);
    for (const g of sent.flatMap((group) => groupGauges[group]))
      deps.metrics.addMetric(g.name, g.unit, g.of(health));
    deps.metrics.publishStoredMetrics();
  });
  return report as unknown as InboxGaugeReport;
}
