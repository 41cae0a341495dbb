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

/**
 * Adds one run's figures to `metrics` (flushed as EMF by the handler's middleware). Gauges
 * (pending, oldest age, dead) are what the alarms watch; an invocation that never gets here
 * leaves the age metric missing, which the alarm treats as breaching.
 */
export function addRelayMetrics(metrics: Metrics, report: RunReport): void {
  metrics.addMetric(relayMetricNames.pending, MetricUnit.Count, report.stats.pending);
  metrics.addMetric(
    relayMetricNames.oldestPendingAge,
    MetricUnit.Seconds,
    report.stats.oldestPendingAgeSeconds,
  );
  metrics.addMetric(relayMetricNames.dead, MetricUnit.Count, report.stats.dead);
  metrics.addMetric(relayMetricNames.published, MetricUnit.Count, report.published);
  metrics.addMetric(relayMetricNames.failed, MetricUnit.Count, report.failed);
  metrics.addMetric(relayMetricNames.newlyDead, MetricUnit.Count, report.dead);
  metrics.addMetric(relayMetricNames.expiredLeases, MetricUnit.Count, report.expiredLeases);
  metrics.addMetric(relayMetricNames.fencedOut, MetricUnit.Count, report.fencedOut);
  metrics.addMetric(relayMetricNames.purged, MetricUnit.Count, report.purged);
}
