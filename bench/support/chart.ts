/**
 * The end-to-end latency chart docs/performance.md embeds (bench/results/e2e-latency.svg): the
 * distribution of commit -> all consumers processed as one curve per run, latency on a
 * logarithmic axis (the nudge's milliseconds and the schedule's seconds fit one picture) against
 * the percentile on a "nines" axis (50%, 90%, 99%, 99.9% equally spaced), so the tail that p99
 * reports is as visible as the median. Hand-made SVG: no browser, no dependency.
 */
import { percentile } from './stats';

export interface ChartSeries {
  readonly label: string;
  readonly color: string;
  /** Latencies in milliseconds, ascending. */
  readonly sortedMs: readonly number[];
  /** Dashed line (a run unlike the others, e.g. under another latency profile). */
  readonly dashed?: boolean;
}

const width = 760;
const height = 420;
const margin = { left: 64, right: 24, top: 40, bottom: 104 };
const plotWidth = width - margin.left - margin.right;
const plotHeight = height - margin.top - margin.bottom;
/** The top of the percentile axis: 99.9%. */
const maxNines = 3;

const escapeXml = (s: string) =>
  s.replace(
    /[<>&"']/g,
    (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c] as string,
  );

const tickLabel = (msValue: number) => (msValue >= 1_000 ? `${msValue / 1_000} s` : `${msValue} ms`);

/** The chart as an SVG document. */
export function e2eLatencyChart(title: string, series: readonly ChartSeries[]): string {
  const all = series.flatMap((s) =>
    s.sortedMs.length > 0 ? [s.sortedMs[0] as number, s.sortedMs.at(-1) as number] : [],
  );
  const minDecade = Math.floor(Math.log10(Math.max(1, Math.min(...all, 10))));
  const maxDecade = Math.ceil(Math.log10(Math.max(10, ...all)));
  const x = (msValue: number) =>
    margin.left +
    ((Math.log10(Math.max(msValue, 10 ** minDecade)) - minDecade) / (maxDecade - minDecade)) * plotWidth;
  /** Nines: 0 at 0%, 1 at 90%, 2 at 99%, 3 at 99.9%. */
  const nines = (fraction: number) => Math.min(maxNines, -Math.log10(1 - Math.min(fraction, 0.9999)));
  const y = (fraction: number) => margin.top + (1 - nines(fraction) / maxNines) * plotHeight;

  const grid: string[] = [];
  for (let d = minDecade; d <= maxDecade; d++) {
    const v = 10 ** d;
    grid.push(
      `<line x1="${x(v).toFixed(1)}" y1="${margin.top}" x2="${x(v).toFixed(1)}" y2="${margin.top + plotHeight}" class="grid"/>`,
      `<text x="${x(v).toFixed(1)}" y="${margin.top + plotHeight + 18}" text-anchor="middle">${tickLabel(v)}</text>`,
    );
  }
  for (const f of [0, 0.5, 0.75, 0.9, 0.99, 0.999]) {
    grid.push(
      `<line x1="${margin.left}" y1="${y(f).toFixed(1)}" x2="${margin.left + plotWidth}" y2="${y(f).toFixed(1)}" class="grid"/>`,
      `<text x="${margin.left - 8}" y="${(y(f) + 4).toFixed(1)}" text-anchor="end">${+(f * 100).toFixed(1)}%</text>`,
    );
  }

  const curves = series.map((s) => {
    const points: string[] = [];
    for (let i = 0; i < 1_000; i++) {
      const fraction = i / 1_000;
      const v = percentile(s.sortedMs, fraction * 100);
      if (Number.isFinite(v)) points.push(`${x(v).toFixed(1)},${y(fraction).toFixed(1)}`);
    }
    return `<polyline fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''} points="${points.join(' ')}"/>`;
  });

  const legend = series.map((s, i) => {
    const lx = margin.left + (i % 2) * (plotWidth / 2);
    const ly = margin.top + plotHeight + 44 + Math.floor(i / 2) * 20;
    return (
      `<line x1="${lx}" y1="${ly - 4}" x2="${lx + 24}" y2="${ly - 4}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>` +
      `<text x="${lx + 30}" y="${ly}">${escapeXml(s.label)}</text>`
    );
  });

  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12" role="img" aria-label="${escapeXml(title)}">`,
    `<title>${escapeXml(title)}</title>`,
    '<style>.grid{stroke:#ddd;stroke-width:1}text{fill:#333}</style>',
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="${width / 2}" y="22" text-anchor="middle" font-size="14" font-weight="bold">${escapeXml(title)}</text>`,
    ...grid,
    `<text x="${margin.left + plotWidth / 2}" y="${margin.top + plotHeight + 34}" text-anchor="middle">commit -> all consumers processed (log scale)</text>`,
    `<text transform="translate(16 ${margin.top + plotHeight / 2}) rotate(-90)" text-anchor="middle">percentile of approvals</text>`,
    ...curves,
    ...legend,
    '</svg>',
    '',
  ].join('\n');
}
