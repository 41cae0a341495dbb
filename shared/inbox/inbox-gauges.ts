import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { consumerDimension, inboxGaugeMetricNames } from '../consumers/contract';
import { alarmIds } from '../ops/alarm-ids';
import type { ConsumerName } from '../topology';
import { type InboxHealth, inboxHealth } from './inbox-health';
import type { InboxOps } from './inbox-ops';

/**
 * The gauges that go out together, each group watched by one alarm for all consumers at once:
 * `dead` (`inbox-dead`), `lease` (`inbox-oldest-lease`) and `retry` (`inbox-retry-age`, the
 * FAILED count riding along for the dashboard). The alarm watches a document without the
 * `Consumer` dimension that holds the count's sum (the largest age), sent beside each
 * consumer's own for the dashboard. One alarm per figure rather than per consumer: CloudWatch
 * bills each.
 */
export type InboxGaugeGroup = 'dead' | 'lease' | 'retry';

/** Every gauge group, in the order the alarms are listed. */
export const inboxGaugeGroups: readonly InboxGaugeGroup[] = ['dead', 'lease', 'retry'];

/** The alarm each gauge group feeds. */
const groupAlarm: Readonly<Record<InboxGaugeGroup, string>> = {
  dead: alarmIds.inboxDead,
  lease: alarmIds.inboxOldestLease,
  retry: alarmIds.inboxRetryAge,
};

/** The ids of the alarms the gauges feed (`inbox-dead`, `inbox-oldest-lease`, `inbox-retry-age`). */
export function inboxGaugeAlarmIds(): string[] {
  return inboxGaugeGroups.map((group) => groupAlarm[group]);
}

/** What one gauge run read per consumer and which groups it sent (the function's return value, for a test invoke). */
export interface InboxGaugeReport {
  readonly consumers: Readonly<Record<ConsumerName, InboxHealth>>;
  /** The groups sent (`dead`, `lease`, `retry`), each for every consumer and for all of them. */
  readonly sent: readonly InboxGaugeGroup[];
}

/**
 * The ids of the alarms that are OK now; undefined when that cannot be told (then every group
 * is sent, as it would be without this look).
 */
export type OkAlarms = () => Promise<ReadonlySet<string> | undefined>;

/** A gauge: its metric, its unit, its value in one consumer's figures, and how consumers combine. */
interface Gauge {
  readonly name: string;
  readonly unit: (typeof MetricUnit)[keyof typeof MetricUnit];
  readonly of: (h: InboxHealth) => number;
  readonly all: 'max' | 'sum';
}

const gauges = {
  dead: { name: inboxGaugeMetricNames.dead, unit: MetricUnit.Count, of: (h) => h.dead, all: 'sum' },
  lease: {
    name: inboxGaugeMetricNames.oldestLease,
    unit: MetricUnit.Seconds,
    of: (h) => h.oldestLeaseSeconds ?? 0,
    all: 'max',
  },
  retry: {
    name: inboxGaugeMetricNames.retryAge,
    unit: MetricUnit.Seconds,
    of: (h) => h.oldestRetryAgeSeconds ?? 0,
    all: 'max',
  },
  failed: { name: inboxGaugeMetricNames.failed, unit: MetricUnit.Count, of: (h) => h.failed, all: 'sum' },
} as const satisfies Record<string, Gauge>;

/** The gauges of each group. */
const groupGauges: Readonly<Record<InboxGaugeGroup, readonly Gauge[]>> = {
  dead: [gauges.dead],
  lease: [gauges.lease],
  retry: [gauges.retry, gauges.failed],
};

/**
 * Reads each consumer's figures from the inbox's operator index (one Query per shard and
 * status while nothing is open) and emits each group that has a value above zero or whose
 * alarm is not OK yet: an alarm keeps its state between data points (missing data ignored), so
 * it stays in ALARM until a zero arrives, and then OK needs no more zeros. An idle, healthy
 * pipeline therefore sends none: CloudWatch bills a custom metric for every hour it receives
 * data, which would be the full month at one point every few minutes. Ages are whole seconds,
 * so an attempt in flight for less than a second sends no lease gauge.
 */
export async function emitInboxGauges(deps: {
  readonly inbox: Pick<InboxOps, 'openFigures'>;
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
  const health = open.map((figures) => inboxHealth(figures, now));
  const groups = inboxGaugeGroups.filter(
    (group) => !ok?.has(groupAlarm[group]) || groupGauges[group].some((g) => health.some((h) => g.of(h) > 0)),
  );
  if (groups.length > 0) {
    const sending = groups.flatMap((group) => groupGauges[group]);
    // One EMF document per consumer (the dimension differs), then one for all of them.
    deps.consumers.forEach((consumer, i) => {
      const h = health[i] as InboxHealth;
      deps.metrics.addDimension(consumerDimension, consumer);
      for (const g of sending) deps.metrics.addMetric(g.name, g.unit, g.of(h));
      deps.metrics.publishStoredMetrics();
    });
    for (const g of sending) {
      const values = health.map(g.of);
      deps.metrics.addMetric(
        g.name,
        g.unit,
        g.all === 'max' ? Math.max(0, ...values) : values.reduce((a, b) => a + b, 0),
      );
    }
    deps.metrics.publishStoredMetrics();
  }
  return {
    consumers: Object.fromEntries(deps.consumers.map((c, i) => [c, health[i]])) as Record<
      ConsumerName,
      InboxHealth
    >,
    sent: groups,
  };
}
