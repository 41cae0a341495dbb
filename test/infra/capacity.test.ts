import { describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { prodGoalApprovalsPerSec } from '../../infra/aws/capacity/goal';
import { readMeasuredCosts } from '../../infra/aws/capacity/measured';
import { type CapacityReport, capacityModel } from '../../infra/aws/capacity/model';
import { quotas, quotasIn, regions } from '../../infra/aws/capacity/quotas';
import { stageCapacity } from '../../infra/aws/capacity/render';
import { writeUnitsPerApproval } from '../../infra/aws/capacity/warm-throughput';
import type { CfnTemplate } from '../../infra/aws/cost/model';
import { priceBook } from '../../infra/aws/cost/prices';
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
    ).toBeGreaterThanOrEqual(prodGoalApprovalsPerSec);
  });

  it('goal: at 10,000 approvals/s only account quotas, the reservations they bound and new tables’ warm writes are at their limit', () => {
    const top = report.byRate.find((r) => r.approvalsPerSec === 10_000);
    const kindOf = (name: string) => component(name)?.kind;

    expect(top?.quotaIncreases.length).toBeGreaterThan(0);
    // A reservation fits within the account's quota less the 100 Lambda keeps unreserved, so
    // raising the quota is what makes room to raise it; a new table's warm writes are what it
    // serves until it has served more (and -c prewarmApprovalsPerSecond raises them).
    // A consumer's mapping's maximum concurrency is a bound of that kind too: past it the
    // consumer's events wait in its queue (later, never lost), and raising it takes the pool's room.
    for (const name of top?.ownReached ?? [])
      expect(
        name.endsWith('(reserved)') || name.endsWith('(maximum concurrency)') || kindOf(name) === 'launch',
        name,
      ).toBe(true);
    expect(
      report.components.filter((c) => c.kind === 'design' && c.shares[3] !== undefined && c.shares[3] >= 1),
    ).toEqual([]);
  });

  it('goal: a new prod stack takes the goal rate from its first minute: every table’s warm writes serve it', () => {
    const launch = report.components.filter((c) => c.kind === 'launch');

    expect(launch.map((c) => c.name)).toEqual(
      expect.arrayContaining([
        'DynamoDB new table, inbox, warm writes',
        'DynamoDB new index, inbox open-records, warm writes',
      ]),
    );
    for (const c of launch)
      expect(c.limitApprovalsPerSec, c.name).toBeGreaterThanOrEqual(prodGoalApprovalsPerSec);
  });

  it('goal: the tasks API’s reservation serves the goal rate, and the reservations leave the account’s shared pool for the rest of the path', () => {
    const tasksApi = component('Lambda concurrency, tasks-api (reserved)');
    const pool = component('Lambda concurrency, account');

    expect(tasksApi?.limitApprovalsPerSec).toBeGreaterThanOrEqual(prodGoalApprovalsPerSec);
    expect(pool?.limitApprovalsPerSec).toBeGreaterThanOrEqual(prodGoalApprovalsPerSec);
  });

  it('the write units the stack sizes warm throughput from are the ones the model reads off the template', () => {
    const perApproval = writeUnitsPerApproval(topology, priceBook);

    expect(component('DynamoDB on-demand table, inbox')?.perApproval).toBe(perApproval.inbox.table);
    expect(component('DynamoDB on-demand index, inbox open-records')?.perApproval).toBe(
      perApproval.inbox.index,
    );
    expect(component('DynamoDB on-demand table, content index')?.perApproval).toBe(
      perApproval.declared.contentIndex,
    );
  });

  it('per Region: every Region of the report names its EventBridge and API Gateway quotas with their sources, and the rates at which they bind', () => {
    const template = synthPipeline({ stage: 'prod' }).json as CfnTemplate;
    const byRegion = stageCapacity('prod', template, topology, readMeasuredCosts());

    expect(byRegion.map((r) => r.region)).toEqual(regions);
    for (const { region, report: r } of byRegion) {
      const invocations = r.components.find((c) => c.name === 'EventBridge target invocations');
      expect(invocations?.limit, region).toBe(quotasIn(region).eventBridgeInvocationsTps.value);
      expect(invocations?.limitFrom, region).toMatch(/eb-quota\.html \(read \d{4}-\d{2}-\d{2}\)/);
      // Nothing of ours binds below the goal in any Region; what does is a quota to raise.
      expect(r.firstOwnLimit?.approvalsPerSec ?? Number.POSITIVE_INFINITY, region).toBeGreaterThanOrEqual(
        prodGoalApprovalsPerSec,
      );
    }
    const smaller = byRegion.find((r) => r.region === 'sa-east-1')?.report;
    expect(smaller?.byRate.find((r) => r.approvalsPerSec === 1_000)?.quotaIncreases).toContain(
      'EventBridge target invocations',
    );
  });
});
