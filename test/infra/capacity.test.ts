import { describe, expect, it } from 'vitest';
import { readMeasuredCosts } from '../../infra/aws/capacity/measured';
import { type CapacityReport, capacityModel } from '../../infra/aws/capacity/model';
import { quotas } from '../../infra/aws/capacity/quotas';
import type { CfnTemplate } from '../../infra/aws/cost/model';
import { priceBook } from '../../infra/aws/cost/prices';
import { topology } from '../../shared/topology';
import { synthPipeline } from './support/synth';

const rates = [10, 100, 1_000, 10_000];
const approveThrottle = 'API Gateway throttle, POST /tasks/{taskId}/approve';

/** The capacity model on the prod stage's synthesized template, with the committed measurements. */
const report: CapacityReport = capacityModel(
  {
    template: synthPipeline({ stage: 'prod' }).json as CfnTemplate,
    topology,
    quotas,
    prices: priceBook,
    measured: readMeasuredCosts(),
  },
  rates,
);

const component = (name: string) => report.components.find((c) => c.name === name);

describe('capacity of the prod stage (npm run capacity)', () => {
  it('holds every component the issue asks about against a limit with its source', () => {
    for (const name of [
      'API Gateway account throttle',
      'Lambda concurrency, account',
      'Lambda synchronous invocations',
      'Lambda asynchronous invocations (nudges)',
      'RDS Data API requests',
      'Aurora capacity',
      'EventBridge PutEvents',
      'EventBridge target invocations',
      'DynamoDB on-demand table, inbox',
      'CloudWatch PutMetricData',
      'CloudWatch Logs ingestion',
    ])
      expect(component(name), name).toBeDefined();
    expect(report.components.some((c) => c.name.startsWith('DynamoDB partition, inbox table'))).toBe(true);
    expect(report.components.some((c) => c.name.startsWith('SQS'))).toBe(true);
    for (const c of report.components.filter((x) => x.kind === 'quota'))
      expect(c.limitFrom, c.name).toMatch(/https:\/\/docs\.aws\.amazon\.com\/.*\(read \d{4}-\d{2}-\d{2}\)/);
    for (const c of report.components.filter((x) => x.kind === 'own'))
      expect(c.limitFrom, c.name).toMatch(/^(template|topology): /);
  });

  it("follows the template's throttle: no limit of ours is above the approve route's", () => {
    const throttle = component(approveThrottle);

    expect(report.firstOwnLimit?.approvalsPerSec ?? Number.POSITIVE_INFINITY).toBeLessThanOrEqual(
      throttle?.limitApprovalsPerSec ?? Number.POSITIVE_INFINITY,
    );
  });

  it('goal: nothing of ours limits prod below 1,000 approvals/s with default quotas', () => {
    expect(
      report.firstOwnLimit?.approvalsPerSec ?? Number.POSITIVE_INFINITY,
      report.firstOwnLimit?.component,
    ).toBeGreaterThanOrEqual(1_000);
  });

  it('goal: at 10,000 approvals/s only account quotas are at their limit, and the report names each', () => {
    const top = report.byRate.find((r) => r.approvalsPerSec === 10_000);

    expect(top?.ownReached).toEqual([]);
    expect(top?.quotaIncreases.length).toBeGreaterThan(0);
    expect(top?.reached).toEqual(top?.quotaIncreases);
  });
});
