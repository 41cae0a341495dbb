import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as pause } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import type { OpsStatus } from '../../shared/ops/ops-api';
import {
  converged,
  deliveryBoundMs,
  type FullStatus,
  pipelineClient,
  tempDataDir,
} from '../support/pipeline-client';
import { rawStatus } from '../support/raw-http';
import { fillLeaving, freeBytes, mountTmpfs, tmpfsUnavailable } from '../support/tmpfs';
import { approvalEffects } from '../support/topology-expectations';
import { reachedWithin } from '../support/wait-for';

/**
 * The fault as the world produces it: the bus journal's own filesystem (a real tmpfs, mounted
 * under the runtime's data directory where the bus keeps its journal) filled by another file
 * until a few KiB remain, approvals arriving meanwhile, then the other file removed. Nothing
 * is injected into the runtime: every write fails with the kernel's ENOSPC, and every rewrite
 * that fits in what is left succeeds, as it did when the issue was found (705 of 775 approvals
 * delivered 120 s after the disk was freed, the last ones about 10 minutes late).
 *
 * The acceptance criterion is the issue's: once the disk is freed, every acknowledged approval
 * is delivered within 60 s, measured from the moment the filler is removed.
 */

const unavailable = tmpfsUnavailable();
if (unavailable) console.warn(`bus-disk-full.test.ts skipped: ${unavailable}`);

/** The issue's acceptance bound: disk freed -> every acknowledged approval delivered. */
const deliveredAfterFreeingMs = 60_000;
/**
 * Approvals sent while the disk is full, and their rate: the load, not a wait for a state. The
 * issue's rate (20/s), for 10 s. At 2/s (40 approvals) or in one burst of 40 the journal of
 * before kept up through its flaps, each rewrite making room for a few more events, and the
 * test could not tell; at this rate the refused backlog outgrows what fits, as it did in the
 * issue (measured before the fix: 99 of 200 still pending when the disk was freed, with up to
 * 8 attempts each, and the last delivered 126 s later).
 */
const approvals = 200;
const approvalEveryMs = 50;
/** What the filler leaves free on the journal's filesystem. */
const leftFreeBytes = 8 * 1024;

/** Each effect of `n` approvals of distinct tasks, once. */
const once = approvalEffects;

describe('the bus journal on a filesystem that fills up', () => {
  it.skipIf(unavailable !== undefined)(
    'delivers every approval acknowledged while it was full within 60 s of the disk being freed, each once, none dead, and says it was down meanwhile',
    async () => {
      const dir = tempDataDir('pipeline-disk-full-');
      const busDir = join(dir, 'bus');
      mkdirSync(busDir);
      let unmount: (() => void) | undefined;
      let runtime: Runtime | undefined;
      const logged: string[] = [];
      try {
        unmount = mountTmpfs(busDir, 8 << 20);
        runtime = await startRuntime({
          dataDir: dir,
          port: 0,
          log: (message) => logged.push(`${new Date().toISOString()} ${message}`),
        });
        const client = pipelineClient(runtime.url);
        const filler = fillLeaving(busDir, leftFreeBytes);
        const freeWhileFull = freeBytes(busDir);

        // Approvals at a steady rate while the disk is full, reading /ops/status after each.
        const bus: { up: boolean; cause?: string }[] = [];
        let acknowledged = 0;
        for (let i = 0; i < approvals; i++) {
          const started = performance.now();
          await client.createAndApprove(1, 1);
          acknowledged++;
          bus.push((await rawStatus(runtime.url)).body.components.bus);
          const left = approvalEveryMs - (performance.now() - started);
          if (left > 0) await pause(left);
        }
        // The journal's writes failed (the first few may have fit): it says so, and keeps saying so.
        const sawDown =
          bus.some((b) => !b.up) ||
          (await reachedWithin(
            async () => (await rawStatus(runtime?.url ?? '')).body.components.bus,
            (b) => {
              if (!b.up) bus.push(b);
              return !b.up;
            },
            { timeoutMs: 30_000, intervalMs: 100, what: 'components.bus down' },
          ));
        const firstDown = bus.findIndex((b) => !b.up);
        const down = bus[firstDown];
        const upAgainWhileFull = firstDown < 0 ? 0 : bus.slice(firstDown).filter((b) => b.up).length;
        const { rows: beforeFreeing } = await runtime.db.query<{ n: number; attempts: number }>(
          "SELECT count(*)::int AS n, max(attempts)::int AS attempts FROM outbox WHERE status = 'pending'",
        );

        rmSync(filler);
        const freedAt = performance.now();
        logged.push(`${new Date().toISOString()} (test) filler removed`);
        let last: OpsStatus | undefined;
        const delivered = await reachedWithin(
          async () => {
            last = (await rawStatus(runtime?.url ?? '')).body;
            return last;
          },
          (s) => s.effects !== null && s.consumers !== null && converged(s as FullStatus, acknowledged),
          { timeoutMs: deliveryBoundMs, intervalMs: 250, what: `${acknowledged} approvals delivered` },
        );
        const deliveredAfterMs = Math.round(performance.now() - freedAt);
        console.log(
          `bus-disk-full: ${acknowledged} approvals acknowledged with ${freeWhileFull} bytes free; ` +
            (delivered
              ? `every one delivered ${deliveredAfterMs} ms after the disk was freed`
              : `not all delivered ${deliveredAfterMs} ms after the disk was freed: ${JSON.stringify(last?.outbox)}`) +
            `; components.bus ${sawDown ? `up ${upAgainWhileFull} times of ${bus.length - firstDown} readings after it first went down` : 'never seen down'}` +
            `; pending when freed ${JSON.stringify(beforeFreeing[0])}`,
        );
        const { rows: outbox } = await runtime.db.query<{ status: string; n: number; attempts: number }>(
          'SELECT status, count(*)::int AS n, max(attempts)::int AS attempts FROM outbox GROUP BY status',
        );
        console.log(`bus-disk-full: outbox ${JSON.stringify(outbox)}`);
        console.log(
          `bus-disk-full: log\n${logged.filter((l) => / (bus|relay|\(test\)) /.test(l)).join('\n')}`,
        );
        await runtime.bus.idle();
        const counted = await runtime.consumers.countEffects();
        const after = (await rawStatus(runtime.url)).body;

        expect(delivered).toBe(true);
        expect(deliveredAfterMs).toBeLessThanOrEqual(deliveredAfterFreeingMs);
        expect(counted).toEqual(once(acknowledged));
        expect(outbox.map((r) => r.status)).toEqual(['delivered']);
        expect(sawDown).toBe(true);
        expect(down).toMatchObject({ up: false, cause: expect.stringMatching(/ENOSPC/) });
        expect(upAgainWhileFull).toBe(0);
        expect(after.components.bus).toEqual({ up: true });
      } finally {
        try {
          await runtime?.stop();
        } finally {
          unmount?.();
          rmSync(dir, { recursive: true, force: true });
        }
      }
    },
    900_000,
  );
});
