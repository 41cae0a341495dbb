import { priceBook } from '../cost/prices';
import type { Stage } from '../settings';
import type { CapacityReport, ComponentFigures, LimitKind } from './model';
import { quotas } from './quotas';

/**
 * What `npm run capacity` prints, and what it writes into docs/aws.md with `--docs`: a Markdown
 * table per stage and where each figure comes from. Apart from report.ts (which runs the
 * command when loaded) so a test can render the same text and compare it with the docs.
 */

export const stages: readonly Stage[] = ['sandbox', 'prod'];
export const rates = [10, 100, 1_000, 10_000] as const;

export interface StageCapacity {
  readonly stage: Stage;
  readonly report: CapacityReport;
}

const whose: Readonly<Record<LimitKind, string>> = {
  own: 'ours',
  design: 'ours (fixed AWS limit)',
  quota: 'AWS quota',
};

const count = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** A figure with the digits it needs: 0.0123, 1.23, 123, 12,345. */
const figure = (n: number) =>
  n >= 100 || Number.isInteger(n) ? count(n) : n >= 1 ? count(n, 2) : n > 0 ? n.toPrecision(2) : '0';

const rate = (n: number) => (Number.isFinite(n) ? `${count(Math.floor(n))}/s` : 'never');

function cell(c: ComponentFigures, i: number): string {
  if (!Number.isFinite(c.limit))
    return `${figure((c.fixed ?? 0) + c.perApproval * (rates[i] ?? 0))} ${c.unit}`;
  const share = c.shares[i] ?? 0;
  const text = `${share >= 10 ? count(share * 100) : share >= 0.001 ? count(share * 100, 1) : share > 0 ? '<0.1' : '0'}%`;
  return share >= 1 ? `**${text}**` : text;
}

export function markdown({ stage, report }: StageCapacity): string {
  const head = `| ${stage}: component | limit | whose | ${rates.map((r) => `${count(r)}/s`).join(' | ')} | limit reached at |`;
  const lines = [head, `|${' --- |'.repeat(rates.length + 4)}`];
  for (const c of report.components) {
    const limit = Number.isFinite(c.limit) ? `${figure(c.limit)} ${c.unit}` : 'none';
    lines.push(
      `| ${c.name} | ${limit} | ${whose[c.kind]} | ${rates.map((_, i) => cell(c, i)).join(' | ')} | ${rate(c.limitApprovalsPerSec)} |`,
    );
  }
  lines.push(
    `| Aurora capacity needed | | | ${report.byRate.map((r) => `${figure(r.auroraAcu)} ACU`).join(' | ')} | |`,
    `| **cost per million approvals** | | | ${report.byRate.map((r) => `$${count(r.costPerMillionUsd, 2)}`).join(' | ')} | |`,
  );
  const first = report.firstLimit;
  const own = report.firstOwnLimit;
  const top = report.byRate[report.byRate.length - 1];
  lines.push(
    '',
    `First limit: ${first ? `${first.component} (${whose[first.kind]}) at ${rate(first.approvalsPerSec)}` : 'none'}. ` +
      `First limit of ours: ${own ? `${own.component} at ${rate(own.approvalsPerSec)}` : 'none'}.`,
  );
  if (top)
    lines.push(
      `At ${count(top.approvalsPerSec)}/s: quota increases needed: ${top.quotaIncreases.join('; ') || 'none'}. ` +
        `Limits of ours reached: ${top.ownReached.join('; ') || 'none'}.`,
    );
  return lines.join('\n');
}

export function notes(stagesCapacity: readonly StageCapacity[], measuredAt: string): string {
  const lines = [
    `Shares are use over limit at a steady rate of approvals (bold: reached). Quotas: AWS defaults for us-east-1 (infra/aws/capacity/quotas.ts, read ${quotas.apiGatewayAccountRps.read}); ` +
      `prices: infra/aws/cost/prices.ts (${priceBook.asOf}); database cost per operation measured ${measuredAt.slice(0, 10)} (npm run bench:statements).`,
    '',
    'Where each limit and use comes from:',
  ];
  const seen = new Set<string>();
  for (const { report } of stagesCapacity)
    for (const c of report.components) {
      const key = `${c.name}|${c.limitFrom}|${c.detail}`;
      if (seen.has(key)) continue;
      seen.add(key);
      lines.push(`- ${c.name}: limit ${c.limitFrom}; use: ${c.detail}`);
    }
  return lines.join('\n');
}

/** The whole text: each stage's table, then the notes. */
export function capacityText(results: readonly StageCapacity[], measuredAt: string): string {
  return [...results.map(markdown), notes(results, measuredAt)].join('\n\n');
}
