/**
 * `npm run bench:model [-- --json] [-- --docs] [-- --seeds 8] [-- --seconds 300]`: the latency
 * model's simulation of the AWS path (bench/support/latency-simulation.ts) at 20 and 100
 * approvals/s, once per seed (1 to `--seeds`), each over `--seconds` of approvals. It runs in
 * simulated time: a few seconds of CPU, nothing started. With `--json`, stdout is one line: the
 * runs by rate, the goals' bounds and when. `--docs` writes it to bench/results/model.json and
 * its table into docs/performance.md. A benchmark, not a test: nothing asserts.
 */
import { isMain, numberArg, progress, writeBenchDocs } from './support/cli';
import { latencyGoals } from './support/latency-model';
import { simulateLatency } from './support/latency-simulation';
import { type ModelResult, modelMarkdown } from './support/model-report';

export function simulateRates(seeds: number, seconds: number): ModelResult {
  const seedList = Array.from({ length: seeds }, (_, i) => i + 1);
  const runs = Object.fromEntries(
    [20, 100].map((rate) => [
      String(rate),
      seedList.map((seed) => {
        progress(`model: ${rate}/s, seed ${seed} of ${seeds}`);
        return simulateLatency({ approvals: rate * seconds, rate, seed });
      }),
    ]),
  );
  return { seconds, seeds: seedList, runs, goals: latencyGoals(), measuredAt: new Date().toISOString() };
}

if (isMain(import.meta.url)) {
  const args = process.argv.slice(2);
  const result = simulateRates(numberArg(args, '--seeds', 8), numberArg(args, '--seconds', 300));
  if (args.includes('--docs')) {
    writeBenchDocs('model.json', result, 'docs/performance.md', 'model', modelMarkdown(result));
  }
  if (args.includes('--json')) console.log(JSON.stringify(result));
  else console.log(modelMarkdown(result));
}
