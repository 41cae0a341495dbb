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
