import {
  type CloudWatchClient,
  DescribeAlarmsCommand,
  GetMetricDataCommand,
} from '@aws-sdk/client-cloudwatch';
import type { AlarmState, PipelineHealth, RelayHealth } from '../../ops-ports';

export interface CloudWatchHealthOptions {
  /** Every alarm of the stack starts with this (`ContentPipeline-sandbox-`); it is cut from the keys. */
  readonly alarmPrefix: string;
  /**
   * The stack's alarms, read by name (at most 100): IAM authorizes a DescribeAlarms by prefix
   * against `alarm:*`, by name against each alarm's ARN, which is all this function is granted.
   */
  readonly alarmNames: readonly string[];
  /** The relay function, whose AWS/Lambda Invocations and Errors tell when it last ran. */
  readonly relayFunctionName: string;
  /** How far back the relay's health looks. @default 3 hours (longer than the safety sweep period) */
  readonly lookbackMs?: number;
  readonly clock?: () => number;
}

const states = new Set<AlarmState>(['OK', 'ALARM', 'INSUFFICIENT_DATA']);

/**
 * The deployed stack's alarms (DescribeAlarms by their names) and the relay's last
 * run and errors from AWS/Lambda metrics. CloudWatch evaluates the alarms; the figures the
 * local runtime passes to its own evaluation are not needed here.
 */
export class CloudWatchHealth implements PipelineHealth {
  private readonly clock: () => number;

  constructor(
    private readonly cloudwatch: CloudWatchClient,
    private readonly options: CloudWatchHealthOptions,
  ) {
    this.clock = options.clock ?? Date.now;
  }

  async alarms(): Promise<Record<string, AlarmState>> {
    const out: Record<string, AlarmState> = {};
    if (this.options.alarmNames.length === 0) return out;
    let nextToken: string | undefined;
    do {
      const page = await this.cloudwatch.send(
        new DescribeAlarmsCommand({ AlarmNames: [...this.options.alarmNames], NextToken: nextToken }),
      );
      for (const alarm of [...(page.MetricAlarms ?? []), ...(page.CompositeAlarms ?? [])]) {
        if (!alarm.AlarmName) continue;
        const state = alarm.StateValue as AlarmState | undefined;
        const name = alarm.AlarmName;
        out[name.startsWith(this.options.alarmPrefix) ? name.slice(this.options.alarmPrefix.length) : name] =
          state && states.has(state) ? state : 'INSUFFICIENT_DATA';
      }
      nextToken = page.NextToken;
    } while (nextToken);
    return out;
  }

  async relay(): Promise<RelayHealth> {
    const end = new Date(this.clock());
    const start = new Date(end.getTime() - (this.options.lookbackMs ?? 3 * 3600_000));
    const metric = (id: string, name: string) => ({
      Id: id,
      MetricStat: {
        Metric: {
          Namespace: 'AWS/Lambda',
          MetricName: name,
          Dimensions: [{ Name: 'FunctionName', Value: this.options.relayFunctionName }],
        },
        Period: 60,
        Stat: 'Sum',
      },
    });
    const out = await this.cloudwatch.send(
      new GetMetricDataCommand({
        StartTime: start,
        EndTime: end,
        MetricDataQueries: [metric('invocations', 'Invocations'), metric('errors', 'Errors')],
        ScanBy: 'TimestampDescending',
      }),
    );
    const series = (id: string) => out.MetricDataResults?.find((r) => r.Id === id);
    const invocations = series('invocations');
    let lastRunAt: string | null = null;
    for (const [i, value] of (invocations?.Values ?? []).entries()) {
      const at = invocations?.Timestamps?.[i];
      if (value > 0 && at && (lastRunAt === null || at.toISOString() > lastRunAt))
        lastRunAt = at.toISOString();
    }
    const errors = (series('errors')?.Values ?? []).reduce((n, v) => n + v, 0);
    return { lastRunAt, errors };
  }
}
