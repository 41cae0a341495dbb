import { topology } from '../../../functions/topology';
import { writeSection } from '../../docs/doc-section';
import { synthesizeStage } from '../synthesize';
import type { CfnTemplate, CostPart } from './model';
import { costText, type StageCost, stageCost, stages } from './render';

const cents = (usd: number): number => Math.round(usd * 100) / 100;

/**
 * `npm run cost`: synthesizes each stage offline (no credentials, no bundling), prices its
 * template with `./model.ts`, and prints a table per stage. `npm run cost -- --json` prints
 * exactly one JSON line on stdout instead; progress always goes to stderr. `--docs` also
 * writes the tables into docs/aws.md (its `generated:cost` section).
 */

const byName = (parts: readonly CostPart[]) => Object.fromEntries(parts.map((p) => [p.name, cents(p.usd)]));

/** The one JSON line: the top-level per-million figure is the sandbox's (the stage the goal is for). */
function json(costs: readonly StageCost[]): string {
  const perStage = <T>(f: (c: StageCost) => T) => Object.fromEntries(costs.map((c) => [c.stage, f(c)]));
  const sandbox = costs.find((c) => c.stage === 'sandbox');
  return JSON.stringify({
    idleMonthlyUsd: perStage((c) => cents(c.idle.documented.totalUsd)),
    idleMonthlyRangeUsd: perStage((c) => ({
      low: cents(c.idle.low.totalUsd),
      documented: cents(c.idle.documented.totalUsd),
      high: cents(c.idle.high.totalUsd),
    })),
    perMillionApprovalsUsd: sandbox ? cents(sandbox.perMillion.totalUsd) : null,
    auroraPausedFraction: perStage((c) => Math.round(c.idle.documented.auroraPausedFraction * 1000) / 1000),
    parts: perStage((c) => ({
      idle: byName(c.idle.documented.parts),
      perMillionApprovals: byName(c.perMillion.parts),
      perMillionApprovalsUsd: cents(c.perMillion.totalUsd),
    })),
  });
}

function main(args: readonly string[]): number {
  const unknown = args.filter((a) => a !== '--json' && a !== '--docs');
  if (unknown.length > 0) {
    process.stderr.write(
      `cost: unknown argument ${unknown.join(' ')}\nusage: npm run cost [-- --json] [-- --docs]\n`,
    );
    return 2;
  }
  const costs: StageCost[] = [];
  for (const stage of stages) {
    process.stderr.write(`cost: synthesizing the ${stage} stage\n`);
    let template: CfnTemplate;
    try {
      template = synthesizeStage(topology, stage);
    } catch (err) {
      process.stderr.write(
        `cost: synthesis of the ${stage} stage failed: ${(err as Error).message ?? err}\n`,
      );
      return 1;
    }
    try {
      costs.push(stageCost(stage, template, topology));
    } catch (err) {
      process.stderr.write(`cost: cannot price the ${stage} template: ${(err as Error).message ?? err}\n`);
      return 1;
    }
  }
  const text = costText(costs);
  process.stdout.write(`${args.includes('--json') ? json(costs) : text}\n`);
  if (args.includes('--docs'))
    process.stderr.write(`cost: ${writeSection('docs/aws.md', 'cost', text)} updated\n`);
  return 0;
}

process.exitCode = main(process.argv.slice(2));
