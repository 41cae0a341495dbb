import type { Stage } from '../settings';
import {
  type CfnTemplate,
  type CostPart,
  type CostTopology,
  type IdleMonthlyCost,
  type IdleMonthlyRange,
  idleMonthlyRange,
  type PerMillionApprovalsCost,
  perMillionApprovals,
  sandboxGoal,
  sandboxIdleGoalUsd,
} from './model';
import { type PriceBook, priceBook } from './prices';

/**
 * What `npm run cost` prints, and what it writes into docs/aws.md with `--docs`: Markdown tables
 * of each stage's idle month (at the SQS pollers AWS documents, with the range of the model's
 * assumptions) and million approvals. Apart from report.ts (which runs the command when loaded)
 * so a test can render the same text and compare it with the docs.
 */

export const stages: readonly Stage[] = ['sandbox', 'prod'];

export interface StageCost {
  readonly stage: Stage;
  /** The idle month at each end of its assumptions; the tables print `documented`. */
  readonly idle: IdleMonthlyRange;
  readonly perMillion: PerMillionApprovalsCost;
  /** How many consumers the stage's pipeline has: the sandbox goal grows with each added one. */
  readonly consumers: number;
}

/** A stage's bill from its synthesized template: what the report prints and the docs test renders. */
export function stageCost(
  stage: Stage,
  template: CfnTemplate,
  topology: CostTopology,
  book: PriceBook = priceBook,
): StageCost {
  return {
    stage,
    idle: idleMonthlyRange(template, topology, book),
    perMillion: perMillionApprovals(template, topology, book),
    consumers: topology.registry.length,
  };
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

const partUsd = (cost: IdleMonthlyCost, name: string): number =>
  cost.parts.find((p) => p.name === name)?.usd ?? 0;

/** Whether an idle month meets the sandbox goal: its total and Aurora's paused share. */
export const meetsSandboxGoal = (idle: IdleMonthlyCost, consumers: number): boolean =>
  idle.totalUsd <= sandboxIdleGoalUsd(consumers) &&
  idle.auroraPausedFraction >= sandboxGoal.auroraPausedFraction;

/** The range line of an idle month, and for the sandbox the goal at both poller counts, with the trade. */
function rangeLines(stage: Stage, { low, documented, high }: IdleMonthlyRange, consumers: number): string[] {
  const polling = 'SQS (event source mappings polling)';
  const lines = [
    `Range: $${money(low.totalUsd)} with each SQS mapping at the fewest pollers Lambda may optimize to, ` +
      `$${money(documented.totalUsd)} at the count AWS documents (the table), ` +
      `$${money(high.totalUsd)} if something kept Aurora awake all month at ${priceBook.assumptions.auroraActiveAcu.value} ACU.`,
  ];
  if (stage !== 'sandbox') return lines;
  const goalUsd = sandboxIdleGoalUsd(consumers);
  const added = consumers - sandboxGoal.consumersIncluded;
  const goal =
    `idle at most $${money(goalUsd)}` +
    (added > 0
      ? ` ($${money(sandboxGoal.idleMonthlyUsd)} for ${sandboxGoal.consumersIncluded} consumers, $${money(sandboxGoal.perAddedConsumerUsd)} for each of the ${added} added)`
      : '') +
    ` with Aurora paused at least ${percent(sandboxGoal.auroraPausedFraction)}`;
  const documentedMet = meetsSandboxGoal(documented, consumers);
  lines.push(
    `Goal: ${goal}: ${documentedMet ? 'met' : 'not met'} at the pollers AWS documents` +
      (documentedMet
        ? '.'
        : `, by $${money(documented.totalUsd - goalUsd)}; ${meetsSandboxGoal(low, consumers) ? 'met' : 'not met'} at the fewest. ` +
          `The difference is the polling of the stack's SQS mappings ($${money(partUsd(documented, polling))} a month at the documented count, $${money(partUsd(low, polling))} at the fewest): ` +
          'what each mapping buys is under "What the idle bill buys" below.'),
  );
  return lines;
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
  for (const { stage, idle, perMillion, consumers } of costs) {
    lines.push(
      '',
      table(`Idle monthly cost, ${stage}`, idle.documented.parts, idle.documented.totalUsd, 'USD/month'),
      '',
      `Aurora paused ${percent(idle.documented.auroraPausedFraction)} of an idle day.`,
      ...rangeLines(stage, idle, consumers),
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
