import { rmSync } from 'node:fs';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { roleName } from '../../shared/db/roles';
import { retryAfterSeconds } from '../../shared/http/unavailable';
import { alarmIds } from '../../shared/ops/alarm-ids';
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
 * The local runtime answers honestly under faults: a request it cannot serve for want of its
 * database is a 503 with Retry-After, a slow client a 408, a failed relay run alarms only for the
 * alarm's period, and a DynamoDB engine that died leaves /ops/status a 200 naming it.
 */

/** The header timeout here: short, so a slow client's 408 comes soon. */
const headersTimeoutMs = 1_000;

let runtime: Runtime;
let dir: string;
const logged: { message: string; extra?: Record<string, unknown> }[] = [];
const relayFailed = deferred();
/** Added to the alarms' clock: a test moves it past the alarm's period. */
let clockOffsetMs = 0;
/** Holds the restart of a dead engine while the test looks at the runtime. */
const restartReached = deferred();
const restartGo = deferred();

beforeAll(async () => {
  dir = tempDataDir('pipeline-honest-');
  runtime = await startRuntime({
    dataDir: dir,
    port: 0,
    headersTimeoutMs,
    alarmClock: () => Date.now() + clockOffsetMs,
    beforeRestart: async () => {
      restartReached.resolve();
      await restartGo.promise;
    },
    log: (message, extra) => {
      logged.push({ message, extra });
      if (message === 'relay run failed') relayFailed.resolve();
    },
  });
}, 300_000);

afterAll(async () => {
  restartGo.resolve();
  await runtime?.stop();
  rmSync(dir, { recursive: true, force: true });
}, 120_000);

/** Ends the database sessions of a function role, so its pool has to log in again. */
async function endSessions(role: Parameters<typeof roleName>[0]): Promise<void> {
  await runtime.db.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = :name', {
    name: roleName(role),
  });
}

/** Every effect counted, once the pipeline has settled with `approvals` approvals delivered. */
async function settledWith(approvals: number): Promise<FullStatus> {
  const client = pipelineClient(runtime.url);
  return waitFor(client.status, (s) => converged(s, approvals), {
    timeoutMs: deliveryBoundMs,
    intervalMs: 200,
    what: `${approvals} approvals delivered`,
  });
}

describe('the local runtime under faults answers honestly', () => {
  it('answers a client that does not finish its headers 408 after the header timeout', async () => {
    const port = Number(new URL(runtime.url).port);
    // The server's own timer ends this: the wait is the header timeout, bounded by the test's.
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', reject);
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
      socket.write(`GET /ops/status HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n`);
    });

    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain('"error":"the request was not sent in time"');
  }, 60_000);

  it('answers an approval the database cannot take 503 with Retry-After, and takes it once it can', async () => {
    const client = pipelineClient(runtime.url);
    const created = await client.call<{ taskId: string }>('POST', '/tasks', { title: 'while refused' });
    expect(created.status).toBe(201);
    // The tasks API's logins are refused for want of connection slots (SQLSTATE 53300), as a
    // database at its limit refuses them.
    const role = roleName('tasksApi');
    await runtime.db.query(`ALTER ROLE ${role} CONNECTION LIMIT 0`);
    let refused: Awaited<ReturnType<typeof rawHttp>>;
    try {
      await endSessions('tasksApi');
      refused = await rawHttp(runtime.url, {
        method: 'POST',
        target: `/tasks/${created.body.taskId}/approve`,
        headers: [['content-type', 'application/json']],
        body: '{}',
      });
    } finally {
      await runtime.db.query(`ALTER ROLE ${role} CONNECTION LIMIT -1`);
    }

    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe(String(retryAfterSeconds));
    expect(JSON.parse(refused.body).error).toBe('the database is unavailable; try again later');
    // Nothing was taken: the same request succeeds now, and is delivered once.
    const approved = await client.call('POST', `/tasks/${created.body.taskId}/approve`, {});
    expect(approved.status).toBe(200);
    const status = await settledWith(1);
    expect(status.effects).toEqual(approvalEffects(1));
  }, 600_000);

  it('alarms relay-errors for a failed relay run only over the alarm period, and delivers its event once', async () => {
    const client = pipelineClient(runtime.url);
    const role = roleName('relay');
    // The relay's login is refused: its next run fails (the "login refused for one second").
    await runtime.db.query(`ALTER ROLE ${role} NOLOGIN`);
    try {
      await endSessions('relay');
      await client.createAndApprove(1);
      await relayFailed.promise;
    } finally {
      await runtime.db.query(`ALTER ROLE ${role} LOGIN`);
    }
    const failing = await client.status();

    // The runner retries on its own (1 s later): the event is delivered, once, without the sweep.
    const status = await settledWith(2);
    expect(status.effects).toEqual(approvalEffects(2));
    expect(failing.alarms[alarmIds.relayErrors]).toBe('ALARM');
    expect(status.relay.errors).toBeGreaterThanOrEqual(1);
    // A period later the failure is out of the alarm's window, as CloudWatch sums Errors per period.
    clockOffsetMs = (topology.alarms.periodSeconds + 1) * 1_000;
    const later = await client.status();
    expect(later.alarms[alarmIds.relayErrors]).toBe('OK');
    expect(later.relay.errors).toBe(status.relay.errors);
  }, 600_000);

  it('answers /ops/status 200 with the DynamoDB engine down: marked down with its cause, every other section read', async () => {
    await runtime.consumers.dynamo.kill();
    await restartReached.promise;

    const { status, body } = await rawStatus(runtime.url);
    restartGo.resolve();

    expect(status).toBe(200);
    expect(body.components.postgres).toEqual({ up: true });
    expect(body.components.bus).toEqual({ up: true });
    expect(body.components.dynamo.up).toBe(false);
    expect(body.components.dynamo.cause).toMatch(/ECONNREFUSED|exited/);
    expect(body.consumers).toBeNull();
    expect(body.effects).toBeNull();
    expect(body.tasks?.approved).toBe(2);
    expect(body.outbox).toMatchObject({ pending: 0, delivered: 2 });
    expect(body.audit).not.toBeNull();
    expect(body.alarms?.[alarmIds.inboxDead]).toBe('INSUFFICIENT_DATA');
  }, 300_000);
});
