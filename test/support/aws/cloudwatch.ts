import type { CallRecorder } from './calls';
import { closeServer, type LocalEndpoint, listenOnLoopback } from './http';
import {
  asArray,
  asObject,
  type JsonObject,
  numberField,
  parseJsonObject,
  stringField,
  stringsField,
} from './json';
import { awsJsonHandler, unknownOperation } from './json-service';
import { AwsFault, type AwsJsonProtocol } from './protocol';

// The installed @aws-sdk/client-cloudwatch speaks awsJson1_0 (query-compatible), not awsQuery:
// `protocol: AwsJson1_0Protocol`, `serviceTarget: "GraniteServiceVersion20100801"`,
// `awsQueryCompatible: true` in its dist-cjs/index.js. Timestamps travel as epoch seconds.
const protocol: AwsJsonProtocol = { version: '1.0', queryCompatible: true };
const targetPrefix = 'GraniteServiceVersion20100801';

/** An alarm state. */
export type AlarmState = 'OK' | 'ALARM' | 'INSUFFICIENT_DATA';
const alarmStates: readonly string[] = ['OK', 'ALARM', 'INSUFFICIENT_DATA'];

/** A metric dimension. */
export interface Dimension {
  readonly name: string;
  readonly value: string;
}

/** A metric alarm that exists from the start (what the template declares). */
export interface AlarmDefinition {
  readonly name: string;
  /** @default `arn:aws:cloudwatch:<region>:<account>:alarm:<name>` */
  readonly arn?: string;
  /** @default 'INSUFFICIENT_DATA' */
  readonly state?: AlarmState;
  readonly stateReason?: string;
  readonly namespace?: string;
  readonly metricName?: string;
  readonly dimensions?: readonly Dimension[];
  readonly statistic?: string;
  readonly period?: number;
  readonly evaluationPeriods?: number;
  readonly threshold?: number;
  readonly comparisonOperator?: string;
  readonly treatMissingData?: string;
  readonly alarmActions?: readonly string[];
  readonly okActions?: readonly string[];
}

/** An alarm as it stands now. */
export interface AlarmView extends AlarmDefinition {
  readonly arn: string;
  readonly state: AlarmState;
  readonly stateReason: string;
  readonly stateUpdatedAt: Date;
}

/** Which metric a series belongs to. */
export interface MetricId {
  readonly namespace: string;
  readonly metricName: string;
  readonly dimensions?: readonly Dimension[];
}

/** Points aggregated at one timestamp: one PutMetricData datum, or one registered point. */
export interface MetricSample extends MetricId {
  readonly timestamp: Date;
  readonly sum: number;
  readonly sampleCount: number;
  readonly minimum: number;
  readonly maximum: number;
}

/** How the CloudWatch stand-in is set up. */
export interface CloudWatchStandinOptions {
  readonly recorder: CallRecorder;
  readonly alarms?: readonly AlarmDefinition[];
}

/** A running CloudWatch stand-in. */
export interface CloudWatchStandin extends LocalEndpoint {
  addAlarm(alarm: AlarmDefinition): void;
  alarm(name: string): AlarmView | undefined;
  /** Every sample kept, from PutMetricData and from `addDatapoints`. */
  readonly samples: readonly MetricSample[];
  /** Registers points of a series for GetMetricData to answer from. */
  addDatapoints(
    metric: MetricId,
    points: readonly { readonly timestamp: Date; readonly value: number }[],
  ): void;
}

interface Alarm extends AlarmDefinition {
  readonly arn: string;
  state: AlarmState;
  stateReason: string;
  stateUpdatedAt: Date;
}

const invalidValue = (message: string) =>
  new AwsFault('InvalidParameterValueException', message, 400, { queryCode: 'InvalidParameterValue' });

function dimensionsOf(value: unknown): Dimension[] {
  return asArray(value).map((d) => {
    const o = asObject(d);
    return { name: stringField(o, 'Name') ?? '', value: stringField(o, 'Value') ?? '' };
  });
}

const dimensionKey = (dimensions: readonly Dimension[] = []) =>
  dimensions
    .map((d) => `${d.name}=${d.value}`)
    .sort()
    .join('\n');

function sameMetric(a: MetricId, b: MetricId): boolean {
  return (
    a.namespace === b.namespace &&
    a.metricName === b.metricName &&
    dimensionKey(a.dimensions) === dimensionKey(b.dimensions)
  );
}

/** One PutMetricData datum as a sample: Value, Values/Counts or StatisticValues. */
function sampleOf(namespace: string, datum: JsonObject): MetricSample {
  const metricName = stringField(datum, 'MetricName') ?? '';
  const timestamp = new Date((numberField(datum, 'Timestamp') ?? Date.now() / 1_000) * 1_000);
  const base = { namespace, metricName, dimensions: dimensionsOf(datum.Dimensions), timestamp };
  const stats = asObject(datum.StatisticValues);
  if (Object.keys(stats).length > 0) {
    return {
      ...base,
      sum: numberField(stats, 'Sum') ?? 0,
      sampleCount: numberField(stats, 'SampleCount') ?? 0,
      minimum: numberField(stats, 'Minimum') ?? 0,
      maximum: numberField(stats, 'Maximum') ?? 0,
    };
  }
  const values = asArray(datum.Values).filter((v): v is number => typeof v === 'number');
  if (values.length > 0) {
    const counts = asArray(datum.Counts);
    let sum = 0;
    let sampleCount = 0;
    values.forEach((v, i) => {
      const c = typeof counts[i] === 'number' ? (counts[i] as number) : 1;
      sum += v * c;
      sampleCount += c;
    });
    return { ...base, sum, sampleCount, minimum: Math.min(...values), maximum: Math.max(...values) };
  }
  const value = numberField(datum, 'Value');
  if (value === undefined) {
    throw new AwsFault(
      'MissingRequiredParameterException',
      `The parameter MetricData.member.Value is required.`,
      400,
      {
        queryCode: 'MissingParameter',
      },
    );
  }
  return { ...base, sum: value, sampleCount: 1, minimum: value, maximum: value };
}

function statistic(samples: readonly MetricSample[], stat: string): number {
  switch (stat) {
    case 'Sum':
      return samples.reduce((n, s) => n + s.sum, 0);
    case 'SampleCount':
      return samples.reduce((n, s) => n + s.sampleCount, 0);
    case 'Maximum':
      return Math.max(...samples.map((s) => s.maximum));
    case 'Minimum':
      return Math.min(...samples.map((s) => s.minimum));
    case 'Average': {
      const count = samples.reduce((n, s) => n + s.sampleCount, 0);
      return count === 0 ? 0 : samples.reduce((n, s) => n + s.sum, 0) / count;
    }
    default:
      throw invalidValue(`The local CloudWatch stand-in does not compute the statistic ${stat}.`);
  }
}

/** NextToken: the offset of the next page, opaque to callers. */
const encodeToken = (offset: number) => Buffer.from(JSON.stringify({ offset })).toString('base64url');
function decodeToken(token: string): number {
  const offset = numberField(parseJsonObject(Buffer.from(token, 'base64url')) ?? {}, 'offset');
  if (offset === undefined || !Number.isInteger(offset) || offset < 0) {
    throw new AwsFault('InvalidNextToken', 'The service returned an invalid NextToken.', 400);
  }
  return offset;
}

/**
 * Starts a CloudWatch stand-in on 127.0.0.1: DescribeAlarms (AlarmNames or AlarmNamePrefix,
 * StateValue, MaxRecords / NextToken), SetAlarmState, PutMetricData (kept as samples, gzip
 * bodies included) and GetMetricData over MetricStat queries (Sum, SampleCount, Maximum,
 * Minimum, Average; periods a multiple of 60 s, epoch-aligned; newest first unless
 * `ScanBy: TimestampAscending`). Calls are recorded as `cloudwatch:<Op>` on the alarm ARNs they
 * address, `*` for metric operations.
 */
export async function startCloudWatchStandin(options: CloudWatchStandinOptions): Promise<CloudWatchStandin> {
  const { recorder } = options;
  const alarms = new Map<string, Alarm>();
  const samples: MetricSample[] = [];
  const alarmArn = (name: string) => recorder.arn('cloudwatch', `alarm:${name}`);

  function addAlarm(definition: AlarmDefinition): void {
    alarms.set(definition.name, {
      ...definition,
      arn: definition.arn ?? alarmArn(definition.name),
      state: definition.state ?? 'INSUFFICIENT_DATA',
      stateReason: definition.stateReason ?? 'Unchecked: Initial alarm creation',
      stateUpdatedAt: new Date(),
    });
  }
  for (const a of options.alarms ?? []) addAlarm(a);

  function alarmJson(a: Alarm): JsonObject {
    return {
      AlarmName: a.name,
      AlarmArn: a.arn,
      ActionsEnabled: true,
      OKActions: a.okActions ?? [],
      AlarmActions: a.alarmActions ?? [],
      InsufficientDataActions: [],
      StateValue: a.state,
      StateReason: a.stateReason,
      StateUpdatedTimestamp: a.stateUpdatedAt.getTime() / 1_000,
      StateTransitionedTimestamp: a.stateUpdatedAt.getTime() / 1_000,
      ...(a.metricName !== undefined ? { MetricName: a.metricName } : {}),
      ...(a.namespace !== undefined ? { Namespace: a.namespace } : {}),
      ...(a.statistic !== undefined ? { Statistic: a.statistic } : {}),
      Dimensions: (a.dimensions ?? []).map((d) => ({ Name: d.name, Value: d.value })),
      ...(a.period !== undefined ? { Period: a.period } : {}),
      ...(a.evaluationPeriods !== undefined ? { EvaluationPeriods: a.evaluationPeriods } : {}),
      ...(a.threshold !== undefined ? { Threshold: a.threshold } : {}),
      ...(a.comparisonOperator !== undefined ? { ComparisonOperator: a.comparisonOperator } : {}),
      ...(a.treatMissingData !== undefined ? { TreatMissingData: a.treatMissingData } : {}),
    };
  }

  function describeAlarms(body: JsonObject): JsonObject {
    const names = stringsField(body, 'AlarmNames');
    const prefix = stringField(body, 'AlarmNamePrefix');
    if (names.length > 0 && prefix !== undefined) {
      throw new AwsFault(
        'InvalidParameterCombinationException',
        'AlarmNames and AlarmNamePrefix cannot be specified together.',
        400,
        { queryCode: 'InvalidParameterCombination' },
      );
    }
    const state = stringField(body, 'StateValue');
    const maxRecords = numberField(body, 'MaxRecords') ?? 50;
    if (!Number.isInteger(maxRecords) || maxRecords < 1 || maxRecords > 100) {
      throw invalidValue('The parameter MaxRecords must be between 1 and 100.');
    }
    const types = stringsField(body, 'AlarmTypes');
    // "If you omit this parameter, only metric alarms are returned"; composite alarms are not modelled.
    const matching =
      types.length > 0 && !types.includes('MetricAlarm')
        ? []
        : [...alarms.values()]
            .filter((a) => names.length === 0 || names.includes(a.name))
            .filter((a) => prefix === undefined || a.name.startsWith(prefix))
            .filter((a) => state === undefined || a.state === state)
            .sort((a, b) => a.name.localeCompare(b.name));
    const token = stringField(body, 'NextToken');
    const offset = token ? decodeToken(token) : 0;
    const page = matching.slice(offset, offset + maxRecords);
    const next = offset + maxRecords < matching.length ? { NextToken: encodeToken(offset + maxRecords) } : {};
    return { MetricAlarms: page.map(alarmJson), CompositeAlarms: [], ...next };
  }

  function setAlarmState(body: JsonObject): JsonObject {
    const name = stringField(body, 'AlarmName') ?? '';
    const state = stringField(body, 'StateValue') ?? '';
    const reason = stringField(body, 'StateReason');
    if (!alarmStates.includes(state)) {
      throw new AwsFault(
        'ValidationException',
        `1 validation error detected: Value '${state}' at 'stateValue' failed to satisfy constraint: Member must satisfy enum value set: [INSUFFICIENT_DATA, ALARM, OK]`,
        400,
        { queryCode: 'ValidationError' },
      );
    }
    if (reason === undefined) {
      throw new AwsFault('MissingRequiredParameterException', 'The parameter StateReason is required.', 400, {
        queryCode: 'MissingParameter',
      });
    }
    const reasonData = stringField(body, 'StateReasonData');
    if (reasonData !== undefined && parseJsonObject(reasonData) === undefined) {
      throw new AwsFault('InvalidFormatFault', 'StateReasonData is not valid JSON.', 400, {
        queryCode: 'InvalidFormat',
      });
    }
    const alarm = alarms.get(name);
    if (!alarm) throw new AwsFault('ResourceNotFound', `Alarm ${name} not found`, 404);
    alarm.state = state as AlarmState;
    alarm.stateReason = reason;
    alarm.stateUpdatedAt = new Date();
    return {};
  }

  function putMetricData(body: JsonObject): JsonObject {
    const namespace = stringField(body, 'Namespace');
    if (!namespace) {
      throw new AwsFault('MissingRequiredParameterException', 'The parameter Namespace is required.', 400, {
        queryCode: 'MissingParameter',
      });
    }
    for (const datum of asArray(body.MetricData)) samples.push(sampleOf(namespace, asObject(datum)));
    return {};
  }

  function getMetricData(body: JsonObject): JsonObject {
    const start = (numberField(body, 'StartTime') ?? 0) * 1_000;
    const end = (numberField(body, 'EndTime') ?? 0) * 1_000;
    const ascending = stringField(body, 'ScanBy') === 'TimestampAscending';
    const results = asArray(body.MetricDataQueries).map((q, n) => {
      const query = asObject(q);
      const id = stringField(query, 'Id') ?? '';
      const metricStat = asObject(query.MetricStat);
      if (Object.keys(metricStat).length === 0) {
        throw invalidValue(
          'The local CloudWatch stand-in evaluates MetricStat queries only, not metric math.',
        );
      }
      const metric = asObject(metricStat.Metric);
      const wanted: MetricId = {
        namespace: stringField(metric, 'Namespace') ?? '',
        metricName: stringField(metric, 'MetricName') ?? '',
        dimensions: dimensionsOf(metric.Dimensions),
      };
      const period = numberField(metricStat, 'Period') ?? 0;
      if (!Number.isInteger(period) || period <= 0 || period % 60 !== 0) {
        throw invalidValue(
          `The parameter MetricDataQueries.member.${n + 1}.MetricStat.Period must be a multiple of 60.`,
        );
      }
      const stat = stringField(metricStat, 'Stat') ?? '';
      const buckets = new Map<number, MetricSample[]>();
      for (const s of samples) {
        const t = s.timestamp.getTime();
        if (t < start || t >= end || !sameMetric(s, wanted)) continue;
        const bucket = Math.floor(t / (period * 1_000)) * period * 1_000;
        buckets.set(bucket, [...(buckets.get(bucket) ?? []), s]);
      }
      const times = [...buckets.keys()].sort((a, b) => (ascending ? a - b : b - a));
      const returnData = query.ReturnData !== false;
      return returnData
        ? {
            Id: id,
            Label: stringField(query, 'Label') ?? wanted.metricName,
            Timestamps: times.map((t) => t / 1_000),
            Values: times.map((t) => statistic(buckets.get(t) ?? [], stat)),
            StatusCode: 'Complete',
          }
        : undefined;
    });
    return { MetricDataResults: results.filter((r) => r !== undefined), Messages: [] };
  }

  function resourcesOf(operation: string, body: JsonObject): string[] {
    if (operation === 'SetAlarmState')
      return [
        alarms.get(stringField(body, 'AlarmName') ?? '')?.arn ??
          alarmArn(stringField(body, 'AlarmName') ?? ''),
      ];
    if (operation === 'DescribeAlarms') {
      const names = stringsField(body, 'AlarmNames');
      if (names.length > 0) return names.map((n) => alarms.get(n)?.arn ?? alarmArn(n));
      // Without names IAM checks the call against every alarm, prefix or not ("not authorized to
      // perform: cloudwatch:DescribeAlarms on resource: arn:aws:cloudwatch:<region>:<account>:alarm:*",
      // as reported in aws-samples/amazon-cloudwatch-auto-alarms#1).
      return [alarmArn('*')];
    }
    return ['*'];
  }

  const { server, endpoint } = await listenOnLoopback(
    awsJsonHandler({
      service: 'cloudwatch',
      protocol,
      targetPrefix,
      recorder,
      authorize: (operation, body) => ({ resources: resourcesOf(operation, body) }),
      serve(operation, body) {
        switch (operation) {
          case 'DescribeAlarms':
            return describeAlarms(body);
          case 'SetAlarmState':
            return setAlarmState(body);
          case 'PutMetricData':
            return putMetricData(body);
          case 'GetMetricData':
            return getMetricData(body);
          default:
            throw unknownOperation(operation);
        }
      },
    }),
  );

  return {
    endpoint,
    addAlarm,
    alarm: (name) => {
      const a = alarms.get(name);
      return a ? { ...a } : undefined;
    },
    samples,
    addDatapoints(metric, points) {
      for (const p of points) {
        samples.push({
          ...metric,
          timestamp: p.timestamp,
          sum: p.value,
          sampleCount: 1,
          minimum: p.value,
          maximum: p.value,
        });
      }
    },
    close: () => closeServer(server),
  };
}
