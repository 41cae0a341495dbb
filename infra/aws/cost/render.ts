import type { Stage } from '../settings';
import type { CostPart, IdleMonthlyCost, PerMillionApprovalsCost } from './model';
import { sandboxGoal } from './model';
import { priceBook } from './prices';

/**
 * What `npm run cost` prints, and what it writes into docs/aws.md with `--docs`: Markdown tables
 * of each stage's idle month and million approvals. Apart from report.ts (which runs the
 * command when loaded) so a test can render the same text and compare it with the docs.
 */

export const stages: readonly Stage[] = ['sandbox', 'prod'];

export interface StageCost {
  readonly stage: Stage;
  readonly idle: IdleMonthlyCost;
  readonly perMillion: PerMillionApprovalsCost;
}

const money = (usd: number): string => usd.toFixed(2);
const percent = (fraction: number): string => `${(fraction * 100).toFixed(1)}%`;

function table(title: string, parts: readonly CostPart[], total: number, unit: string): string {
  // A pipe in a detail would end its cell.
  const cell = (s: string) => s.replace(/\|/g, '\\|');
  return [
    `${title}:`,
    '',
    `| part | ${unit} | detail |`,
    '|---|---:|---|',
    ...parts.map((p) => `| ${cell(p.name)} | ${money(p.usd)} | ${cell(p.detail)} |`),
    `| **total** | **${money(total)}** | |`,
  ].join('\n');
}

export function costText(costs: readonly StageCost[]): string {
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
      '',
      `Aurora paused ${percent(idle.auroraPausedFraction)} of an idle day.`,
    );
    if (stage === 'sandbox') {
      const met =
        idle.totalUsd <= sandboxGoal.idleMonthlyUsd &&
        idle.auroraPausedFraction >= sandboxGoal.auroraPausedFraction;
      lines.push(
        `Goal: idle at most $${money(sandboxGoal.idleMonthlyUsd)} with Aurora paused at least ` +
          `${percent(sandboxGoal.auroraPausedFraction)}: ${met ? 'met' : 'not met'}.`,
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
