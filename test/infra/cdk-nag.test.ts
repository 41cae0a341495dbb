import { type App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks, ServerlessChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { synthPipeline } from './support/synth';

const variants = {
  'sandbox on AWS': { stage: 'sandbox' },
  'prod on AWS': { stage: 'prod', alarmEmail: 'ops@example.com' },
  LocalStack: { target: 'localstack' },
} as const;

function allConstructs(root: IConstruct): IConstruct[] {
  return [root, ...root.node.children.flatMap(allConstructs)];
}

describe.each(Object.entries(variants))('cdk-nag on the %s variant', (_name, context) => {
  let app: App;
  beforeAll(() => {
    // Synthesis itself runs both packs as validation plugins and throws on any finding.
    app = synthPipeline(context, { cfnValidation: true }).app;
  });

  it('reports no unacknowledged error or warning in the AWS Solutions and Serverless packs', () => {
    for (const pack of [new AwsSolutionsChecks(), new ServerlessChecks()]) {
      const report = pack.validateScope(app);
      const findings = report.violations.map(
        (v) =>
          `${v.ruleName} (${v.severity}) at ${v.violatingResources.map((r) => r.resourceLogicalId).join(', ')}`,
      );
      expect(findings, pack.name).toEqual([]);
    }
  });

  it('gives a reason with every acknowledgement', () => {
    const acks = allConstructs(app).flatMap((c) =>
      c.node.metadata
        .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
        // Recorded as { [ruleId]: reason }.
        .flatMap((m) => Object.entries(m.data as Record<string, unknown>))
        .map(([id, reason]) => ({ path: c.node.path, id, reason: String(reason ?? '') })),
    );
    expect(acks.length).toBeGreaterThan(0);
    for (const ack of acks) {
      expect(ack.id, ack.path).toBeTruthy();
      expect(ack.reason.trim().length, `${ack.path} ${ack.id}`).toBeGreaterThan(20);
    }
  });
});

// The acknowledgements must hold wherever the stack is synthesized: the cdk CLI always sets a
// region (and an account with credentials), and an app of a user's own may pin both, in any
// partition. Synthesis throws on any unacknowledged finding.
const environments = {
  'a region only': { region: 'eu-west-1' },
  'an account and a region': { account: '123456789012', region: 'eu-west-1' },
  'the China partition': { account: '123456789012', region: 'cn-north-1' },
  'the GovCloud partition': { account: '123456789012', region: 'us-gov-west-1' },
} as const;

describe.each(Object.entries(environments))('cdk-nag on a stack pinned to %s', (_name, env) => {
  it('synthesizes the prod variant with no unacknowledged finding', () => {
    const { app } = synthPipeline({ stage: 'prod', alarmEmail: 'ops@example.com' }, { env });
    const violations = new AwsSolutionsChecks().validateScope(app).violations;
    expect(violations.map((v) => v.ruleName)).toEqual([]);
  });
});
