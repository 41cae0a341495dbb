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
 * Adds one run's figures to `metrics` (flushed as EMF by the handler's middleware).
 * `OldestPendingAgeSeconds` and `DeadEvents` go out after every run: `relay-silent` counts the
 * age's samples (a relay that stops sending them alarms), and `outbox-dead` keeps its state
 * between points (missing data ignored), so it needs the zero after a redrive to clear.
 * `PendingEvents` has no alarm and goes out only while above zero, like the counters: CloudWatch
 * bills a custom metric for every hour it receives data
 * (https://aws.amazon.com/cloudwatch/pricing/), and an hourly sweep would keep it billed all
 * month for a graph of zeros. The dashboard draws it through `FILL(m, 0)`, so an hour without a
 * point reads 0 (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html).
 * An idle pipeline therefore pays for two metrics, not nine.
 */
export function addRelayMetrics(metrics: Metrics, report: RunReport): void {
  metrics.addMetric(
    relayMetricNames.oldestPendingAge,
    MetricUnit.Seconds,
    report.stats.oldestPendingAgeSeconds,
  );
  metrics.addMetric(relayMetricNames.dead, MetricUnit.Count, report.stats.dead);
  const sentWhileAboveZero: [keyof typeof relayMetricNames, number][] = [
    ['pending', report.stats.pending],
    ['published', report.published],
    ['failed', report.failed],
    ['newlyDead', report.dead],
    ['expiredLeases', report.expiredLeases],
    ['fencedOut', report.fencedOut],
    ['purged', report.purged],
  ];
  for (const [name, value] of sentWhileAboveZero) {
    if (value > 0) metrics.addMetric(relayMetricNames[name], MetricUnit.Count, value);
  }
}
