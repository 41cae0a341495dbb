/**
 * `npm run docs [-- --check]`: writes every generated section of docs/ (the text between
 * `<!-- generated:<name> (...) -->` markers) from what it is made of now:
 * - from the code and the project's topology (`functions/topology.ts`): the cost and capacity
 *   tables (`npm run cost`, `npm run capacity`, from the stacks as they synthesize now) and the
 *   CDK context table (`npm run docs:settings`);
 * - from the results the benchmarks committed (bench/results/*.json): the tables each benchmark
 *   writes with `-- --docs`, rendered again (measuring again is each benchmark's own command).
 * After a change to the pipeline (a consumer added, a figure moved), this one command brings the
 * docs back to what the tests hold them to (test/unit/generated-docs.test.ts,
 * test/infra/generated-docs.test.ts). With `--check` it writes nothing and exits 1 naming each
 * section that is not what it would write. Offline, no credentials: the stacks synthesize
 * without bundling.
 */
import { readFileSync } from 'node:fs';
import { isMain } from '../bench/support/cli';
import { type CliBenchResult, cliMarkdown } from '../bench/support/cli-report';
import { type ColdStartResult, coldStartMarkdown } from '../bench/support/cold-start-report';
import { type GrowthResult, growthMarkdown } from '../bench/support/growth-report';
import { type ModelResult, modelMarkdown } from '../bench/support/model-report';
import { benchReportSchema, toMarkdown } from '../bench/support/report';
import { topology as projectTopology } from '../functions/topology';
import { readMeasuredCosts } from '../infra/aws/capacity/measured';
import { capacityText, stageCapacity, stages } from '../infra/aws/capacity/render';
import type { CfnTemplate } from '../infra/aws/cost/model';
import { costText, stageCost } from '../infra/aws/cost/render';
import { contextTable } from '../infra/aws/settings';
import { synthesizeStage } from '../infra/aws/synthesize';
import { type DocPage, readDoc, readSection, writeSection } from '../infra/docs/doc-section';
import type { Topology } from '../shared/topology';

/** One generated section: where it is, and its text as it would be written now. */
export interface GeneratedSection {
  readonly name: string;
  readonly page: DocPage;
  readonly render: () => string;
}

const result = <T>(file: string): T =>
  JSON.parse(readFileSync(new URL(`../bench/results/${file}`, import.meta.url), 'utf8')) as T;

/** Every generated section of docs/, for a pipeline of `topology`. */
export function generatedSections(topology: Topology): readonly GeneratedSection[] {
  const templates = new Map<string, CfnTemplate>();
  const template = (stage: (typeof stages)[number]): CfnTemplate => {
    const synthesized = templates.get(stage) ?? synthesizeStage(topology, stage);
    templates.set(stage, synthesized);
    return synthesized;
  };
  return [
    {
      name: 'cost',
      page: 'docs/aws.md',
      render: () => costText(stages.map((stage) => stageCost(stage, template(stage), topology))),
    },
    {
      name: 'capacity',
      page: 'docs/aws.md',
      render: () => {
        const measured = readMeasuredCosts();
        const results = stages.flatMap((stage) => stageCapacity(stage, template(stage), topology, measured));
        return capacityText(results, measured.measuredAt);
      },
    },
    { name: 'settings', page: 'docs/aws.md', render: () => contextTable() },
    {
      name: 'bench',
      page: 'docs/performance.md',
      render: () => {
        const { e2ePercentilesMs: _, ...report } = result<Record<string, unknown>>('latest.json');
        return toMarkdown(benchReportSchema.parse(report));
      },
    },
    {
      name: 'model',
      page: 'docs/performance.md',
      render: () => modelMarkdown(result<ModelResult>('model.json')),
    },
    {
      name: 'growth',
      page: 'docs/performance.md',
      render: () => growthMarkdown(result<GrowthResult>('growth.json')),
    },
    {
      name: 'cold-start',
      page: 'docs/aws.md',
      render: () => coldStartMarkdown(result<ColdStartResult>('cold-start.json')),
    },
    {
      name: 'cli',
      page: 'docs/operations.md',
      render: () => cliMarkdown(result<CliBenchResult>('cli.json')),
    },
  ];
}

function main(args: readonly string[]): number {
  const unknown = args.filter((a) => a !== '--check');
  if (unknown.length > 0) {
    process.stderr.write(`docs: unknown argument ${unknown.join(' ')}\nusage: npm run docs [-- --check]\n`);
    return 2;
  }
  const check = args.includes('--check');
  const stale: string[] = [];
  for (const section of generatedSections(projectTopology)) {
    const text = section.render().replace(/\n$/, '');
    const now = readSection(readDoc(section.page), section.name);
    if (now === text) {
      process.stderr.write(`docs: ${section.page} ${section.name}: up to date\n`);
    } else if (check) {
      stale.push(`${section.page} ${section.name}`);
    } else {
      writeSection(section.page, section.name, text);
      process.stderr.write(`docs: ${section.page} ${section.name}: written\n`);
    }
  }
  if (stale.length > 0) {
    process.stderr.write(`docs: not what npm run docs would write:\n  ${stale.join('\n  ')}\n`);
    return 1;
  }
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
