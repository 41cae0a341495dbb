import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { consumerDimension, inboxGaugeMetricNames } from '../consumers/contract';
import type { ConsumerName } from '../topology';
import { type InboxHealth, inboxHealth } from './inbox-health';
import type { InboxStore } from './inbox-store';

/** The gauges that go out together, each group watched by one alarm (`inbox-dead`, `inbox-oldest-lease`, `inbox-retry-age`). */
export type InboxGaugeGroup = 'dead' | 'lease' | 'retry';

/** Every gauge group, in the order the alarms are listed. */
export const inboxGaugeGroups: readonly InboxGaugeGroup[] = ['dead', 'lease', 'retry'];

/** What one gauge run read (per consumer) and which groups it sent (the function's return value, for a test invoke). */
export interface InboxGaugeReport {
  readonly consumers: Readonly<Record<ConsumerName, InboxHealth>>;
  readonly sent: readonly InboxGaugeGroup[];
}

/**
 * Which groups' alarms are OK now; undefined when that cannot be told (then every group is
 * sent, as it would be without this look).
 */
export type OkAlarms = () => Promise<ReadonlySet<InboxGaugeGroup> | undefined>;

/** A group's metrics and the value of each for one consumer, or for all of them together. */
const groupMetrics: Readonly<
  Record<
    InboxGaugeGroup,
    readonly {
      readonly name: string;
      readonly unit: MetricUnit;
      readonly of: (h: InboxHealth) => number;
      /** All consumers together: the sum of counts, the largest of ages. */
      readonly combine: 'sum' | 'max';
    }[]
  >
> = {
  dead: [{ name: inboxGaugeMetricNames.dead, unit: MetricUnit.Count, of: (h) => h.dead, combine: 'sum' }],
  lease: [
    {
      name: inboxGaugeMetricNames.oldestLease,
      unit: MetricUnit.Seconds,
      of: (h) => h.oldestLeaseSeconds ?? 0,
      combine: 'max',
    },
  ],
  retry: [
    {
      name: inboxGaugeMetricNames.retryAge,
      unit: MetricUnit.Seconds,
      of: (h) => h.oldestRetryAgeSeconds ?? 0,
      combine: 'max',
    },
    { name: inboxGaugeMetricNames.failed, unit: MetricUnit.Count, of: (h) => h.failed, combine: 'sum' },
  ],
};

/**
 * Reads each consumer's figures from the inbox's operator index (one Query per shard and
 * status while nothing is open) and emits each group of gauges, per consumer and for all of
 * them together, when any of its values is above zero or its alarm is not OK yet: an alarm
 * keeps its state between data points (missing data ignored), so it stays in ALARM until a
 * zero arrives, and then OK needs no more zeros. An idle, healthy pipeline therefore sends
 * none: CloudWatch bills a custom metric for every hour it receives data, which would be the
 * full month at one point every few minutes. An attempt in flight for less than a second
 * shows as a lease of 0 s, so a busy, healthy consumer sends no lease gauge either.
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
  const health = open.map((figures) => inboxHealth(figures, now));
  const sent = inboxGaugeGroups.filter(
    (group) =>
      !ok?.has(group) || groupMetrics[group].some((m) => health.some((h) => m.of(h) > 0)),
  );
  const metrics = sent.flatMap((group) => groupMetrics[group]);
  if (metrics.length > 0) {
    // One EMF document per consumer (the dimension differs), and one for all of them.
    deps.consumers.forEach((consumer, i) => {
      deps.metrics.addDimension(consumerDimension, consumer);
      for (const m of metrics) deps.metrics.addMetric(m.name, m.unit, m.of(health[i] as InboxHealth));
      deps.metrics.publishStoredMetrics();
    });
    for (const m of metrics) {
      const values = health.map(m.of);
      const all = m.combine === 'sum' ? values.reduce((a, b) => a + b, 0) : Math.max(0, ...values);
      deps.metrics.addMetric(m.name, m.unit, all);
    }
    deps.metrics.publishStoredMetrics();
  }
  return {
    consumers: Object.fromEntries(deps.consumers.map((c, i) => [c, health[i]])) as Record<
      ConsumerName,
      InboxHealth
    >,
    sent,
  };
}
