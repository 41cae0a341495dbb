import { topology } from '../../../shared/topology';
import { priceBook } from '../cost/prices';
import type { Stage } from '../settings';
import { synthesizeStage } from '../synthesize';
import { readMeasuredCosts } from './measured';
import { type CapacityReport, type ComponentFigures, capacityModel, type LimitKind } from './model';
import { quotas } from './quotas';

/**
 * `npm run capacity`: synthesizes each stage offline, runs the capacity model (`./model.ts`)
 * on its template with the topology, AWS's default quotas (`./quotas.ts`), the price book
 * (`../cost/prices.ts`) and the benchmarks' measured costs (`./measured.ts`), and prints a
 * Markdown table per stage: each component's share of its limit at 10, 100, 1,000 and 10,000
 * approvals/s, the rate at which it is reached, and the cost per million approvals.
 * `npm run -s capacity -- --json` prints one JSON line instead; progress goes to stderr.
 */

const stages: readonly Stage[] = ['sandbox', 'prod'];
const rates = [10, 100, 1_000, 10_000] as const;

interface StageCapacity {
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

function markdown({ stage, report }: StageCapacity): string {
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

function notes(stagesCapacity: readonly StageCapacity[], measuredAt: string): string {
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

const rounded = (n: number) => (Number.isFinite(n) ? Math.floor(n) : null);

/** The one JSON line; `firstOwnLimitApprovalsPerSec` per stage is the figure the goals are about. */
function json(stagesCapacity: readonly StageCapacity[]): string {
  const perStage = <T>(f: (s: StageCapacity) => T) =>
    Object.fromEntries(stagesCapacity.map((s) => [s.stage, f(s)]));
  return JSON.stringify({
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
  });
}

function main(args: readonly string[]): number {
  const unknown = args.filter((a) => a !== '--json');
  if (unknown.length > 0) {
    process.stderr.write(
      `capacity: unknown argument ${unknown.join(' ')}\nusage: npm run capacity [-- --json]\n`,
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
      const template = synthesizeStage(stage);
      results.push({
        stage,
        report: capacityModel({ template, topology, quotas, prices: priceBook, measured }, rates),
      });
    } catch (err) {
      process.stderr.write(`capacity: the ${stage} stage: ${(err as Error).message ?? err}\n`);
      return 1;
    }
  }
  process.stdout.write(
    `${args.includes('--json') ? json(results) : [...results.map(markdown), notes(results, measured.measuredAt)].join('\n\n')}\n`,
  );
  return 0;
}

process.exitCode = main(process.argv.slice(2));
