import { topology } from '../../../shared/topology';
import type { Stage } from '../settings';
import { synthesizeStage } from '../synthesize';
import {
  type CfnTemplate,
  type CostPart,
  type IdleMonthlyCost,
  idleMonthlyCost,
  type PerMillionApprovalsCost,
  perMillionApprovals,
  sandboxGoal,
} from './model';
import { priceBook } from './prices';

/**
 * `npm run cost`: synthesizes each stage offline (no credentials, no bundling), prices its
 * template with `./model.ts`, and prints a table per stage. `npm run cost -- --json` prints
 * exactly one JSON line on stdout instead; progress always goes to stderr.
 */

const stages: readonly Stage[] = ['sandbox', 'prod'];

interface StageCost {
  readonly stage: Stage;
  readonly idle: IdleMonthlyCost;
  readonly perMillion: PerMillionApprovalsCost;
}

const cents = (usd: number): number => Math.round(usd * 100) / 100;
const money = (usd: number): string => usd.toFixed(2);
const percent = (fraction: number): string => `${(fraction * 100).toFixed(1)}%`;

function table(title: string, parts: readonly CostPart[], total: number, unit: string): string {
  const width = Math.max(...parts.map((p) => p.name.length), 'total'.length);
  const usdWidth = Math.max(unit.length, ...parts.map((p) => money(p.usd).length));
  const row = (name: string, usd: string, detail: string) =>
    `  ${name.padEnd(width)}  ${usd.padStart(usdWidth)}  ${detail}`.trimEnd();
  return [
    title,
    row('part', unit, 'detail'),
    ...parts.map((p) => row(p.name, money(p.usd), p.detail)),
    row('total', money(total), ''),
  ].join('\n');
}

function text(costs: readonly StageCost[]): string {
  const all = Object.values(priceBook.prices);
  const confirmed = Object.entries(priceBook.prices)
    .filter(([, p]) => p.confirmed)
    .map(([name]) => name);
  const lines = [
    `AWS list prices, ${priceBook.region}, as of ${priceBook.asOf}; free tiers not applied. ` +
      `${confirmed.length} of ${all.length} prices confirmed on AWS pages (${confirmed.join(', ')}); ` +
      'the rest are marked unconfirmed in infra/aws/cost/prices.ts.',
  ];
  for (const { stage, idle, perMillion } of costs) {
    lines.push(
      '',
      table(`Idle monthly cost, ${stage}`, idle.parts, idle.totalUsd, 'USD/month'),
      `  Aurora paused ${percent(idle.auroraPausedFraction)} of an idle day`,
    );
    if (stage === 'sandbox') {
      const met =
        idle.totalUsd <= sandboxGoal.idleMonthlyUsd &&
        idle.auroraPausedFraction >= sandboxGoal.auroraPausedFraction;
      lines.push(
        `  goal: idle at most $${money(sandboxGoal.idleMonthlyUsd)} with Aurora paused at least ` +
          `${percent(sandboxGoal.auroraPausedFraction)}: ${met ? 'met' : 'not met'}`,
      );
    }
    lines.push(
      '',
      table(
        `Per million approvals spread over a month, ${stage} (added to the idle bill)`,
        perMillion.parts,
        perMillion.totalUsd,
        'USD',
      ),
    );
  }
  return lines.join('\n');
}

const byName = (parts: readonly CostPart[]) => Object.fromEntries(parts.map((p) => [p.name, cents(p.usd)]));

/** The one JSON line: the top-level per-million figure is the sandbox's (the stage the goal is for). */
function json(costs: readonly StageCost[]): string {
  const perStage = <T>(f: (c: StageCost) => T) => Object.fromEntries(costs.map((c) => [c.stage, f(c)]));
  const sandbox = costs.find((c) => c.stage === 'sandbox');
  return JSON.stringify({
    idleMonthlyUsd: perStage((c) => cents(c.idle.totalUsd)),
    perMillionApprovalsUsd: sandbox ? cents(sandbox.perMillion.totalUsd) : null,
    auroraPausedFraction: perStage((c) => Math.round(c.idle.auroraPausedFraction * 1000) / 1000),
    parts: perStage((c) => ({
      idle: byName(c.idle.parts),
      perMillionApprovals: byName(c.perMillion.parts),
      perMillionApprovalsUsd: cents(c.perMillion.totalUsd),
    })),
  });
}

function main(args: readonly string[]): number {
  const unknown = args.filter((a) => a !== '--json');
  if (unknown.length > 0) {
    process.stderr.write(`cost: unknown argument ${unknown.join(' ')}\nusage: npm run cost [-- --json]\n`);
    return 2;
  }
  const costs: StageCost[] = [];
  for (const stage of stages) {
    process.stderr.write(`cost: synthesizing the ${stage} stage\n`);
    let template: CfnTemplate;
    try {
      template = synthesizeStage(stage);
    } catch (err) {
      process.stderr.write(
        `cost: synthesis of the ${stage} stage failed: ${(err as Error).message ?? err}\n`,
      );
      return 1;
    }
    try {
      costs.push({
        stage,
        idle: idleMonthlyCost(template, topology, priceBook),
        perMillion: perMillionApprovals(template, topology, priceBook),
      });
    } catch (err) {
      process.stderr.write(`cost: cannot price the ${stage} template: ${(err as Error).message ?? err}\n`);
      return 1;
    }
  }
  process.stdout.write(`${args.includes('--json') ? json(costs) : text(costs)}\n`);
  return 0;
}

process.exitCode = main(process.argv.slice(2));
