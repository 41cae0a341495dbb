import { describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { type RehearsalReport, runRehearsal } from './rehearsal';

describe('offline deploy rehearsal: the synthesized sandbox stack’s bundles, run as Lambda runs them', () => {
  let report: RehearsalReport;

  it('walks the whole path: a first deploy, approve, relay, every consumer through its queue, their retries, the ops API, each redrive and the delivery audit', {
    // A bound on a hang: the walk took 75 s beside other suites (load average 13 to 21 on 2 cores).
    timeout: 900_000,
  }, async () => {
    report = await runRehearsal();
    // The assembly the cdk CLI wrote, as a user with credentials runs it, not an in-process App.
    expect(report.synthesizedBy).toMatch(
      /^CDK_DEFAULT_REGION=\S+ CDK_DEFAULT_ACCOUNT=\d{12} npx cdk synth -c stage=sandbox /,
    );
    expect(report.initErrors).toEqual([]);
    expect(report.steps.filter((s) => !s.ok)).toEqual([]);
    expect(report.steps.map((s) => s.step)).toHaveLength(16);
    // A first deploy in CloudFormation's order raises no alarm; retries need no person.
    expect(report.steps[0]?.step).toMatch(/^first deploy in CloudFormation's order/);
    expect(report.steps.map((s) => s.step)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/transient outage: notify's message comes back to its queue/),
        expect.stringMatching(/permanent failure ends DEAD after maxPermanentAttempts/),
        expect.stringMatching(/fails before its inbox on every receive: its queue's DLQ/),
        expect.stringMatching(/nothing but its queue hands a consumer an event/),
        expect.stringMatching(/found by GET \/tasks and rejected; notify alone/),
      ]),
    );
    // The relay wakes itself with SendMessage on its queue, never by switching a rule.
    const relay = Object.entries(report.serviceNames).find(([, name]) => name === 'outbox-relay')?.[0] ?? '';
    expect(report.actionsByFunction[relay]).toContain('sqs:SendMessage');
    expect(report.actionsByFunction[relay]?.filter((a) => /Rule$/.test(a))).toEqual([]);
    // The pipeline's six functions and one per consumer, each run.
    expect(report.functions).toBe(6 + topology.registry.length);
    expect(Object.keys(report.functionsRun)).toHaveLength(report.functions);
    // Each consumer's poller received and deleted with the consumer's role, and its handler
    // checked each receipt (ChangeMessageVisibility), all judged against that role.
    for (const [id, name] of Object.entries(report.serviceNames).filter(([, n]) => n.startsWith('consumer-')))
      expect(report.actionsByFunction[id], name).toEqual(
        expect.arrayContaining(['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility']),
      );
    // Each bundle holds the SDK clients its function calls, and the relay's no more than it needs.
    expect(report.functionsRun[relay]?.sdkClients).toEqual(['EventBridge', 'RDS Data', 'SQS']);
    for (const [id, run] of Object.entries(report.functionsRun))
      expect(run.sdkClients.length, id).toBeGreaterThan(0);
  });

  it('makes no AWS call its role in the template would deny, and misses no environment variable', () => {
    expect(report.denied).toEqual([]);
    expect(report.deniedCalls).toBe(0);
    expect(report.missingEnv).toBe(0);
    // The consumers' inbox calls were judged against their leading-keys conditions, key by key.
    expect(report.conditionChecks).toBeGreaterThan(10);
    // Every function made calls, and the checks saw them all.
    expect(report.awsCalls).toBeGreaterThan(50);
    expect(Object.keys(report.actionsByFunction)).toHaveLength(6 + topology.registry.length);
  });
});
