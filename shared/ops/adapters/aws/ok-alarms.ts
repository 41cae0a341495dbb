import { type CloudWatchClient, DescribeAlarmsCommand } from '@aws-sdk/client-cloudwatch';
import * as z from 'zod';
import { blankIsUnset, jsonVariable } from '../../../env';

/**
 * The environment variable of a function that emits gauges only while they matter (the inbox
 * gauges, the delivery audit): JSON `{ "<alarm id>": "<alarm name>" }`, the alarms its gauges feed.
 */
export const gaugeAlarmsEnv = 'GAUGE_ALARMS';

/** The schema of {@link gaugeAlarmsEnv}, for a handler's `parseEnvironment`. */
export const gaugeAlarmsVariable = blankIsUnset(
  jsonVariable(
    z
      .record(z.string().min(1).max(255), z.string().min(1).max(255))
      .refine((m) => Object.keys(m).length <= 100, 'at most 100 alarms (one DescribeAlarms call)'),
  ),
);

/**
 * Reads which of `alarms` (id to name) are OK now, by name (IAM grants DescribeAlarms on each
 * alarm's ARN; a read by prefix would need `alarm:*`). Returns the ids; undefined when there
 * are none to read or the read failed, which makes the caller send every gauge (it warns).
 */
export function cloudWatchOkAlarms(
  cloudwatch: CloudWatchClient,
  alarms: Readonly<Record<string, string>> | undefined,
  warn: (message: string, extra: Record<string, unknown>) => void,
): () => Promise<ReadonlySet<string> | undefined> {
  return async () => {
    if (!alarms || Object.keys(alarms).length === 0) return undefined;
    try {
      const out = await cloudwatch.send(new DescribeAlarmsCommand({ AlarmNames: Object.values(alarms) }));
      const ok = new Set(
        (out.MetricAlarms ?? []).filter((a) => a.StateValue === 'OK').map((a) => a.AlarmName),
      );
      return new Set(Object.keys(alarms).filter((id) => ok.has(alarms[id])));
    } catch (err) {
      warn('cannot read the alarms the gauges feed; sending every gauge', { error: err });
      return undefined;
    }
  };
}
