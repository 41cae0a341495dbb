import { topology } from '../../../functions/topology';
import { writeSection } from '../../docs/doc-section';
import { synthesizeStage } from '../synthesize';
import { readMeasuredCosts } from './measured';
import { type Region, regions } from './quotas';
import { capacityText, type StageCapacity, stageCapacity, stages } from './render';

/**
 * `npm run capacity`: synthesizes each stage offline, runs the capacity model (`./model.ts`)
 * on its template with the topology, AWS's default quotas (`./quotas.ts`), the price book
 * (`../cost/prices.ts`) and the benchmarks' measured costs (`./measured.ts`), and prints a
 * Markdown table per stage: each component's share of its limit at 10, 100, 1,000 and 10,000
 * approvals/s, the rate at which it is reached, and the cost per million approvals.
 * `npm run -s capacity -- --json` prints one JSON line instead; progress goes to stderr.
 * `--docs` also writes the text into docs/aws.md (its `generated:capacity` section).
 */

const rounded = (n: number) => (Number.isFinite(n) ? Math.floor(n) : null);

/**
 * The one JSON line: us-east-1's figures at the top (`firstOwnLimitApprovalsPerSec` per stage is
 * the figure the goals are about), and every Region's under `regions`.
 */
function json(all: readonly StageCapacity[]): string {
  return JSON.stringify({
    ...regionJson(all.filter((s) => s.region === 'us-east-1')),
    regions: Object.fromEntries(
      regions.map((region: Region) => [region, regionJson(all.filter((s) => s.region === region))]),
    ),
  });
}

/** One Region's figures, per stage. */
function regionJson(stagesCapacity: readonly StageCapacity[]): Record<string, unknown> {
  const perStage = <T>(f: (s: StageCapacity) => T) =>
    Object.fromEntries(stagesCapacity.map((s) => [s.stage, f(s)]));
  return {
    firstOwnLimitApprovalsPerSec: perStage((s) =>
      rounded(s.report.firstOwnLimit?.approvalsPerSec ?? Infinity),
    ),
    firstOwnLimit: perStage((s) => s.report.firstOwnLimit?.component ?? null),
    firstLimitApprovalsPerSec: perStage((s) => rounded(s.report.firstLimit?.approvalsPerSec ?? Infinity)),
    firstLimit: perStage((s) => s.report.firstLimit?.component ?? null),
    byRate: perStage((s) =>
      Object.fromEntries(
        s.report.byRate.map((r) => [
          r.approvalsPerSec,
          {
            costPerMillionApprovalsUsd: Math.round(r.costPerMillionUsd * 100) / 100,
            auroraAcu: Math.round(r.auroraAcu * 100) / 100,
            quotaIncreases: r.quotaIncreases,
            ownLimitsReached: r.ownReached,
          },
        ]),
      ),
    ),
    components: perStage((s) =>
      Object.fromEntries(
        s.report.components.map((c) => [
          c.name,
          {
            kind: c.kind,
            limit: Number.isFinite(c.limit) ? c.limit : null,
            unit: c.unit,
            limitApprovalsPerSec: rounded(c.limitApprovalsPerSec),
            shares: c.shares.map((x) => Math.round(x * 10_000) / 10_000),
          },
        ]),
      ),
    ),
  };
}

function main(args: readonly string[]): number {
  const unknown = args.filter((a) => a !== '--json' && a !== '--docs');
  if (unknown.length > 0) {
    process.stderr.write(
      `capacity: unknown argument ${unknown.join(' ')}\nusage: npm run capacity [-- --json] [-- --docs]\n`,
    );
    return 2;
  }
  let measured: ReturnType<typeof readMeasuredCosts>;
  try {
    measured = readMeasuredCosts();
  } catch (err) {
    process.stderr.write(`capacity: ${(err as Error).message}\n`);
    return 1;
  }
  const results: StageCapacity[] = [];
  for (const stage of stages) {
    process.stderr.write(`capacity: synthesizing the ${stage} stage\n`);
    try {
      results.push(...stageCapacity(stage, synthesizeStage(topology, stage), topology, measured));
    } catch (err) {
      process.stderr.write(`capacity: the ${stage} stage: ${(err as Error).message ?? err}\n`);
      return 1;
    }
  }
  const text = capacityText(results, measured.measuredAt);
  process.stdout.write(`${args.includes('--json') ? json(results) : text}\n`);
  if (args.includes('--docs'))
    process.stderr.write(`capacity: ${writeSection('docs/aws.md', 'capacity', text)} updated\n`);
  return 0;
}

process.exitCode = main(process.argv.slice(2));
