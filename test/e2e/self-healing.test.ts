import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeWrite, replaceDurablyAsync } from '../../infra/local/bus/durable-file';
import { type JournalDisk, type JournalFile, journalUnavailableMessage } from '../../infra/local/bus/journal';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { retryAfterSeconds } from '../../shared/http/unavailable';
import type { StatusComponent } from '../../shared/ops/ops-ports';
import { deferred } from '../support/gates';
import {
  converged,
  deliveryBoundMs,
  type FullStatus,
  pipelineClient,
  tempDataDir,
} from '../support/pipeline-client';
import { rawHttp, rawStatus } from '../support/raw-http';
import { approvalEffects } from '../support/topology-expectations';
import { waitFor } from '../support/wait-for';

/**
 * The local runtime heals itself without a restart: a bus journal on a full disk, a dead
 * DynamoDB engine, a killed PostgreSQL postmaster. Each is noticed and logged once, shown on
 * /ops/status while it lasts, recovered from on its own, and every approval acknowledged
 * meanwhile is delivered, each effect once.
 */

/** A disk under the bus journal that a test fills and frees: ENOSPC for every write while full. */
class FillableDisk implements Partial<JournalDisk> {
  full = false;
  private readonly enospc = () =>
    Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });

  openAppend = async (path: string): Promise<JournalFile> => {
    if (this.full) throw this.enospc();
    const file = await open(path, 'a');
    return {
      appendFile: async (text) => {
        if (this.full) throw this.enospc();
        return file.appendFile(text);
      },
      sync: async () => {
        if (this.full) throw this.enospc();
        return file.sync();
      },
      close: () => file.close(),
    };
  };

  replace = async (path: string, lines: Iterable<string>): Promise<void> => {
    if (this.full) throw this.enospc();
    await replaceDurablyAsync(path, lines);
  };

  /** No room while full (statfs's answer); the real filesystem's otherwise. */
  freeBytes = async (): Promise<number | undefined> => (this.full ? 0 : undefined);

  probe = async (path: string, bytes: number): Promise<void> => {
    if (this.full) throw this.enospc();
    await probeWrite(path, bytes);
  };
}

let runtime: Runtime;
let dir: string;
const disk = new FillableDisk();
const logged: string[] = [];
type Gate = { readonly promise: Promise<void>; resolve(): void };
/** Restarts held by the test, per component: released when it has looked at the runtime meanwhile. */
const held = new Map<StatusComponent, { reached: Gate; go: Gate }>();
const recoveries = new Map<StatusComponent, Gate>();
const busFailed = deferred();

const hold = (component: StatusComponent) => {
  const gate = { reached: deferred(), go: deferred() };
  held.set(component, gate);
  return gate;
};
const recovery = (component: StatusComponent) => {
  const done = deferred();
  recoveries.set(component, done);
  return done.promise;
};

beforeAll(async () => {
  dir = tempDataDir('pipeline-heal-');
  runtime = await startRuntime({
    dataDir: dir,
    port: 0,
    busJournal: { disk },
    beforeRestart: async (component) => {
      const gate = held.get(component);
      if (!gate) return;
      gate.reached.resolve();
      await gate.go.promise;
    },
    onRecovered: (component) => recoveries.get(component)?.resolve(),
    log: (message) => {
      logged.push(message);
      if (message.startsWith('bus failed')) busFailed.resolve();
    },
  });
}, 300_000);

afterAll(async () => {
  for (const gate of held.values()) gate.go.resolve();
  await runtime?.stop();
  rmSync(dir, { recursive: true, force: true });
}, 120_000);

/** The pipeline settled with `approvals` approvals delivered, and what the effects' own stores hold. */
async function settledWith(approvals: number) {
  const status: FullStatus = await waitFor(
    pipelineClient(runtime.url).status,
    (s) => converged(s, approvals),
    { timeoutMs: deliveryBoundMs, intervalMs: 250, what: `${approvals} approvals delivered` },
  );
  await runtime.bus.idle();
  return { status, counted: await runtime.consumers.countEffects() };
}

/** Each effect of `n` approvals of distinct tasks, once. */
const once = approvalEffects;

/** A process's parent and state from /proc (Linux), or undefined once it is gone. */
function procStat(pid: number): { ppid: number; state: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(ppid), state: state ?? '' };
  } catch {
    return undefined;
  }
}

/** The processes `pid` started that are still running: a postmaster's backends and helpers. */
const childrenOf = (pid: number) =>
  readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((p) => procStat(p)?.ppid === pid);

/** Still running: neither gone nor a zombie waiting to be reaped. */
const running = (pid: number) => {
  const stat = procStat(pid);
  return stat !== undefined && stat.state !== 'Z';
};
const linesAbout = (component: string) => logged.filter((l) => l.startsWith(`${component} `));

describe('the local runtime heals itself', () => {
  it('takes events again once the bus directory has room, and delivers what it refused meanwhile, once each', async () => {
    const client = pipelineClient(runtime.url);
    disk.full = true;
    const ids = await client.createAndApprove(5);
    await busFailed.promise;
    // The relay's runs publish, the bus refuses everything (it cannot journal): the relay's
    // circuit opens, the refused rows go back as they were (no attempt, no backoff), and no
    // run claims again until a probe is accepted.
    const held = await waitFor(
      () =>
        runtime.db.query<{ n: number; tried: number; open: boolean }>(
          `SELECT count(*)::int AS n, count(*) FILTER (WHERE attempts > 0 OR lease_until IS NOT NULL)::int AS tried,
                  (SELECT opened_at IS NOT NULL FROM relay_circuit) AS open
             FROM outbox WHERE status = 'pending'`,
        ),
      (r) => r.rows[0]?.open === true && r.rows[0]?.n === ids.length && r.rows[0]?.tried === 0,
      { timeoutMs: deliveryBoundMs, intervalMs: 100, what: 'the circuit open, the refused rows given back' },
    );
    // What an outage of minutes builds up, set in the database rather than waited for: the
    // probe a minute away (its longest wait), and rows that were refused beside accepted ones
    // (a journal that failed mid-batch) backing off for 15 minutes.
    await runtime.db.query(
      "UPDATE relay_circuit SET probe_at = now() + interval '1 minute', failed_probes = 6 WHERE opened_at IS NOT NULL",
    );
    await runtime.db.query(
      `UPDATE outbox SET next_attempt_at = now() + interval '15 minutes'
        WHERE status = 'pending' AND strpos(last_error, :cause) > 0`,
      { cause: journalUnavailableMessage },
    );
    const { status, body } = await rawStatus(runtime.url);
    const back = recovery('bus');

    disk.full = false;
    await back;
    // Woken by the recovery: the probe is due (or taken, and the circuit closed), and the rows
    // the outage held are due (or delivered) by now.
    const waiting = await runtime.db.query<{ n: number; probeWaits: boolean | null }>(
      `SELECT count(*)::int AS n, (SELECT probe_at > now() FROM relay_circuit WHERE opened_at IS NOT NULL) AS "probeWaits"
         FROM outbox WHERE status = 'pending' AND next_attempt_at > now() AND strpos(last_error, :cause) > 0`,
      { cause: journalUnavailableMessage },
    );
    const { counted, status: after } = await settledWith(5);

    expect(held.rows[0]).toEqual({ n: 5, tried: 0, open: true });
    expect(waiting.rows[0]?.n).toBe(0);
    expect(waiting.rows[0]?.probeWaits).not.toBe(true);
    expect(status).toBe(200);
    expect(body.components.bus).toMatchObject({ up: false, cause: expect.stringMatching(/ENOSPC/) });
    expect(body.components.postgres).toEqual({ up: true });
    expect(counted).toEqual(once(5));
    expect(after.effects).toEqual(once(5));
    expect(after.components.bus).toEqual({ up: true });
    expect(linesAbout('bus')).toEqual([
      expect.stringMatching(/^bus failed: a journal write failed \(Error: ENOSPC/),
      expect.stringMatching(/^bus recovered: the journal takes events again after \d+ ms$/),
    ]);
    expect(linesAbout('relay')).toEqual([
      expect.stringMatching(/^relay circuit opened: the bus refused every event \(InternalFailure: .*ENOSPC/),
      expect.stringMatching(
        /^relay circuit closed: a probe was accepted after \d+ ms open; \d+ waiting events due$/,
      ),
    ]);
  }, 900_000);

  it('restarts a DynamoDB engine that died, shows it down meanwhile, and delivers what was approved meanwhile, once each', async () => {
    const client = pipelineClient(runtime.url);
    const gate = hold('dynamo');
    const back = recovery('dynamo');

    await runtime.consumers.dynamo.kill();
    await gate.reached.promise;
    const ids = await client.createAndApprove(3);
    const { status, body } = await rawStatus(runtime.url);
    gate.go.resolve();
    await back;
    const { counted } = await settledWith(8);

    expect(ids).toHaveLength(3);
    expect(status).toBe(200);
    expect(body.components.dynamo).toMatchObject({
      up: false,
      cause: expect.stringMatching(/^the dynalite worker exited \(1\)/),
      since: expect.any(String),
    });
    expect(body.consumers).toBeNull();
    expect(body.tasks).not.toBeNull();
    expect(counted).toEqual(once(8));
    expect(linesAbout('dynamo')).toEqual([
      expect.stringMatching(/^dynamo failed: the dynalite worker exited \(1\); restarting it$/),
      expect.stringMatching(/^dynamo recovered: restarted after \d+ ms$/),
    ]);
  }, 900_000);

  it('restarts a killed PostgreSQL postmaster, answering 503 with Retry-After meanwhile, and loses nothing committed', async () => {
    const client = pipelineClient(runtime.url);
    const created = await client.call<{ taskId: string }>('POST', '/tasks', { title: 'before the kill' });
    const gate = hold('postgres');
    const back = recovery('postgres');
    const pid = runtime.postgres.pid as number;
    const backends = childrenOf(pid);

    process.kill(pid, 'SIGKILL');
    await gate.reached.promise;
    // A killed postmaster's backends run on until they notice, and one that a pool holds can
    // still commit a request (an honest 200: its WAL is replayed). The outage begins once they
    // are gone: without this wait the request found one alive and was answered 200 in 1 of 3
    // runs at load average 10.
    await waitFor(
      () => backends.filter(running),
      (alive) => alive.length === 0,
      { timeoutMs: deliveryBoundMs, intervalMs: 50, what: "the killed postmaster's backends gone" },
    );
    const refused = await rawHttp(runtime.url, {
      method: 'POST',
      target: `/tasks/${created.body.taskId}/approve`,
      headers: [['content-type', 'application/json']],
      body: '{}',
    });
    const { status, body } = await rawStatus(runtime.url);
    gate.go.resolve();
    await back;
    const approved = await client.call('POST', `/tasks/${created.body.taskId}/approve`, {});
    const { counted } = await settledWith(9);

    expect(created.status).toBe(201);
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe(String(retryAfterSeconds));
    expect(status).toBe(200);
    expect(body.components.postgres).toMatchObject({
      up: false,
      cause: expect.stringMatching(/^the PostgreSQL postmaster exited \(SIGKILL\)/),
    });
    expect(body.tasks).toBeNull();
    expect(approved.status).toBe(200);
    expect(runtime.postgres.pid).not.toBe(pid);
    expect(counted).toEqual(once(9));
    expect(linesAbout('postgres')).toEqual([
      expect.stringMatching(/^postgres failed: the PostgreSQL postmaster exited \(SIGKILL\)/),
      expect.stringMatching(/^postgres recovered: restarted after \d+ ms/),
    ]);
  }, 900_000);
});
