/**
 * What `npm run bench:growth` reports: its result's shape, and the Markdown it writes into
 * docs/performance.md with `--docs` (its `generated:growth` section). Apart from the benchmark so
 * a test can render the committed result (bench/results/growth.json) and compare it with the
 * docs without starting anything.
 */

/** The figures at one size, in milliseconds. */
export type GrowthFigures = Readonly<Record<string, number>>;

export interface GrowthResult {
  readonly rows: Readonly<Record<string, GrowthFigures>>;
  /**
   * Each source `GET /ops/status` reads, timed alone, by row count: a diagnosis for when the
   * status grows, not a figure of the goal (some are a read of two rows, well under a
   * millisecond, whose ratio is the machine's noise).
   */
  readonly statusSources?: Readonly<Record<string, GrowthFigures>>;
  readonly effects: number;
  /** The largest (figure at the largest size) / (figure at 0) over the figures of `rows`. */
  readonly growthRatio: number;
  /** Which figure that is. */
  readonly growthRatioOf: string;
  /** When and where it ran (absent from results older than the field). */
  readonly measuredAt?: string;
  readonly machine?: { readonly node: string; readonly cores: number; readonly load1: readonly number[] };
}

/** The goal: every figure at the largest size within this many times its figure at 0. */
export const growthGoal = 1.5;

/** What each figure is, in the order the table lists them. */
export const growthLabels: Readonly<Record<string, string>> = {
  approvalToEffects: 'a nudged approval, request -> every consumer PROCESSED',
  claim: 'relay: claim (50 rows)',
  markDelivered: 'relay: mark 25 delivered',
  markFailed: 'relay: mark 12 failed',
  release: 'relay: release 13',
  stats: 'relay: stats (counts, ages, next due)',
  purge: 'relay: purge one batch',
  leaseAcquireRelease: 'relay: run lease acquired and released',
  writersInFlight: 'relay: writers in flight',
  deliveredCount: 'ops: delivered count (counters)',
  opsStatus: '`GET /ops/status`',
  opsEvents: '`GET /ops/events?limit=20`',
  statusTasks: 'status source: task counts (counters)',
  statusOutbox: 'status source: outbox stats and delivered count',
  statusInbox: "status source: each consumer's open inbox figures (index Queries)",
  statusProcessed: "status source: each consumer's processed count (counters)",
  statusEffects: 'status source: effect counts (counters)',
  statusAudit: 'status source: the audit (counters, cursor)',
};

const ms = (n: number | undefined) =>
  n === undefined ? '—' : n.toLocaleString('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });
const count = (n: number) => n.toLocaleString('en-US');

function table(by: Readonly<Record<string, GrowthFigures>>, title: string, effects: number): string[] {
  const sizes = Object.keys(by)
    .map(Number)
    .sort((a, b) => a - b);
  const largest = sizes.at(-1) ?? 0;
  const names = [
    ...Object.keys(growthLabels).filter((n) => sizes.some((s) => by[s]?.[n] !== undefined)),
    ...new Set(sizes.flatMap((s) => Object.keys(by[s] ?? {})).filter((n) => !(n in growthLabels))),
  ];
  const heading = sizes.map((s) =>
    s === largest && s > 0 && effects > 0
      ? `${count(s)} rows, ${count(effects)} approvals' effects`
      : `${count(s)} rows`,
  );
  return [
    `| ${title} | ${heading.join(' | ')} | largest / 0 |`,
    `|---|${sizes.map(() => '---:|').join('')}---:|`,
    ...names.map((name) => {
      const base = by[0]?.[name];
      const top = by[largest]?.[name];
      const ratio = base && top !== undefined ? (top / base).toFixed(2) : '—';
      return `| ${growthLabels[name] ?? name} | ${sizes.map((s) => ms(by[s]?.[name])).join(' | ')} | ${ratio} |`;
    }),
  ];
}

/** The section: the goal's figures, the status sources, and how the run went. */
export function growthMarkdown(result: GrowthResult): string {
  const met = result.growthRatio <= growthGoal;
  const lines = [...table(result.rows, 'figure (ms, median of 20)', result.effects)];
  if (result.statusSources && Object.keys(result.statusSources).length > 0)
    lines.push(
      '',
      ...table(
        result.statusSources,
        'what `/ops/status` reads, each alone (ms, median of 20)',
        result.effects,
      ),
    );
  const where = result.machine
    ? ` on Node ${result.machine.node}, ${result.machine.cores} cores, 1-minute load ${result.machine.load1.map((l) => l.toFixed(1)).join(' to ')}`
    : '';
  lines.push(
    '',
    `\`growthRatio\` ${result.growthRatio.toFixed(2)} (${growthLabels[result.growthRatioOf] ?? result.growthRatioOf}): ` +
      `goal at most ${growthGoal}, ${met ? 'met' : 'not met'}. Measured ${result.measuredAt ?? 'before the run recorded its date'}${where}; ` +
      'the line is kept in `bench/results/growth.json`.',
  );
  return lines.join('\n');
}
