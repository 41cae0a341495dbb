import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { topology } from '../../functions/topology';
import { countersOf } from '../../shared/consumers/define-consumer';
import type { OpsStatus } from '../../shared/ops/ops-api';
import { rawHttp } from './raw-http';

/**
 * How long an end-to-end test waits for the local pipeline to deliver what it was given: a
 * bound on a pipeline that never converges, not a speed. Delivery is the runtime's work (relay
 * runs, the bus, three consumers), in this process or another, that a test can only read
 * through /ops/status. 100 approvals converged within 35 s beside other suites (load average 13
 * to 21 on 2 cores); the bound is an order of magnitude above that.
 */
export const deliveryBoundMs = 300_000;

/**
 * What the pipeline's own timing adds after a crash: a killed relay's claims come back when
 * their lease runs out, and the relay runner's next run is timed at that expiry (its stats count
 * live leases in the next-due time).
 */
export const leaseExpiryMs = topology.relay.leaseSeconds * 1_000;

/** A fresh data directory the embedded PostgreSQL (running as `postgres` when root) can use. */
export function tempDataDir(prefix = 'pipeline-e2e-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o755);
  return dir;
}

/**
 * `GET /ops/status` with every section read, as a healthy local runtime answers it (the local
 * runtime counts its effects, so those are there too).
 */
export type FullStatus = { readonly [K in keyof OpsStatus]: NonNullable<OpsStatus[K]> };

/**
 * `status` as a {@link FullStatus}; throws naming the components down and the sections missing
 * when some could not be read, so a test of a healthy runtime fails saying so.
 */
export function fullStatus(status: OpsStatus): FullStatus {
  const missing = Object.entries(status)
    .filter(([, v]) => v === null)
    .map(([k]) => k);
  if (missing.length > 0) {
    const down = Object.entries(status.components ?? {}).filter(([, c]) => !c.up);
    throw new Error(`status without ${missing.join(', ')}; components down: ${JSON.stringify(down)}`);
  }
  return status as FullStatus;
}

/** Minimal JSON client for the local runtime's HTTP API. */
export function pipelineClient(baseUrl: string) {
  const call = async <T>(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: T }> => {
    // A connection of its own for each request (as `rawHttp` makes it), where fetch would keep
    // connections alive and reuse them. The server closes one idle for its keep-alive timeout
    // (5 s), and fetch stops reusing one a second before that by its own timer: a test process
    // the machine stalls for longer (the runtime, in this process, shares its event loop) sent
    // requests on connections the server was closing, and they failed (ECONNRESET).
    const url = new URL(`${baseUrl}${path}`);
    const res = await rawHttp(baseUrl, {
      method,
      target: `${url.pathname}${url.search}`,
      headers: body === undefined ? [] : [['content-type', 'application/json']],
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (res.body ? JSON.parse(res.body) : undefined) as T };
  };
  return {
    call,
    async createAndApprove(n: number, concurrency = 10): Promise<string[]> {
      const ids: string[] = [];
      let next = 0;
      const worker = async () => {
        while (next < n) {
          const i = next++;
          const created = await call<{ taskId: string }>('POST', '/tasks', {
            title: `task ${i}`,
            assignee: `a${i % 7}`,
          });
          if (created.status !== 201)
            throw new Error(`create ${created.status} ${JSON.stringify(created.body)}`);
          const approved = await call('POST', `/tasks/${created.body.taskId}/approve`, {});
          if (approved.status !== 200)
            throw new Error(`approve ${approved.status} ${JSON.stringify(approved.body)}`);
          ids.push(created.body.taskId);
        }
      };
      await Promise.all(Array.from({ length: concurrency }, worker));
      return ids;
    },
    /** `GET /ops/status` of a healthy runtime: every section read (see {@link fullStatus}). */
    status: async () => fullStatus((await call<OpsStatus>('GET', '/ops/status')).body),
  };
}

/**
 * True when every approval reached every consumer of content.approved: the outbox drained, each
 * such consumer's counters at one per approval at least (each of the project's moves by one per
 * approval), and no inbox record of any consumer in flight or failed (an effect runs before its
 * record completes). Not the processed counts: a SIGKILL between a record's completion and its
 * count loses that count until the next start recounts (infra/local/local-counters.ts).
 */
export function converged(status: FullStatus, approvals: number): boolean {
  const effects = status.effects;
  const ofApprovals = countersOf(topology.registry).filter((c) =>
    c.consumer.subscribes.includes(topology.eventTypes.approved),
  );
  return (
    status.outbox.pending === 0 &&
    status.outbox.dead === 0 &&
    effects !== null &&
    ofApprovals.every((c) => (effects[c.name] ?? 0) >= approvals) &&
    Object.values(status.consumers).every((c) => c.inProgress + c.failed === 0)
  );
}
