import { afterAll, describe, expect, it } from 'vitest';
import { type CliSynth, cdkCliSynth } from '../support/cdk-cli';

// The user's command through the cdk CLI binary itself, not an in-process App: the CLI sets
// CDK_DEFAULT_REGION (us-east-1 without a configured region) and, with credentials,
// CDK_DEFAULT_ACCOUNT, which an in-process synth never sees. Each variant once as a user without
// credentials runs it, once as a user with credentials in another region.

const variants = {
  sandbox: ['-c', 'stage=sandbox'],
  prod: ['-c', 'stage=prod'],
  localstack: ['-c', 'target=localstack'],
} as const;

const environments = {
  'no region or account': {},
  'CDK_DEFAULT_REGION=eu-west-1 CDK_DEFAULT_ACCOUNT=123456789012': {
    CDK_DEFAULT_REGION: 'eu-west-1',
    CDK_DEFAULT_ACCOUNT: '123456789012',
  },
} as const;

const cases = Object.entries(variants).flatMap(([variant, args]) =>
  Object.entries(environments).map(([envName, env]) => ({ variant, args, envName, env })),
);

const synths: CliSynth[] = [];
afterAll(() => {
  for (const s of synths) s.remove();
});

/** What a failed synth said, for the assertion's message. */
const findings = (s: CliSynth) =>
  `${s.command} (exit ${s.code})\n${s.stderr
    .split('\n')
    .filter((l) => /ERROR|Error|error/.test(l))
    .slice(0, 20)
    .join('\n')}`;

describe.each(cases)('npx cdk synth $variant, $envName', ({ args, env }) => {
  it('exits 0 with no error annotation, and writes the stack with its bundles', async () => {
    const synth = await cdkCliSynth(args, env);
    synths.push(synth);

    expect(synth.code, findings(synth)).toBe(0);
    expect(synth.stderr).not.toMatch(/Synthesis finished with errors|^ERROR /m);
    expect(synth.annotations.filter((a) => a.level === 'error')).toEqual([]);
    const template = synth.template<{ Resources: Record<string, { Type: string }> }>();
    expect(Object.values(template.Resources).some((r) => r.Type === 'AWS::Lambda::Function')).toBe(true);
  });
});
