import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type CliBenchResult, cliMarkdown } from '../../bench/support/cli-report';
import { type ColdStartResult, coldStartMarkdown } from '../../bench/support/cold-start-report';
import { type GrowthResult, growthMarkdown } from '../../bench/support/growth-report';
import { type ModelResult, modelMarkdown } from '../../bench/support/model-report';
import { benchReportSchema, toMarkdown } from '../../bench/support/report';
import { topology } from '../../functions/topology';
import { type DocPage, readDoc, readSection, replaceSection } from '../../infra/docs/doc-section';
import { generatedSections } from '../../scripts/docs';

// Figures a script measures are written into docs/ by that script (`--docs`), between markers
// naming the command, never typed: each section here is rendered again from the result the
// script committed beside it and must be what the docs carry. (The cost and capacity sections
// are rendered from the synthesized stacks: test/infra/generated-docs.test.ts.)

const result = <T>(name: string): T =>
  JSON.parse(readFileSync(new URL(`../../bench/results/${name}`, import.meta.url), 'utf8')) as T;

/** Every generated section of every docs page, and the test that holds it. */
const heldBy: Readonly<Record<string, DocPage>> = {
  bench: 'docs/performance.md',
  'cold-start': 'docs/aws.md',
  growth: 'docs/performance.md',
  model: 'docs/performance.md',
  cli: 'docs/operations.md',
  cost: 'docs/aws.md',
  capacity: 'docs/aws.md',
  settings: 'docs/aws.md', // test/unit/settings.test.ts
};

/** A section's body as a page holds it: without the trailing newline. */
const asSection = (markdown: string) => markdown.replace(/\n$/, '');

describe('generated sections of docs/', () => {
  it('carries npm run bench as bench/results/latest.json has it', () => {
    // The committed result, checked against the report's schema (a result older than a field fails here).
    const { e2ePercentilesMs: _, ...report } = result<Record<string, unknown>>('latest.json');
    expect(readSection(readDoc('docs/performance.md'), 'bench')).toBe(
      asSection(toMarkdown(benchReportSchema.parse(report))),
    );
  });

  it('carries bench:model as bench/results/model.json has it', () => {
    expect(readSection(readDoc('docs/performance.md'), 'model')).toBe(
      asSection(modelMarkdown(result<ModelResult>('model.json'))),
    );
  });

  it('carries bench:cold-start as bench/results/cold-start.json has it', () => {
    expect(readSection(readDoc('docs/aws.md'), 'cold-start')).toBe(
      asSection(coldStartMarkdown(result<ColdStartResult>('cold-start.json'))),
    );
  });

  it('carries bench:growth as bench/results/growth.json has it', () => {
    expect(readSection(readDoc('docs/performance.md'), 'growth')).toBe(
      growthMarkdown(result<GrowthResult>('growth.json')),
    );
  });

  it('carries bench:cli as bench/results/cli.json has it', () => {
    expect(readSection(readDoc('docs/operations.md'), 'cli')).toBe(
      cliMarkdown(result<CliBenchResult>('cli.json')),
    );
  });

  it('has no generated section that no test holds to its source', () => {
    const found: string[] = [];
    for (const file of readdirSync(new URL('../../docs/', import.meta.url))) {
      const text = readDoc(`docs/${file}` as DocPage);
      for (const m of text.matchAll(/<!-- generated:([a-z0-9-]+) \(/g)) found.push(`${m[1]} in docs/${file}`);
    }
    expect(found.sort()).toEqual(
      Object.entries(heldBy)
        .map(([name, page]) => `${name} in ${page}`)
        .sort(),
    );
  });

  it('has npm run docs write every one of them, where it is', () => {
    // `npm run docs` (scripts/docs.ts) is the one command the README names for regenerating them.
    expect(
      generatedSections(topology)
        .map((s) => `${s.name} in ${s.page}`)
        .sort(),
    ).toEqual(
      Object.entries(heldBy)
        .map(([name, page]) => `${name} in ${page}`)
        .sort(),
    );
  });

  it('renders the measured sections in npm run docs as the benchmarks write them', () => {
    const sections = generatedSections(topology);
    for (const name of ['bench', 'model', 'cold-start', 'growth', 'cli']) {
      const section = sections.find((s) => s.name === name);
      expect(asSection(section?.render() ?? ''), name).toBe(
        readSection(readDoc(section?.page ?? 'docs/x.md'), name),
      );
    }
  });
});

describe('replaceSection', () => {
  const page =
    'intro\n<!-- generated:x (npm run x -- --docs) -->\nold\nlines\n<!-- /generated:x -->\nafter\n';

  it('replaces only what lies between the markers, keeping both', () => {
    const next = replaceSection(page, 'x', 'new\n');
    expect(next).toBe(
      'intro\n<!-- generated:x (npm run x -- --docs) -->\nnew\n<!-- /generated:x -->\nafter\n',
    );
    expect(readSection(next, 'x')).toBe('new');
  });

  it('refuses a page without the markers rather than writing nowhere', () => {
    expect(() => replaceSection('no markers here\n', 'x', 'new')).toThrow(/no <!-- generated:x/);
    expect(readSection('no markers here\n', 'x')).toBeUndefined();
  });
});
