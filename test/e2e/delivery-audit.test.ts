import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { DeleteItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import type { AuditListing } from '../../shared/ops/ops-api';
import { type ConsumerName, consumerPolicyOf, type RuleSpec } from '../../shared/topology';
import { dynamoClient } from '../support/dynamo';
import { deliveryBoundMs, type FullStatus, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { approvalEffects, perConsumer, subscriberNames } from '../support/topology-expectations';
import { waitFor } from '../support/wait-for';

// Every fault the delivery audit exists for, produced on the local runtime: each makes the
// audit report exactly the affected (event, consumer) pairs, and its redrive clears them,
// each effect still once. The audit runs when the test says (a long period, grace 0: a test
// waits for the pipeline to settle first, which is what the grace period stands for).

const approvedRule = topology.rules.find((r) => r.name === 'content-approved') as RuleSpec;
/** The consumers `content.withdrawn` goes to (the index among them). */
const withdrawnBy = subscriberNames(topology.eventTypes.withdrawn);
/** The archive function fails to run for tasks with this title (an invoke that never succeeds), while set. */
const doomedTitle = 'the archive cannot take this one';
let archiveFailsFor: string | undefined = doomedTitle;
const day = 24 * 3600 * 1000;

const bin = fileURLToPath(new URL('../../bin/pipeline.mjs', import.meta.url));

/** `npx pipeline …` as a user runs it: the real launcher in a process of its own. */
function pipeline(args: string[]) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      // A bound on a hung launcher, not a speed.
      { cwd: tmpdir(), env: { ...process.env, NO_COLOR: '1' }, timeout: 120_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

let runtime: Runtime;
let dir: string;
let client: ReturnType<typeof pipelineClient>;
/** How far the bus's clock is ahead of real time. */
let busAheadMs = 0;

beforeAll(async () => {
  dir = tempDataDir('pipeline-audit-');
  runtime = await startRuntime({
    dataDir: dir,
    port: 0,
    sweepMs: 3_000,
    audit: { periodMs: 3_600_000, settings: { graceSeconds: 0, pageSize: 250, maxPagesPerRun: 2 } },
    busClock: () => Date.now() + busAheadMs,
    seams: {
      // Lambda failing to run the archive function for one task's event (throttled, broken).
      lambda: (name, fn) =>
        (name === 'consumer-archive'
          ? async (...args: unknown[]) => {
              const event = args[0] as { detail?: { data?: { title?: string } } };
              if (archiveFailsFor !== undefined && event.detail?.data?.title === archiveFailsFor) {
                throw new Error('injected: the invoke failed');
              }
              return fn(...(args as Parameters<typeof fn>));
            }
          : fn) as typeof fn,
    },
  });
  client = pipelineClient(runtime.url);
}, 120_000);

afterAll(async () => {
  await runtime?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Creates and approves `n` tasks (titled `title`); their approve events' ids. */
async function approve(n: number, title = 'audited'): Promise<{ taskId: string; eventId: string }[]> {
  const out: { taskId: string; eventId: string }[] = [];
  for (let i = 0; i < n; i++) {
    const created = await client.call<{ taskId: string }>('POST', '/tasks', { title, assignee: 'ana' });
    const approved = await client.call<{ eventId: string }>(
      'POST',
      `/tasks/${created.body.taskId}/approve`,
      {},
    );
    expect(approved.status).toBe(200);
    out.push({ taskId: created.body.taskId, eventId: approved.body.eventId });
  }
  return out;
}

/** Nothing left to happen: the outbox drained, then no delivery on the bus, no inbox record open. */
async function settle(): Promise<FullStatus> {
  return waitFor(
    async () => {
      const status = await client.status();
      return { status, deliveries: runtime.bus.pendingDeliveries };
    },
    ({ status, deliveries }) =>
      status.outbox.pending === 0 &&
      deliveries === 0 &&
      Object.values(status.consumers).every((c) => c.inProgress + c.failed === 0),
    { timeoutMs: deliveryBoundMs, intervalMs: 100, what: 'a settled pipeline' },
  ).then((s) => s.status);
}

/** One audit run, then what `GET /ops/audit` lists. */
async function audit(): Promise<AuditListing> {
  await runtime.audit.run();
  return (await client.call<AuditListing>('GET', '/ops/audit')).body;
}

const pairs = (listing: AuditListing) => listing.findings.map((f) => `${f.eventId} ${f.consumer}`).sort();
const expected = (ids: readonly string[], consumers: readonly ConsumerName[]) =>
  ids.flatMap((id) => consumers.map((c) => `${id} ${c}`)).sort();

/** `before` (a status's effects) with the effects of `n` more approvals of distinct tasks. */
function plusApprovals(before: Record<string, number> | null | undefined, n: number): Record<string, number> {
  return Object.fromEntries(Object.entries(approvalEffects(n)).map(([k, v]) => [k, (before?.[k] ?? 0) + v]));
}

/** `POST /ops/audit/redrive {all}`, the pipeline settled, then an audit run: nothing left missing. */
async function redriveAndReaudit(): Promise<void> {
  const redriven = await client.call<{ redriven: number; complete: boolean }>('POST', '/ops/audit/redrive', {
    all: true,
  });
  expect(redriven.body.complete).toBe(true);
  await settle();
  const after = await audit();
  expect(after.findings).toEqual([]);
  expect(after.undelivered).toEqual(perConsumer(0));
}

describe('the delivery audit on the local runtime', () => {
  it('a clean run of 1,000 approvals reports nothing missing, walking it in bounded runs', async () => {
    await client.createAndApprove(1_000);
    const status = await settle();
    expect(status.outbox.delivered).toBe(1_000);
    const runs: number[] = [];
    for (let caughtUp = false; !caughtUp; ) {
      const report = await runtime.audit.run();
      runs.push(report.audited);
      caughtUp = report.caughtUp;
    }
    // 250 events a page, 2 pages a run: four runs of 500, 500 and what is left.
    expect(runs.every((n) => n <= 500)).toBe(true);
    expect(runs.reduce((a, b) => a + b, 0)).toBe(1_000);
    const listing = (await client.call<AuditListing>('GET', '/ops/audit')).body;
    expect(listing).toMatchObject({ audited: 1_000, behindSeconds: 0, findings: [] });
    expect(listing.undelivered).toEqual(perConsumer(0));
    expect((await client.status()).alarms).toMatchObject({ undelivered: 'OK' });
  }, 600_000);

  it('a rule disabled by hand: its events reported for its consumer only, then redriven through the CLI', async () => {
    expect(runtime.bus.disableRule('content-withdrawn')).toBe(true);
    const tasks = await approve(3);
    const withdrawn: string[] = [];
    for (const t of tasks.slice(0, 2)) {
      const res = await client.call<{ eventId: string }>('POST', `/tasks/${t.taskId}/withdraw`, {});
      withdrawn.push(res.body.eventId);
    }
    await settle();

    const found = await audit();
    expect(withdrawnBy).toContain('index');
    expect(pairs(found)).toEqual(expected(withdrawn, withdrawnBy));
    const status = await client.status();
    expect(status.audit.undelivered).toEqual(perConsumer((c) => (withdrawnBy.includes(c) ? 2 : 0)));
    expect(status.alarms.undelivered).toBe('ALARM');

    // An operator's view and redrive, through the launcher a user runs, against the runtime.
    runtime.bus.enableRule('content-withdrawn');
    const cli = (...argv: string[]) => pipeline([...argv, '--url', runtime.url]);
    const listed = await cli('audit', '--wide'); // one line per finding
    expect(listed.code).toBe(0);
    for (const id of withdrawn)
      for (const c of withdrawnBy) expect(listed.stdout).toMatch(new RegExp(`${id}\\s+${c}\\s+\\d{4}-`));
    const redriven = await cli('audit', '--redrive');
    expect(redriven).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('re-sent 2 missing deliveries'),
    });
    await settle();
    expect((await audit()).findings).toEqual([]);
    for (const t of tasks.slice(0, 2)) {
      const trace = await client.call<{
        events: { eventType: string; consumers: Record<string, { status: string } | null> }[];
      }>('GET', `/ops/tasks/${t.taskId}/trace`);
      const withdrawal = trace.body.events.find((e) => e.eventType === topology.eventTypes.withdrawn);
      for (const c of withdrawnBy) expect(withdrawal?.consumers[c]?.status).toBe('PROCESSED');
    }
    // One line per consumer (`--wide`: within 80 columns a longer list of consumers is printed in blocks).
    const cliStatus = (await cli('status', '--wide')).stdout;
    for (const c of withdrawnBy)
      expect(cliStatus).toMatch(new RegExp(`${c}\\s+\\d+\\s+0\\s+0\\s+0\\s+-\\s+-\\s+0`));
  }, 300_000);

  it('a rule pattern changed by hand: its events reported for every consumer it routes to, then redriven', async () => {
    runtime.bus.putRule({
      ...approvedRule,
      pattern: { ...approvedRule.pattern, 'detail-type': ['content.approved.v2'] },
    });
    const events = (await approve(2)).map((t) => t.eventId);
    await settle();

    expect(pairs(await audit())).toEqual(expected(events, approvedRule.targets));

    runtime.bus.putRule(approvedRule);
    const before = (await client.status()).effects;
    await redriveAndReaudit();
    // Each re-sent event acted once in each consumer.
    expect((await client.status()).effects).toEqual(plusApprovals(before, 2));
  }, 300_000);

  it('a target misconfigured (archive’s target invokes notify): the events reported for archive only, then redriven', async () => {
    runtime.bus.putRule({
      ...approvedRule,
      targets: approvedRule.targets.map((t) => (t === 'archive' ? 'notify' : t)),
    });
    const before = (await client.status()).effects;
    const events = (await approve(2)).map((t) => t.eventId);
    await settle();

    expect(pairs(await audit())).toEqual(expected(events, ['archive']));
    // notify got each event twice and kept it once.
    expect((await client.status()).effects?.notificationsSent).toBe((before?.notificationsSent ?? 0) + 2);

    runtime.bus.putRule(approvedRule);
    await redriveAndReaudit();
    expect((await client.status()).effects?.archivedObjects).toBe((before?.archivedObjects ?? 0) + 2);
    // Every consumer of the approvals has acted once on each.
    expect((await client.status()).effects).toEqual(plusApprovals(before, 2));
  }, 300_000);

  it('a dead letter that expired after its queue’s 14 days: its event reported for that consumer, then redriven', async () => {
    const retriedBefore = runtime.bus.counters.retried;
    const [doomed] = await approve(1, doomedTitle);
    // The archive invoke failed once; the bus's clock then passes the consumer's maximum event
    // age, so the next failure dead-letters the delivery.
    await waitFor(
      () => runtime.bus.counters.retried,
      (n) => n > retriedBefore,
      { timeoutMs: 60_000, what: 'a failed archive invoke' },
    );
    busAheadMs +=
      consumerPolicyOf(topology, 'archive').maxEventAgeSeconds * 1_000 +
      consumerPolicyOf(topology, 'archive').backoff.maxMs +
      1_000;
    await waitFor(client.status, (s) => s.deadLetters === 1, { timeoutMs: 60_000, what: 'the dead letter' });
    // 14 days on, the queue has dropped the letter: nothing holds the event for archive any more.
    busAheadMs += consumerPolicyOf(topology, 'archive').deadLetterRetentionSeconds * 1_000 + day;
    expect((await client.status()).deadLetters).toBe(0);
    await settle();

    expect(pairs(await audit())).toEqual(expected([doomed?.eventId as string], ['archive']));

    // The invoke works again (the cause fixed); the audit's redrive delivers what nothing else holds.
    archiveFailsFor = undefined;
    const before = (await client.status()).effects;
    await redriveAndReaudit();
    expect((await client.status()).effects?.archivedObjects).toBe((before?.archivedObjects ?? 0) + 1);
  }, 300_000);

  it('an inbox record deleted by hand: its event reported for that consumer, then redriven', async () => {
    const [task] = await approve(1);
    const eventId = task?.eventId as string;
    await settle();
    const dynamo = dynamoClient(runtime.consumers.dynamo.endpoint, runtime.credentials.aws);
    try {
      await dynamo.send(
        new DeleteItemCommand({
          TableName: 'content-pipeline-inbox',
          Key: { pk: { S: `notify#${eventId}` } },
        }),
      );
    } finally {
      dynamo.destroy();
    }

    expect(pairs(await audit())).toEqual(expected([eventId], ['notify']));

    const before = (await client.status()).effects;
    await redriveAndReaudit();
    // The notification file dedupes by event: the re-sent event notified nobody twice.
    expect((await client.status()).effects?.notificationsSent).toBe(before?.notificationsSent);
  }, 300_000);
});
