/**
 * A fresh stack's first deploy, as CloudFormation runs it, and the alarms it leaves standing.
 * Resources are created in an order CloudFormation may take (`creationOrder`: each after what it
 * depends on); as each is created, what it starts runs: the schema custom resource runs the
 * migrate function (which runs the relay once), a scheduled rule may fire at once (the worst
 * case: its first run right after creation), an event source mapping hands over what its queue
 * holds. Then every alarm of the template is judged on what those runs reported: the functions'
 * `Errors`, the EMF metrics they wrote, the queues' depths. An alarm in ALARM after a first
 * deploy that nothing went wrong in is a false alarm: it pages someone for nothing.
 */
import { creationOrder, transitiveDependencies } from './deploy-order';
import type { FunctionProcess } from './functions';
import type { CfnTemplate, TemplateResolver } from './template';

/** What the deploy's runs left for CloudWatch. */
export interface Observations {
  /** Per function (physical name): invocations and the ones that failed (Lambda's `Errors`). */
  readonly invocations: Map<string, { count: number; errors: number }>;
  /** Every EMF document the functions wrote. */
  readonly emf: readonly EmfDocument[];
  /** Visible messages in a queue (physical name) now. */
  readonly queueDepth: (queue: string) => number;
}

/** One embedded-metric-format document, flattened: its namespace, dimensions and values. */
export interface EmfDocument {
  readonly namespace: string;
  readonly dimensions: Readonly<Record<string, string>>;
  readonly values: Readonly<Record<string, number>>;
}

/** The EMF documents in a function's output (one JSON object per line with an `_aws` key). */
export function emfDocuments(output: readonly string[]): EmfDocument[] {
  const docs: EmfDocument[] = [];
  for (const line of output.join('').split('\n')) {
    if (!line.includes('"_aws"')) continue;
    let doc: Record<string, unknown>;
    try {
      doc = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue;
    }
    const directives = (doc._aws as { CloudWatchMetrics?: unknown[] } | undefined)?.CloudWatchMetrics ?? [];
    for (const d of directives as {
      Namespace: string;
      Dimensions: string[][];
      Metrics: { Name: string }[];
    }[]) {
      const names = [...new Set(d.Dimensions.flat())];
      docs.push({
        namespace: d.Namespace,
        dimensions: Object.fromEntries(names.map((n) => [n, String(doc[n])])),
        values: Object.fromEntries(
          d.Metrics.filter((m) => typeof doc[m.Name] === 'number').map((m) => [
            m.Name,
            doc[m.Name] as number,
          ]),
        ),
      });
    }
  }
  return docs;
}

/** An alarm in ALARM, and why. */
export interface RaisedAlarm {
  readonly alarm: string;
  readonly why: string;
}

const compare: Record<string, (value: number, threshold: number) => boolean> = {
  GreaterThanOrEqualToThreshold: (v, t) => v >= t,
  GreaterThanThreshold: (v, t) => v > t,
  LessThanThreshold: (v, t) => v < t,
  LessThanOrEqualToThreshold: (v, t) => v <= t,
};

/**
 * Each alarm of the template that would be in ALARM given `observed`: a data point of its
 * metric breaching its threshold, or no data point while missing data breaches. Data points are
 * judged as one period's (the deploy takes minutes): a statistic over all of them.
 */
export function alarmsRaised(resolver: TemplateResolver, observed: Observations): RaisedAlarm[] {
  const raised: RaisedAlarm[] = [];
  for (const [id, r] of resolver.resourcesOfType('AWS::CloudWatch::Alarm')) {
    const p = r.Properties ?? {};
    const name = resolver.physicalName(id);
    const dims = Object.fromEntries(
      ((p.Dimensions ?? []) as { Name: string; Value: unknown }[]).map((d) => [
        d.Name,
        resolver.resolveString(d.Value),
      ]),
    );
    const points = dataPoints(String(p.Namespace), String(p.MetricName), dims, observed);
    const value = points.length === 0 ? undefined : statistic(String(p.Statistic ?? 'Average'), points);
    const threshold = Number(p.Threshold);
    const breaches = compare[String(p.ComparisonOperator)];
    if (!breaches)
      throw new Error(`alarm ${name}: cannot judge ComparisonOperator ${String(p.ComparisonOperator)}`);
    if (value === undefined) {
      if (p.TreatMissingData === 'breaching')
        raised.push({ alarm: name, why: 'no data, and missing data breaches' });
    } else if (breaches(value, threshold)) {
      raised.push({
        alarm: name,
        why: `${p.MetricName} ${p.Statistic} ${value} ${p.ComparisonOperator} ${threshold}`,
      });
    }
  }
  return raised;
}

function dataPoints(
  namespace: string,
  metric: string,
  dims: Readonly<Record<string, string>>,
  observed: Observations,
): number[] {
  if (namespace === 'AWS/Lambda' && metric === 'Errors') {
    const runs = observed.invocations.get(dims.FunctionName ?? '');
    return runs && runs.count > 0 ? [runs.errors] : [];
  }
  if (namespace === 'AWS/SQS' && metric === 'ApproximateNumberOfMessagesVisible') {
    return [observed.queueDepth(dims.QueueName ?? '')];
  }
  const wanted = Object.entries(dims);
  return observed.emf
    .filter(
      (d) =>
        d.namespace === namespace &&
        metric in d.values &&
        Object.keys(d.dimensions).length === wanted.length &&
        wanted.every(([k, v]) => d.dimensions[k] === v),
    )
    .map((d) => d.values[metric] as number);
}

function statistic(stat: string, points: readonly number[]): number {
  switch (stat) {
    case 'SampleCount':
      return points.length;
    case 'Sum':
      return points.reduce((a, b) => a + b, 0);
    case 'Maximum':
      return Math.max(...points);
    case 'Minimum':
      return Math.min(...points);
    case 'Average':
      return points.reduce((a, b) => a + b, 0) / points.length;
    default:
      throw new Error(`cannot judge statistic ${stat}`);
  }
}

/** What the first deploy did, in order, and the alarms it left raised. */
export interface FirstDeploy {
  /**
   * Triggers (a scheduled rule, an event source mapping) of a function that reads the schema,
   * which CloudFormation may create before the schema exists: whatever order this run took,
   * another one may start such a function against no tables.
   */
  readonly unordered: readonly string[];
  /** What ran, in CloudFormation's order (`migrate`, `schedule <rule> -> <function>`, `mapping <queue>`). */
  readonly runs: readonly string[];
  /** Logical ids in creation order. */
  readonly order: readonly string[];
  readonly raised: readonly RaisedAlarm[];
}

export interface FirstDeployOptions {
  readonly template: CfnTemplate;
  readonly resolver: TemplateResolver;
  readonly processes: ReadonlyMap<string, FunctionProcess>;
  /** Runs a function by physical name (synchronously, as the custom resource and schedules do). */
  readonly invoke: (functionName: string, event: unknown) => Promise<unknown>;
  /** Hands what a mapping's queue holds to its function (the mapping's logical id). */
  readonly pumpMapping: (mappingId: string) => Promise<number>;
  /** Every function's runs so far, however started (a Lambda invoke by another function too). */
  readonly runs: () => ReadonlyMap<string, { readonly count: number; readonly errors: number }>;
  /** Services (Powertools names) that read the schema: nothing may start them before it exists. */
  readonly schemaReaders: readonly string[];
  readonly queueDepth: (queue: string) => number;
}

/** Plays the first deploy and judges the alarms (see the module comment). */
export async function playFirstDeploy(options: FirstDeployOptions): Promise<FirstDeploy> {
  const { template, resolver } = options;
  const order = creationOrder(template.Resources);
  const runs: string[] = [];
  const invoke = options.invoke;
  const runsBefore = new Map([...options.runs()].map(([name, r]) => [name, { ...r }]));
  const outputBefore = new Map([...options.processes].map(([id, p]) => [id, p.output.length]));
  for (const id of order) {
    const r = template.Resources[id];
    const p = r?.Properties ?? {};
    if (r?.Type === 'Custom::PipelineSchema') {
      const token = resolver.resolveString(p.ServiceToken);
      const migrate = [...options.processes.values()].find(
        (proc) => proc.spec.environment.POWERTOOLS_SERVICE_NAME === 'migrate',
      );
      if (!migrate) throw new Error(`no migrate function behind ${token}`);
      // The Provider framework calls the migrate function (its onEvent) synchronously; a failure fails the deploy.
      await invoke(migrate.spec.name, { RequestType: 'Create', ResourceProperties: p });
      runs.push('migrate (runs the relay once)');
    } else if (r?.Type === 'AWS::Events::Rule' && typeof p.ScheduleExpression === 'string') {
      for (const target of (p.Targets ?? []) as { Arn: unknown }[]) {
        const arn = resolver.resolveString(target.Arn);
        const proc = [...options.processes.values()].find((x) => x.spec.arn === arn);
        if (!proc) continue;
        // A scheduled run's failure is Lambda's Errors, judged below; the deploy goes on.
        await invoke(proc.spec.name, {
          source: 'aws.events',
          'detail-type': 'Scheduled Event',
          detail: {},
        }).catch(() => undefined);
        runs.push(`schedule ${id} -> ${proc.spec.environment.POWERTOOLS_SERVICE_NAME}`);
      }
    } else if (r?.Type === 'AWS::Lambda::EventSourceMapping') {
      const fn = resolver.resolveString(p.FunctionName);
      const proc = [...options.processes.values()].find((x) => x.spec.name === fn || x.spec.arn === fn);
      const handed = await options.pumpMapping(id);
      runs.push(
        `mapping ${id} -> ${proc?.spec.environment.POWERTOOLS_SERVICE_NAME ?? fn}: ${handed} message(s)`,
      );
    }
  }
  // Judged on what the deploy's runs wrote (the relay the migrate function ran included).
  const emf = [...options.processes].flatMap(([id, p]) =>
    emfDocuments(p.output.slice(outputBefore.get(id) ?? 0)),
  );
  const invocations = new Map(
    [...options.runs()].map(([name, r]) => {
      const before = runsBefore.get(name) ?? { count: 0, errors: 0 };
      return [name, { count: r.count - before.count, errors: r.errors - before.errors }];
    }),
  );
  const raised = alarmsRaised(resolver, { invocations, emf, queueDepth: options.queueDepth });
  // Any order CloudFormation may take, not only this one: a trigger of a schema reader must wait for the schema.
  const schema = order.find((id) => template.Resources[id]?.Type === 'Custom::PipelineSchema');
  const unordered = order.filter((id) => {
    const r = template.Resources[id];
    const p = r?.Properties ?? {};
    const targets =
      r?.Type === 'AWS::Lambda::EventSourceMapping'
        ? [resolver.resolveString(p.FunctionName)]
        : r?.Type === 'AWS::Events::Rule' && typeof p.ScheduleExpression === 'string'
          ? ((p.Targets ?? []) as { Arn: unknown }[]).map((t) => resolver.resolveString(t.Arn))
          : [];
    const readsSchema = targets.some((t) =>
      [...options.processes.values()].some(
        (x) =>
          (x.spec.name === t || x.spec.arn === t) &&
          options.schemaReaders.includes(x.spec.environment.POWERTOOLS_SERVICE_NAME ?? ''),
      ),
    );
    return readsSchema && schema !== undefined && !transitiveDependencies(template.Resources, id).has(schema);
  });
  return { runs, order, raised, unordered };
}
