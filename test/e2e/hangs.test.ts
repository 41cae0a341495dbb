import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { applicationName, pgTimeouts } from '../../shared/db/pg-settings';
import { type FunctionRole, roleName } from '../../shared/db/roles';
import { retryAfterSeconds } from '../../shared/http/unavailable';
import { alarmIds } from '../../shared/ops/alarm-ids';
import { deferred } from '../support/gates';
import { converged, deliveryBoundMs, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { rawHttp, rawStatus } from '../support/raw-http';
import { stoppedProcesses } from '../support/stopped-processes';
import { approvalEffects } from '../support/topology-expectations';
import { waitFor } from '../support/wait-for';

/**
 * A hang is a failure: PostgreSQL processes stopped for real (SIGSTOP), as a frozen VM, a
 * debugger or a swapped-out server stops them. A stopped postmaster accepts no connection and
 * a stopped backend answers nothing, while every process still exists: nothing dies, so only a
 * deadline notices. Each test sends SIGCONT in a `finally`, and `afterAll` once more.
 */

/**
 * The relay's run deadline here (the Lambda timeout it stands for is 60 s): below the pools'
 * own bound on a statement never answered (`query_timeout`), so that a relay statement a stopped
 * backend holds is ended by the run's deadline, the bound this file proves; with the default it
 * is the statement's bound that ends it first, and the run fails the same way.
 */
const relayTimeoutSeconds = 8;

let runtime: Runtime;
let dir: string;
const logged: { message: string; extra?: Record<string, unknown> }[] = [];
/** Every process this file stopped, continued again whatever happens (`continueAll`). */
const { stop, cont, continueAll } = stoppedProcesses();

beforeAll(async () => {
  expect(relayTimeoutSeconds * 1_000).toBeLessThan(pgTimeouts.queryMs);
  dir = tempDataDir('pipeline-hangs-');
  runtime = await startRuntime({
    dataDir: dir,
    port: 0,
    topology: {
      ...topology,
      relay: { ...topology.relay, timeoutSeconds: relayTimeoutSeconds, budgetMarginMs: 3_000 },
    },
    log: (message, extra) => logged.push({ message, extra }),
  });
}, 300_000);

afterAll(async () => {
  continueAll();
  await runtime?.stop();
  rmSync(dir, { recursive: true, force: true });
}, 120_000);

/** The state letter of a process (`T`: stopped), from /proc. */
const processState = (pid: number) => /^\d+ \(.*\) (\w)/.exec(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.[1];

/**
 * Ends every session of these roles until the server shows none, so their pools' next
 * statement needs a new connection: what pools that idled out are left with.
 *
 * Ending them once is not enough: the runtime's status history reads as ops every 10 s (three
 * statements at once), and a read the termination cut short retries on new connections within
 * 100 ms. Those stay idle for the pool's idle timeout, also 10 s, so the next reading reuses or
 * replaces them and the count can stay above zero for good: ended once and then only counted,
 * it stayed at 3 for 60 s in two runs of eight beside other suites (and the second test, then
 * counting on the first's approval, waited its 300 s for a fourth). So each poll ends whatever
 * sessions are there, waiting for them to exit, then counts: done once none came in between.
 */
async function freshPools(roles: readonly FunctionRole[]): Promise<void> {
  const names = `{${roles.map(roleName).join(',')}}`;
  const ofRoles = 'FROM pg_stat_activity WHERE usename IN (SELECT unnest(CAST(:names AS text[])))';
  await waitFor(
    async () => {
      await runtime.db.query(`SELECT pg_terminate_backend(pid, 10000) ${ofRoles}`, { names });
      return runtime.db.query<{ n: number }>(`SELECT count(*)::int AS n ${ofRoles}`, { names });
    },
    (r) => r.rows[0]?.n === 0,
    { timeoutMs: 120_000, intervalMs: 50, what: `no session of ${roles.join(', ')}` },
  );
}

/** Tasks approved so far, whichever test approved them. */
async function approvedSoFar(): Promise<number> {
  const r = await runtime.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM tasks WHERE status = 'approved'",
  );
  return r.rows[0]?.n ?? 0;
}

/** `POST /tasks` with an `Idempotency-Key`, as a client that retries sends it each time. */
function create(body: unknown, key: string) {
  return rawHttp(runtime.url, {
    method: 'POST',
    target: '/tasks',
    headers: [
      ['content-type', 'application/json'],
      ['idempotency-key', key],
    ],
    body: JSON.stringify(body),
  });
}

/** Every approval so far delivered to every consumer, each effect once. */
async function settledWith(approvals: number) {
  return waitFor(pipelineClient(runtime.url).status, (s) => converged(s, approvals), {
    timeoutMs: deliveryBoundMs,
    intervalMs: 250,
    what: `${approvals} approvals delivered`,
  });
}

describe('a hung PostgreSQL is a failure the runtime answers for', () => {
  it('answers a create 503 with Retry-After while the postmaster is stopped, shows postgres down with why, and makes the retried create one task', async () => {
    const key = randomUUID();
    const body = { title: `created while the postmaster was stopped (${key})` };
    const before = await approvedSoFar();
    // Pools that idled out: the next statement of the tasks API and of ops needs a connection.
    await freshPools(['tasksApi', 'ops']);
    const pid = runtime.postgres.pid as number;

    let refused: Awaited<ReturnType<typeof create>>;
    let downStatus: Awaited<ReturnType<typeof rawStatus>>;
    let retried: Awaited<ReturnType<typeof create>>;
    let stateWhileDown: string | undefined;
    stop(pid);
    try {
      // Answered while the postmaster is still stopped: a bound ended the wait, not SIGCONT.
      refused = await create(body, key);
      downStatus = await waitFor(
        () => rawStatus(runtime.url),
        (s) => s.body.components?.postgres?.up === false,
        { timeoutMs: 120_000, intervalMs: 250, what: '/ops/status showing postgres down' },
      );
      // The client's own retry, with the same key, the postmaster still stopped.
      retried = await create(body, key);
      stateWhileDown = processState(pid);
    } finally {
      cont(pid);
    }
    // It goes on retrying with the same key until the database takes it.
    const taken = await waitFor(
      () => create(body, key),
      (r) => r.status !== 503,
      { timeoutMs: 120_000, intervalMs: 250, what: 'the create taken after SIGCONT' },
    );
    const replayed = await create(body, key);
    const other = await create({ title: 'another task under the same key' }, key);
    const rows = await runtime.db.query<{ task_id: string }>(
      'SELECT task_id FROM tasks WHERE idempotency_key = :key',
      { key },
    );
    const upAgain = await waitFor(
      () => rawStatus(runtime.url),
      (s) => s.body.components.postgres.up && s.body.tasks !== null,
      { timeoutMs: 120_000, intervalMs: 250, what: '/ops/status showing postgres up' },
    );
    const taskId = JSON.parse(taken.body).taskId as string;
    const approved = await pipelineClient(runtime.url).call('POST', `/tasks/${taskId}/approve`, {});
    const settled = await settledWith(before + 1);

    expect(stateWhileDown).toBe('T');
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe(String(retryAfterSeconds));
    expect(JSON.parse(refused.body).error).toBe('the database is unavailable; try again later');
    expect(retried.status).toBe(503);
    expect(downStatus.status).toBe(200);
    // The probe's word (SELECT 1 on a new connection) or a section's: each names its deadline.
    expect(downStatus.body.components.postgres).toMatchObject({
      up: false,
      cause: expect.stringMatching(/within \d+ s/),
    });
    // The refused creates sent nothing: the first the database took made the task.
    expect(taken.status).toBe(201);
    expect(taken.headers['idempotent-replayed']).toBeUndefined();
    expect(replayed.status).toBe(201);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(JSON.parse(replayed.body).taskId).toBe(taskId);
    expect(other.status).toBe(422);
    expect(rows.rows.map((r) => r.task_id)).toEqual([taskId]);
    expect(upAgain.body.components.postgres).toEqual({ up: true });
    expect(approved.status).toBe(200);
    const once = before + 1;
    expect(settled.effects).toEqual(approvalEffects(once));
    expect(logged.map((l) => l.message)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /^postgres not answering: did not answer SELECT 1 on a new connection within 2 s/,
        ),
        expect.stringMatching(/^postgres answering again after \d+ ms$/),
      ]),
    );
  }, 900_000);

  it('abandons a relay run whose backend is stopped at its deadline, and delivers on fresh connections while it is still stopped', async () => {
    const client = pipelineClient(runtime.url);
    // Counted here, not assumed: a failure of the test before must not fail this one too.
    const before = await approvedSoFar();
    // A relay statement waiting on a lock is a backend the test can find mid-statement: the
    // lock is held until that backend is stopped, then let go.
    const locked = deferred();
    const letGo = deferred();
    const holding = runtime.db.transaction(async (tx) => {
      await tx.query('SET LOCAL idle_in_transaction_session_timeout = 0');
      await tx.query('LOCK TABLE relay_lease IN EXCLUSIVE MODE');
      locked.resolve();
      await letGo.promise;
    });
    const abandonedBefore = logged.filter(isAbandoned).length;
    let backend: { pid: number; application_name: string } | undefined;
    let stateWhenDelivered: string | undefined;
    let failing: Awaited<ReturnType<typeof client.status>>;
    let settled: Awaited<ReturnType<typeof settledWith>>;
    try {
      await locked.promise;
      await client.createAndApprove(3);
      const waiting = await waitFor(
        () =>
          runtime.db.query<{ pid: number; application_name: string }>(
            `SELECT pid, application_name FROM pg_stat_activity
              WHERE application_name = :app AND wait_event_type = 'Lock'`,
            { app: applicationName('relay') },
          ),
        (r) => r.rows.length > 0,
        { timeoutMs: 120_000, intervalMs: 20, what: 'a relay statement waiting on the lock' },
      );
      backend = waiting.rows[0];
      stop(backend?.pid as number);
      letGo.resolve();
      await holding;
      await waitFor(
        () => logged.filter(isAbandoned).length,
        (n) => n > abandonedBefore,
        {
          timeoutMs: deliveryBoundMs,
          intervalMs: 100,
          what: 'the relay run on the stopped backend abandoned',
        },
      );
      failing = await client.status();
      settled = await settledWith(before + 3);
      stateWhenDelivered = processState(backend?.pid as number);
    } finally {
      letGo.resolve();
      if (backend) cont(backend.pid);
    }
    await holding.catch(() => {});
    // Asked to end at the abandonment, the backend exits once it runs again.
    const gone = await waitFor(
      () =>
        runtime.db.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = :pid', {
          pid: backend?.pid ?? 0,
        }),
      (r) => r.rows[0]?.n === 0,
      { timeoutMs: 120_000, intervalMs: 100, what: 'the abandoned backend gone after SIGCONT' },
    );

    expect(backend?.application_name).toBe('pipeline:relay');
    // Delivered while the backend was still stopped: no run waited for it.
    expect(stateWhenDelivered).toBe('T');
    const all = before + 3;
    expect(settled.effects).toEqual(approvalEffects(all));
    expect(failing.alarms[alarmIds.relayErrors]).toBe('ALARM');
    expect(failing.relay.errors).toBeGreaterThan(0);
    expect(logged).toContainEqual({
      message: 'relay run failed',
      extra: expect.objectContaining({
        error: expect.stringMatching(
          new RegExp(`did not end within its deadline \\(${relayTimeoutSeconds} s\\): abandoned`),
        ),
      }),
    });
    expect(logged).toContainEqual({
      message: 'relay run abandoned: its backends ended',
      extra: { pids: expect.arrayContaining([backend?.pid]) },
    });
    expect(gone.rows[0]?.n).toBe(0);
  }, 900_000);
});

/** A log line of a relay run the runner gave up at its deadline. */
function isAbandoned(line: { message: string; extra?: Record<string, unknown> }): boolean {
  return (
    line.message === 'relay run failed' && /did not end within its deadline/.test(String(line.extra?.error))
  );
}
