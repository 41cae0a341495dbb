import type { CfnTemplate } from '../cost/model';
import { priceBook } from '../cost/prices';
import type { Stage } from '../settings';
import {
  type CapacityReport,
  type CapacityTopology,
  type ComponentFigures,
  capacityModel,
  type LimitKind,
  type MeasuredCosts,
} from './model';
import { quotas, quotasIn, type Region, regions } from './quotas';

/**
 * What `npm run capacity` prints, and what it writes into docs/aws.md with `--docs`: a Markdown
 * table per stage in us-east-1, the components whose quotas differ by Region in each Region, and
 * where each figure comes from. Apart from report.ts (which runs the command when loaded) so a
 * test can render the same text and compare it with the docs.
 */

export const stages: readonly Stage[] = ['sandbox', 'prod'];
export const rates = [10, 100, 1_000, 10_000] as const;

export interface StageCapacity {
  readonly stage: Stage;
  readonly region: Region;
  readonly report: CapacityReport;
}

/** A stage's template held against each Region's quotas: what the report prints and the docs test renders. */
export function stageCapacity(
  stage: Stage,
  template: CfnTemplate,
  topology: CapacityTopology,
  measured: MeasuredCosts,
): StageCapacity[] {
  return regions.map((region) => ({
    stage,
    region,
    report: capacityModel(
      { template, topology, quotas: quotasIn(region), prices: priceBook, measured },
      rates,
    ),
  }));
}

const whose: Readonly<Record<LimitKind, string>> = {
  own: 'ours',
  design: 'ours (fixed AWS limit)',
  launch: 'ours (a new table)',
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

const limitText = (c: ComponentFigures) =>
  Number.isFinite(c.limit) ? `${figure(c.limit)} ${c.unit}` : 'none';

function firstLines(report: CapacityReport): string {
  const first = report.firstLimit;
  const own = report.firstOwnLimit;
  return (
    `First limit: ${first ? `${first.component} (${whose[first.kind]}) at ${rate(first.approvalsPerSec)}` : 'none'}. ` +
    `First limit of ours: ${own ? `${own.component} at ${rate(own.approvalsPerSec)}` : 'none'}.`
  );
}

export function markdown({ stage, region, report }: StageCapacity): string {
  const head = `| ${stage}, ${region}: component | limit | whose | ${rates.map((r) => `${count(r)}/s`).join(' | ')} | limit reached at |`;
  const lines = [head, `|${' --- |'.repeat(rates.length + 4)}`];
  for (const c of report.components) {
    lines.push(
      `| ${c.name} | ${limitText(c)} | ${whose[c.kind]} | ${rates.map((_, i) => cell(c, i)).join(' | ')} | ${rate(c.limitApprovalsPerSec)} |`,
    );
  }
  lines.push(
    `| Aurora capacity needed | | | ${report.byRate.map((r) => `${figure(r.auroraAcu)} ACU`).join(' | ')} | |`,
    `| **cost per million approvals** | | | ${report.byRate.map((r) => `$${count(r.costPerMillionUsd, 2)}`).join(' | ')} | |`,
  );
  const top = report.byRate[report.byRate.length - 1];
  lines.push('', firstLines(report));
  if (top)
    lines.push(
      `At ${count(top.approvalsPerSec)}/s: quota increases needed: ${top.quotaIncreases.join('; ') || 'none'}. ` +
        `Limits of ours reached: ${top.ownReached.join('; ') || 'none'}.`,
    );
  return lines.join('\n');
}

/**
 * A stage in every Region: the components whose limit differs between Regions (the same
 * template held against each Region's defaults), then each Region's first limit and the quota
 * increases each rate needs there.
 */
export function byRegion(stage: Stage, results: readonly StageCapacity[]): string {
  const ofStage = regions
    .map((region) => results.find((r) => r.stage === stage && r.region === region))
    .filter((r): r is StageCapacity => r !== undefined);
  const names = (ofStage[0]?.report.components ?? [])
    .map((c) => c.name)
    .filter(
      (name) => new Set(ofStage.map((r) => r.report.components.find((c) => c.name === name)?.limit)).size > 1,
    );
  const lines = [
    `| ${stage}, by Region | component | limit | ${rates.map((r) => `${count(r)}/s`).join(' | ')} | limit reached at |`,
    `|${' --- |'.repeat(rates.length + 4)}`,
  ];
  for (const { region, report } of ofStage)
    for (const name of names) {
      const c = report.components.find((x) => x.name === name);
      if (c)
        lines.push(
          `| ${region} | ${c.name} | ${limitText(c)} | ${rates.map((_, i) => cell(c, i)).join(' | ')} | ${rate(c.limitApprovalsPerSec)} |`,
        );
    }
  lines.push('');
  for (const { region, report } of ofStage)
    lines.push(
      `- ${region}: ${firstLines(report)} Quota increases needed: ${report.byRate
        .map((r) => `at ${count(r.approvalsPerSec)}/s ${r.quotaIncreases.join('; ') || 'none'}`)
        .join('; ')}.`,
    );
  return lines.join('\n');
}

export function notes(stagesCapacity: readonly StageCapacity[], measuredAt: string): string {
  const lines = [
    `Shares are use over limit at a steady rate of approvals (bold: reached). Quotas: AWS defaults for us-east-1 and, by Region, where they differ (infra/aws/capacity/quotas.ts, read ${quotas.apiGatewayAccountRps.read} and after); ` +
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

/** The whole text: each stage's table in us-east-1, prod by Region, then the notes. */
export function capacityText(results: readonly StageCapacity[], measuredAt: string): string {
  const home = results.filter((r) => r.region === 'us-east-1');
  return [...home.map(markdown), byRegion('prod', results), notes(results, measuredAt)].join('\n\n');
}
