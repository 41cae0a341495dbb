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
  /** Events given back unpublished because the transport refused their round as a whole (no attempt counted). */
  held: 'HeldEvents',
  /** Times a run opened the circuit: the transport (the bus, PutEvents) refused everything. */
  circuitOpened: 'CircuitOpened',
  /** Times a probe was accepted and closed the circuit. */
  circuitClosed: 'CircuitClosed',
  /** Probes the transport refused while the circuit was open. */
  failedProbes: 'FailedProbes',
} as const;

/** The CloudWatch namespace of every pipeline metric. */
export const metricsNamespace = 'ContentPipeline';

/** Powertools service name of the relay: the `service` dimension of every relay metric. */
export const relayServiceName = 'outbox-relay';

/** What an invocation's runs did to the transport's circuit. */
export interface CircuitCounts {
  /** A run opened it. */
  readonly opened: boolean;
  /** A run's probe closed it. */
  readonly closed: boolean;
  /** Probes the transport refused. */
  readonly failedProbes: number;
}

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
 * An idle pipeline therefore pays for two metrics, not nine. The circuit's counters go out
 * likewise, only in a run that opened it, probed or closed it.
 */
export function addRelayMetrics(metrics: Metrics, report: RunReport, circuit?: CircuitCounts): void {
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
    ['held', report.held],
    ['circuitOpened', circuit?.opened ? 1 : 0],
    ['circuitClosed', circuit?.closed ? 1 : 0],
    ['failedProbes', circuit?.failedProbes ?? 0],
  ];
  for (const [name, value] of sentWhileAboveZero) {
    if (value > 0) metrics.addMetric(relayMetricNames[name], MetricUnit.Count, value);
  }
}
