import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { OpsStatus } from '../../shared/ops/ops-api';
import { topology } from '../../shared/topology';

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
 * their lease runs out, and are taken at the next busy sweep.
 */
export const leaseAndBusySweepMs = (topology.relay.leaseSeconds + topology.relay.busySweepSeconds) * 1_000;

/** A fresh data directory the embedded PostgreSQL (running as `postgres` when root) can use. */
export function tempDataDir(prefix = 'pipeline-e2e-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o755);
  return dir;
}

/**
 * Whether `err` is a kept-alive connection the server closed as the request went out on it.
 * The server closes a connection idle for its keep-alive timeout (5 s); fetch stops reusing one
 * a second before that, by its own timer. A test process the machine stalls for a second or
 * more between two polls can reuse the connection as the server closes it.
 */
function closedUnderRequest(err: unknown): boolean {
  const code = (err as { cause?: { code?: unknown } } | null)?.cause?.code;
  return err instanceof TypeError && (code === 'UND_ERR_SOCKET' || code === 'ECONNRESET');
}

/** Minimal JSON client for the local runtime's HTTP API. */
export function pipelineClient(baseUrl: string) {
  const call = async <T>(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: T }> => {
    const send = () =>
      fetch(`${baseUrl}${path}`, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    // A GET is sent again on a new connection, as browsers and the AWS SDK do; a POST is not
    // (it may have been served), and fails the test instead.
    const res = await send().catch((err: unknown) => {
      if (method === 'GET' && closedUnderRequest(err)) return send();
      throw err;
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
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
          const approved = await call('POST', `/tasks/${created.body.taskId}/approve`, {
            approvedBy: 'rita',
          });
          if (approved.status !== 200)
            throw new Error(`approve ${approved.status} ${JSON.stringify(approved.body)}`);
          ids.push(created.body.taskId);
        }
      };
      await Promise.all(Array.from({ length: concurrency }, worker));
      return ids;
    },
    status: async () => (await call<OpsStatus>('GET', '/ops/status')).body,
  };
}

/** True when every approval reached every consumer of content.approved exactly as the issue demands. */
export function converged(status: OpsStatus, approvals: number): boolean {
  return (
    status.outbox.pending === 0 &&
    status.outbox.dead === 0 &&
    (status.consumers.index.processed ?? 0) >= approvals &&
    (status.consumers.notify.processed ?? 0) >= approvals &&
    (status.consumers.archive.processed ?? 0) >= approvals &&
    status.consumers.index.inProgress + status.consumers.index.failed === 0 &&
    status.consumers.notify.inProgress + status.consumers.notify.failed === 0 &&
    status.consumers.archive.inProgress + status.consumers.archive.failed === 0
  );
}
