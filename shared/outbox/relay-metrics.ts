import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { RunReport } from './relay';

/** Metric names the relay emits; the CDK alarms and dashboard read the same constants. */
export const relayMetricNames = {
  pending: 'PendingEvents',
  oldestPendingAge: 'OldestPendingAgeSeconds',
  dead: 'DeadEvents',
  published: 'PublishedEvents',
  failed: 'FailedPublishes',
  newlyDead: 'DeadLetteredEvents',
  expiredLeases: 'ExpiredLeases',
  fencedOut: 'FencedOutSettles',
  purged: 'PurgedEvents',
} as const;

/** The CloudWatch namespace of every pipeline metric. */
export const metricsNamespace = 'ContentPipeline';

/** Powertools service name of the relay: the `service` dimension of every relay metric. */
export const relayServiceName = 'outbox-relay';

/**
 * Adds one run's figures to `metrics` (flushed as EMF by the handler's middleware). The gauges
 * (pending, oldest age, dead) go out after every run: the alarms watch them, and a relay that
 * stops sending them is `relay-silent`. The counters go out only when they are not zero: a
 * missing count means none, and CloudWatch bills a custom metric only for the hours it gets
 * data, so an idle pipeline pays for three metrics, not nine.
 */
export function addRelayMetrics(metrics: Metrics, report: RunReport): void {
  metrics.addMetric(relayMetricNames.pending, MetricUnit.Count, report.stats.pending);
  metrics.addMetric(
    relayMetricNames.oldestPendingAge,
    MetricUnit.Seconds,
    report.stats.oldestPendingAgeSeconds,
  );
  metrics.addMetric(relayMetricNames.dead, MetricUnit.Count, report.stats.dead);
  const counters: [keyof typeof relayMetricNames, number][] = [
    ['published', report.published],
    ['failed', report.failed],
    ['newlyDead', report.dead],
    ['expiredLeases', report.expiredLeases],
    ['fencedOut', report.fencedOut],
    ['purged', report.purged],
  ];
  for (const [name, value] of counters) {
    if (value > 0) metrics.addMetric(relayMetricNames[name], MetricUnit.Count, value);
  }
}
