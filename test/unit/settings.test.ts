import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  contextKeys,
  contextTable,
  parseSettings,
  renderDefault,
  resolveSettings,
  settingDefault,
} from '../../infra/aws/settings';
import { readSection } from '../../infra/docs/doc-section';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const parse = (ctx: Record<string, unknown>) => parseSettings((k) => ctx[k]);

/** Each prop of `ContentPipelineProps` with the text of its `@default` tag (undefined when it has none). */
function documentedProps(): Map<string, string | undefined> {
  const source = readFileSync(join(root, 'infra/aws/content-pipeline.ts'), 'utf8');
  const start = source.indexOf('export interface ContentPipelineProps {');
  const body = source.slice(start, source.indexOf('\n}\n', start));
  const props = new Map<string, string | undefined>();
  // The optional props: a required one (the topology) has no default to document.
  for (const m of body.matchAll(/\/\*\*((?:(?!\*\/)[\s\S])*)\*\/\s*readonly (\w+)\?:/g)) {
    const doc = (m[1] as string).replace(/^\s*\* ?/gm, '');
    props.set(m[2] as string, /@default (.+)/.exec(doc)?.[1]?.trim());
  }
  return props;
}

describe('the settings table (infra/aws/settings.ts settingSpecs)', () => {
  it('fills in each stage’s defaults from the table', () => {
    for (const stage of ['sandbox', 'prod'] as const) {
      const settings = parse({ stage });
      for (const key of contextKeys.filter((k) => k !== 'stage')) {
        expect(settings[key], `${stage} ${key}`).toEqual(settingDefault(key, stage));
      }
    }
    expect(parse({})).toMatchObject({ stage: 'sandbox', dbMaxCapacity: 2, dashboard: false });
    expect(parse({ stage: 'prod' })).toMatchObject({ dbMinCapacity: 0.5, apiRatePerSecond: 15_000 });
  });

  it('takes -c strings, `none` and JSON values alike, and a blank value as unset', () => {
    expect(
      parse({
        relayReservedConcurrency: '3',
        dashboard: 'true',
        relaySweepMinutes: '5',
        opsRatePerSecond: '',
      }),
    ).toMatchObject({
      relayReservedConcurrency: 3,
      dashboard: true,
      relaySweepMinutes: 5,
      opsRatePerSecond: 20,
    });
    expect(parse({ relayReservedConcurrency: 'none' }).relayReservedConcurrency).toBeUndefined();
    expect(parse({ roleCredentialsVersion: 2 }).roleCredentialsVersion).toBe('2');
  });

  it('checks the capacities against each other with the stage’s defaults filled in', () => {
    // A sandbox's maximum is 2 ACU unless given: a minimum of 4 alone cannot deploy.
    expect(() => parse({ dbMinCapacity: '4' })).toThrow(
      /invalid CDK context: dbMinCapacity: must not exceed dbMaxCapacity \(4 > 2\)/,
    );
    expect(parse({ stage: 'prod', dbMinCapacity: '4' }).dbMinCapacity).toBe(4);
  });

  it('names the source and every bad key in one error', () => {
    expect(() =>
      resolveSettings({ relaySweepMinutes: 0, apiRatePerSecond: -1, target: 'gcp' }, 'ContentPipeline props'),
    ).toThrow(/invalid ContentPipeline props: target: .*relaySweepMinutes: .*apiRatePerSecond: /);
  });
});

describe('the settings as documented', () => {
  it('docs/aws.md holds the context table the settings table writes (`npm run docs:settings`)', () => {
    const page = readFileSync(join(root, 'docs/aws.md'), 'utf8');
    expect(readSection(page, 'settings')).toBe(contextTable());
    for (const key of contextKeys) expect(page, key).toContain(`| \`${key}\` |`);
  });

  it('makes each setting a prop of ContentPipeline whose @default is the table’s, and documents every optional prop’s default', () => {
    const props = documentedProps();
    for (const key of contextKeys) expect(props.get(key), key).toBe(renderDefault(key));
    const undocumented = [...props].filter(([, d]) => d === undefined).map(([name]) => name);
    expect(undocumented).toEqual([]);
    expect(props.size).toBeGreaterThan(contextKeys.length);
  });
});
