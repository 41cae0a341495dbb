/**
 * What `npm run bench:model` reports: the latency simulation's figures over several seeds, and
 * the Markdown it writes into docs/performance.md with `--docs` (its `generated:model`
 * section). Apart from the benchmark so a test can render the committed result
 * (bench/results/model.json) and compare it with the docs without running the simulation.
 */
import type { SimulatedLatency } from './latency-simulation';

export interface ModelResult {
  /** Simulated seconds of approvals at each rate. */
  readonly seconds: number;
  readonly seeds: readonly number[];
  /** Each rate's runs, one per seed, in the order of `seeds`. */
  readonly runs: Readonly<Record<string, readonly SimulatedLatency[]>>;
  readonly goals: { readonly approveP99BoundMs: number; readonly effectsP99At100BoundMs: number };
  readonly measuredAt: string;
}

type Figure = 'approveP50Ms' | 'approveP99Ms' | 'effectsP50Ms' | 'effectsP99Ms' | 'nudges' | 'relayRuns';

const n = (v: number) => Math.round(v).toLocaleString('en-US');
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const of = (runs: readonly SimulatedLatency[], f: Figure) => runs.map((r) => r[f]);
const range = (xs: readonly number[]) => `${n(Math.min(...xs))}-${n(Math.max(...xs))}`;
const meanAndRange = (xs: readonly number[]) => `${n(mean(xs))} ms (${range(xs)})`;

/** The simulation's table by rate (means over the seeds, each p99's range), and its goals judged on the means. */
export function modelMarkdown(result: ModelResult): string {
  const rates = Object.keys(result.runs).sort((a, b) => Number(a) - Number(b));
  const rows = rates.map((rate) => {
    const runs = result.runs[rate] ?? [];
    const approvals = runs[0]?.approvals ?? 0;
    const functions = Object.keys(runs[0]?.coldStarts ?? {});
    const consumers = functions.filter((f) => f !== 'tasksApi' && f !== 'relay');
    const cold = (f: string) => mean(runs.map((r) => r.coldStarts[f] ?? 0));
    return `| ${rate}/s (${n(approvals)} approvals) | ${n(mean(of(runs, 'approveP50Ms')))} / ${meanAndRange(of(runs, 'approveP99Ms'))} | ${n(mean(of(runs, 'effectsP50Ms')))} / ${meanAndRange(of(runs, 'effectsP99Ms'))} | ${n(mean(of(runs, 'nudges')))} of ${n(approvals)} | ${n(mean(of(runs, 'relayRuns')))} | ${n(cold('tasksApi'))}; ${range(consumers.map(cold))} |`;
  });
  const p99 = (rate: string, f: Figure) => mean(of(result.runs[rate] ?? [], f));
  const approveBound = result.goals.approveP99BoundMs;
  const approveMeans = rates.map((r) => p99(r, 'approveP99Ms'));
  const over = rates.flatMap((r) => of(result.runs[r] ?? [], 'approveP99Ms')).filter((v) => v > approveBound);
  const effectsAt100 = p99('100', 'effectsP99Ms');
  const verdict = (met: boolean) => (met ? 'met' : 'not met');
  return [
    '| rate | approve API p50 / p99 | request -> every consumer done p50 / p99 | nudges sent | relay runs | cold starts (tasks-api; consumers) |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
    `Means over seeds ${result.seeds.join(', ')} (each p99's range in brackets), ${n(result.seconds)} simulated seconds of approvals at each rate; simulated ${result.measuredAt}; the runs are kept in \`bench/results/model.json\`.`,
    '',
    `- Approve p99 within ${n(approveBound)} ms: ${verdict(approveMeans.every((v) => v <= approveBound))} (${approveMeans.map((v) => `${n(v)} ms`).join(' and ')}; ${over.length} of ${rates.length * result.seeds.length} runs over it).`,
    `- Request -> every consumer done p99 under ${n(result.goals.effectsP99At100BoundMs)} ms at 100/s: ${verdict(effectsAt100 < result.goals.effectsP99At100BoundMs)} (${n(effectsAt100)} ms).`,
    '',
  ].join('\n');
}
