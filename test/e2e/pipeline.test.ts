import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import {
  converged,
  deliveryBoundMs,
  type FullStatus,
  pipelineClient,
  tempDataDir,
} from '../support/pipeline-client';
import { approvalEffects, approvalsProcessed } from '../support/topology-expectations';
import { waitFor } from '../support/wait-for';

const runtimes: Runtime[] = [];
const dirs: string[] = [];

async function start(dataDir: string, extra: Partial<Parameters<typeof startRuntime>[0]> = {}) {
  const runtime = await startRuntime({ dataDir, port: 0, sweepMs: 3_000, ...extra });
  runtimes.push(runtime);
  return runtime;
}

afterEach(async () => {
  for (const r of runtimes.splice(0)) await r.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('the local pipeline end to end', () => {
  it(
    '100 tasks created and approved over HTTP reach every consumer of content.approved, each effect once',
    async () => {
      const dir = tempDataDir();
      dirs.push(dir);
      const runtime = await start(dir);
      const client = pipelineClient(runtime.url);

      await client.createAndApprove(100);
      // The processed counts land just after their records complete: wait for them too.
      const status = await waitFor(client.status, (s) => converged(s, 100) && counted(s, 100), {
        timeoutMs: deliveryBoundMs,
        intervalMs: 250,
      });

      expect(status.tasks.approved).toBe(100);
      expect(status.outbox).toMatchObject({ pending: 0, delivered: 100, dead: 0 });
      expect(processedOf(status)).toEqual(approvalsProcessed(100));
      // The counters the status reads agree with a count of the stores themselves.
      expect(status.effects).toEqual(approvalEffects(100));
      expect(await runtime.consumers.countEffects()).toEqual(status.effects);
      expect(status.deadLetters).toBe(0);
      expect(Object.values(status.alarms).every((a) => a === 'OK')).toBe(true);
    },
    2 * deliveryBoundMs,
  );

  it(
    'a graceful restart in the middle loses nothing',
    async () => {
      const dir = tempDataDir();
      dirs.push(dir);
      const first = await start(dir);
      await pipelineClient(first.url).createAndApprove(40);
      await first.stop();
      runtimes.splice(runtimes.indexOf(first), 1);

      const second = await start(dir);
      const client = pipelineClient(second.url);
      await client.createAndApprove(10);
      const status = await waitFor(client.status, (s) => converged(s, 50), {
        timeoutMs: deliveryBoundMs,
        intervalMs: 250,
      });
      expect(status.tasks.approved).toBe(50);
      expect(status.effects).toEqual(approvalEffects(50));
      expect(await second.consumers.countEffects()).toEqual(status.effects);
    },
    2 * deliveryBoundMs,
  );

  it(
    'with every local fault at 10% all 155 events end PROCESSED everywhere: zero DEAD, zero dead letters',
    async () => {
      const dir = tempDataDir();
      dirs.push(dir);
      // A new fault sequence each run (the interleaving differs anyway); printed to replay it.
      const seed = Date.now();
      console.info(`[pipeline e2e] PIPELINE_FAULT_SEED=${seed}`);
      const runtime = await start(dir, {
        faults: {
          busReject: 0.1,
          busAckLoss: 0.1,
          busDuplicate: 0.1,
          effectFailBefore: 0.1,
          effectFailAfter: 0.1,
        },
        faultSeed: seed,
      });
      const client = pipelineClient(runtime.url);
      const approvals = 155;
      await client.createAndApprove(approvals);
      // Settled: nothing pending or in flight, every event PROCESSED or DEAD in every consumer.
      // Retries wait out the consumers' real backoff (about 100 s in all beside other suites):
      // twice the delivery bound.
      const status = await waitFor(client.status, (s) => settled(s, approvals), {
        timeoutMs: 2 * deliveryBoundMs,
        intervalMs: 500,
      });

      // Faults are bad luck, never a reason for a person: transient failures retry until they pass.
      for (const [consumer, processed] of Object.entries(approvalsProcessed(approvals))) {
        expect(status.consumers[consumer], `${consumer}, seed ${seed}`).toMatchObject({ dead: 0, processed });
      }
      expect(status.outbox).toMatchObject({ pending: 0, dead: 0, delivered: approvals });
      expect(status.deadLetters).toBe(0);
      // Each effect once, though effects that acted and then failed (effectFailAfter) ran again:
      // the index write was stale, the archive object existed, the notification a duplicate.
      expect(runtime.consumers.injectedAfterFaults('notify')).toBeGreaterThan(0);
      expect(status.effects).toEqual(approvalEffects(approvals));
      expect(await runtime.consumers.countEffects()).toEqual(status.effects);
    },
    3 * deliveryBoundMs,
  );
});

/** Every consumer has counted at least the events `approvals` approvals send it. */
function counted(status: FullStatus, approvals: number): boolean {
  const processed = processedOf(status);
  return Object.entries(approvalsProcessed(approvals)).every(([c, n]) => (processed[c] ?? 0) >= n);
}

/** Each consumer's processed count, by name. */
function processedOf(status: FullStatus): Record<string, number | null> {
  return Object.fromEntries(Object.entries(status.consumers).map(([c, s]) => [c, s.processed]));
}

/** Nothing left to happen: the outbox drained and each consumer's records all PROCESSED or DEAD. */
function settled(status: FullStatus, approvals: number): boolean {
  const expected = approvalsProcessed(approvals);
  return (
    status.outbox.pending === 0 &&
    Object.entries(status.consumers).every(
      ([name, c]) => c.inProgress + c.failed === 0 && (c.processed ?? 0) + c.dead >= (expected[name] ?? 0),
    )
  );
}
