import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { consumerNames } from '../../functions/topology';
import { parseFaults } from '../../infra/local/faults';
import type { BusEvent } from '../../infra/local/local-bus';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { dynamoClient } from '../support/dynamo';
import { pipelineClient, tempDataDir } from '../support/pipeline-client';
import { reachedWithin } from '../support/wait-for';
import { checkRun, findPipelineTables, notificationsInFile } from './invariants';
import { fullProfile } from './profile';

/**
 * The soak: the whole local runtime (`npm start` in-process: embedded PostgreSQL, dynalite, the
 * local bus, the relay on its schedule and nudges, the HTTP tasks API) takes 10,000 approvals over
 * HTTP with every local fault at 10%, and must end with nothing pending, nothing dead, every effect
 * exactly once. It prints the figures as one JSON line and a summary.
 */
const settings = z
  .object({
    PIPELINE_FAULTS: z
      .string()
      .default('busReject=0.1,busAckLoss=0.1,busDuplicate=0.1,effectFailBefore=0.1,effectFailAfter=0.1'),
    PIPELINE_FAULT_SEED: z.coerce.number().int().default(20_261_201),
    GUARANTEES_SOAK_APPROVALS: z.coerce.number().int().min(1).default(10_000),
    /** How long the run may take to converge once the approvals are in. */
    GUARANTEES_SOAK_CONVERGE_MINUTES: z.coerce.number().min(1).default(45),
  })
  .parse(Object.fromEntries(Object.entries(process.env).filter(([, v]) => v?.trim())));

const convergeMs = settings.GUARANTEES_SOAK_CONVERGE_MINUTES * 60_000;

if (!fullProfile) {
  console.warn('[guarantees] the soak runs in the full profile only: npm run test:guarantees');
}

/** Bus event ids per CloudEvent id, one per entry the bus accepted, from its journal. */
async function publishesInJournal(dir: string): Promise<Map<string, string[]>> {
  const text = await readFile(join(dir, 'bus', 'journal.jsonl'), 'utf8').catch(() => '');
  const byEvent = new Map<string, string[]>();
  // Whole lines only: the runtime is still running, and its last write may be under way.
  for (const line of text.slice(0, text.lastIndexOf('\n') + 1).split('\n')) {
    if (!line.trim()) continue;
    const entry = JSON.parse(line) as { t: string; event?: BusEvent };
    if (entry.t !== 'event' || !entry.event) continue;
    const id = String(entry.event.detail.id);
    const ids = byEvent.get(id) ?? [];
    if (!ids.includes(entry.event.id)) ids.push(entry.event.id);
    byEvent.set(id, ids);
  }
  return byEvent;
}

if (!fullProfile)
  console.warn('[guarantees] the soak runs in the full profile only: npm run test:guarantees');

describe.skipIf(!fullProfile)(
  `guarantee soak: ${settings.GUARANTEES_SOAK_APPROVALS} approvals through the local runtime with ${settings.PIPELINE_FAULTS}${fullProfile ? '' : ' (SKIPPED: full profile only, npm run test:guarantees)'}`,
  () => {
    let runtime: Runtime | undefined;
    let dir: string | undefined;
    afterAll(async () => {
      await runtime?.stop();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it(
      'ends with zero DEAD, zero pending, every effect exactly once',
      async () => {
        const approvals = settings.GUARANTEES_SOAK_APPROVALS;
        const dataDir = tempDataDir('guarantees-soak-');
        dir = dataDir;
        runtime = await startRuntime({
          dataDir,
          port: 0,
          faults: parseFaults(settings.PIPELINE_FAULTS),
          faultSeed: settings.PIPELINE_FAULT_SEED,
        });
        const started = Date.now();
        const ids = await pipelineClient(runtime.url).createAndApprove(approvals, 16);
        const approvedAt = Date.now();

        // Quiet: nothing pending in the outbox and no delivery in flight or waiting for a retry.
        const pendingRows = async (r: Runtime) =>
          (await r.db.query<{ n: number }>("SELECT count(*)::int AS n FROM outbox WHERE status = 'pending'"))
            .rows[0]?.n ?? 0;
        const live = runtime;
        const quiet = await reachedWithin(
          () => pendingRows(live),
          (pending) => pending === 0 && live.bus.pendingDeliveries === 0,
          { timeoutMs: convergeMs - (Date.now() - approvedAt), intervalMs: 2_000 },
        );
        const quietAt = quiet ? Date.now() : undefined;

        const dynamo = dynamoClient(runtime.consumers.dynamo.endpoint, runtime.credentials.aws);
        try {
          const report = await checkRun(
            {
              db: runtime.db,
              dynamo: { client: dynamo, ...(await findPipelineTables(dynamo)) },
              archiveRoot: join(dataDir, 'effects', 'archive'),
              notifications: () => notificationsInFile(join(dataDir, 'effects', 'notifications.jsonl')),
              publishes: () => publishesInJournal(dataDir),
              busDeadLetters: () => runtime?.bus.deadLetters().length ?? 0,
            },
            { notifyAttemptsThatActedWithoutCompleting: runtime.consumers.injectedAfterFaults('notify') },
          );
          const { counters } = runtime.bus;
          const processed = Object.values(report.figures.processed).reduce((n, p) => n + p, 0);
          const figures = {
            approvals,
            faults: settings.PIPELINE_FAULTS,
            seed: settings.PIPELINE_FAULT_SEED,
            quiet: quietAt !== undefined,
            approveSeconds: (approvedAt - started) / 1_000,
            convergeSeconds: quietAt === undefined ? null : (quietAt - approvedAt) / 1_000,
            totalSeconds: ((quietAt ?? Date.now()) - started) / 1_000,
            duplicates: {
              ...report.figures.duplicates,
              // Successful invocations beyond one per processed record: repeats the inboxes acknowledged.
              delivery: counters.delivered - processed,
              // Effects that acted and then failed (effectFailAfter), so ran again: idempotent by key.
              effectReruns: Object.fromEntries(
                consumerNames.map((c) => [c, runtime?.consumers.injectedAfterFaults(c) ?? 0]),
              ),
            },
            bus: counters,
            maxPublishAttempts: report.figures.maxPublishAttempts,
            maxConsumerAttempts: report.figures.maxConsumerAttempts,
            processed: report.figures.processed,
            archiveObjects: report.figures.archiveObjects,
            notifications: report.figures.notifications,
            violations: report.violations.length,
          };
          console.log(`GUARANTEES_SOAK ${JSON.stringify(figures)}`);
          console.log(
            [
              `soak: ${approvals} approvals with ${settings.PIPELINE_FAULTS} (seed ${settings.PIPELINE_FAULT_SEED})`,
              `  approvals took ${figures.approveSeconds.toFixed(1)} s; ${
                figures.convergeSeconds === null
                  ? `NOT quiet after ${settings.GUARANTEES_SOAK_CONVERGE_MINUTES} min`
                  : `quiet ${figures.convergeSeconds.toFixed(1)} s after the last one (${figures.totalSeconds.toFixed(1)} s in all)`
              }`,
              `  duplicates: ${figures.duplicates.publish} re-publishes the bus accepted, ${figures.duplicates.delivery} repeated deliveries acknowledged, ${figures.duplicates.notification} repeated notifications; effects re-run after acting: ${JSON.stringify(figures.duplicates.effectReruns)}`,
              `  most attempts: ${figures.maxPublishAttempts} publishes, ${JSON.stringify(figures.maxConsumerAttempts)} per consumer`,
              `  ${report.violations.length === 0 ? 'every promise held' : `${report.violations.length} broken promises:\n    ${report.violations.join('\n    ')}`}`,
            ].join('\n'),
          );

          expect(ids).toHaveLength(approvals);
          expect(report.figures.approvedTasks).toBe(approvals);
          expect(report.violations).toEqual([]);
          expect(quietAt, 'the pipeline went quiet within the time allowed').toBeDefined();
          // Every effect exactly once: one archive object and one notification per event, the index current.
          expect(report.figures.duplicates.notification).toBe(0);
          expect(report.figures.archiveObjects).toBe(approvals);
          // The faults really struck.
          expect(counters.rejected).toBeGreaterThan(0);
          expect(report.figures.duplicates.publish).toBeGreaterThan(0);
          expect(consumerNames.every((c) => (runtime?.consumers.injectedAfterFaults(c) ?? 0) > 0)).toBe(true);
        } finally {
          dynamo.destroy();
        }
      },
      convergeMs + 30 * 60_000,
    );
  },
);
