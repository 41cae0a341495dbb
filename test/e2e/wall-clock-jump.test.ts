import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalPort } from '../../infra/local/consumer-resources/local-ports';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import type { Publisher } from '../../shared/consumers/resources';
import { TransientError } from '../../shared/inbox/failure-kind';
import { alarmIds } from '../../shared/ops/alarm-ids';
import { deliveryBoundMs, type FullStatus, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { waitFor } from '../support/wait-for';
import { realNow, restoreWallClock, stepWallClock } from '../support/wall-clock';

/**
 * The system clock steps 25 h ahead while the runtime runs, then back, with deliveries retrying
 * and others DEAD. Nothing may notice: retries go on and succeed, `relay-silent` stays OK, a
 * redrive of every DEAD record redrives them all, and no record is left dated in the future.
 *
 * This machine's clock cannot be set, so the step is the runtime process's own wall clock
 * (test/support/wall-clock.ts: `Date` jumps, the monotonic clock that timers run on does not),
 * which is what a step of the system clock is to the Node process. PostgreSQL and dynalite's
 * worker thread keep the real clock; the pipeline's ages, leases and alarms are all in this
 * process, so the fault reaches every one of them as the real one did.
 */

const consumer = 'notify';
const day = 24 * 3_600_000;
/** How far ahead of the real time a record's time may be: a lease or one backoff at most. */
const aheadAtMostMs = 5 * 60_000;

/** How the notify effect's topic answers now. */
let topic: 'works' | 'fails transiently' | 'fails permanently' = 'works';

let runtime: Runtime;
let dir: string;

/** The notify topic behind a switch: a transient failure (retried), a permanent one (DEAD after 3), or the real topic. */
const switchable = (built: LocalPort): LocalPort => {
  if (built.kind !== 'topic') return built;
  const real: Publisher = built.port;
  return {
    kind: 'topic',
    port: {
      publish: async (message) => {
        if (topic === 'fails transiently') throw new TransientError('the topic is throttling');
        if (topic === 'fails permanently') throw new Error('the topic refuses this message');
        return real.publish(message);
      },
    },
  };
};

beforeAll(async () => {
  // Installed before the runtime reads any clock: a clock it keeps a reference to steps too.
  stepWallClock(0);
  dir = tempDataDir('pipeline-clock-');
  runtime = await startRuntime({
    dataDir: dir,
    port: 0,
    seams: { wrapPort: (c, _key, built) => (c === consumer ? switchable(built) : built) },
  });
}, 300_000);

afterAll(async () => {
  restoreWallClock();
  await runtime?.stop();
  rmSync(dir, { recursive: true, force: true });
}, 120_000);

async function eventIds(taskIds: readonly string[]): Promise<string[]> {
  const rows = await runtime.db.query<{ event_id: string }>(
    'SELECT event_id FROM outbox WHERE aggregate_id = ANY(:ids::uuid[]) ORDER BY created_at',
    { ids: `{${taskIds.join(',')}}` },
  );
  return rows.rows.map((r) => r.event_id);
}

/** The notify records of `ids` (undefined where the event has not reached notify yet). */
const records = (ids: readonly string[]) =>
  Promise.all(ids.map((eventId) => runtime.consumers.inbox.get({ consumer, eventId })));

const statusOf = (client: ReturnType<typeof pipelineClient>): Promise<FullStatus> => client.status();

describe('a step of the wall clock while the runtime runs', () => {
  it('kills no retry, raises no relay-silent, and leaves no record dated in the future after a redrive', async () => {
    const client = pipelineClient(runtime.url);

    // Two events whose notification can never be sent: DEAD after the permanent budget.
    topic = 'fails permanently';
    const doomed = await eventIds(await client.createAndApprove(2));
    await waitFor(
      () => records(doomed),
      (rs) => rs.every((r) => r?.status === 'DEAD'),
      { timeoutMs: deliveryBoundMs, intervalMs: 200, what: 'two DEAD records' },
    );
    // Three whose notification fails for now: retried.
    topic = 'fails transiently';
    const retrying = await eventIds(await client.createAndApprove(3));
    const before = await waitFor(
      () => records(retrying),
      (rs) => rs.every((r) => r?.status === 'FAILED'),
      { timeoutMs: deliveryBoundMs, intervalMs: 100, what: 'three retrying records' },
    );

    stepWallClock(day + 3_600_000);

    // Each retrying record tried again after the step, and is still being retried.
    const after = await waitFor(
      () => records(retrying),
      // Read between attempts: one caught mid-attempt is PROCESSING, whatever it will end as.
      (rs) =>
        rs.every(
          (r, i) =>
            r?.status === 'DEAD' ||
            (r?.status === 'FAILED' && (r?.attempts ?? 0) > (before[i]?.attempts ?? 0)),
        ),
      { timeoutMs: deliveryBoundMs, intervalMs: 100, what: 'an attempt of each after the step' },
    );
    const stepped = await statusOf(client);
    expect({
      retrying: after.map((r) => r?.status),
      relaySilent: stepped.alarms[alarmIds.relaySilent],
      deadLetters: stepped.deadLetters,
    }).toEqual({ retrying: ['FAILED', 'FAILED', 'FAILED'], relaySilent: 'OK', deadLetters: 0 });

    // The topic works again: every retry succeeds; a redrive of everything DEAD takes both.
    topic = 'works';
    await waitFor(
      () => records(retrying),
      (rs) => rs.every((r) => r?.status === 'PROCESSED'),
      { timeoutMs: deliveryBoundMs, intervalMs: 200, what: 'the retried records processed' },
    );
    const redrive = await client.call<{ redriven: number; complete: boolean }>(
      'POST',
      `/ops/inbox/${consumer}/dead/redrive`,
      { all: true },
    );
    expect(redrive.body).toMatchObject({ redriven: 2, complete: true });
    await waitFor(
      () => records(doomed),
      (rs) => rs.every((r) => r?.status === 'PROCESSED'),
      { timeoutMs: deliveryBoundMs, intervalMs: 200, what: 'the redriven records processed' },
    );

    // The clock is set right again: nothing the runtime wrote meanwhile is dated ahead of it.
    stepWallClock(0);
    const horizon = realNow() + aheadAtMostMs;
    for (const r of await records([...doomed, ...retrying])) {
      if (!r) throw new Error('a record went missing');
      const times = {
        receivedAt: r.receivedAt,
        firstAttemptAt: r.firstAttemptAt,
        updatedAt: r.updatedAt,
        leaseUntil: r.leaseUntil,
        nextAttemptAt: r.nextAttemptAt,
      };
      const ahead = Object.entries(times).filter(([, at]) => at > horizon);
      expect(ahead, `${r.eventId}: ${JSON.stringify(times)}`).toEqual([]);
    }
    const settled = await statusOf(client);
    expect(settled.alarms[alarmIds.relaySilent]).toBe('OK');
    expect(settled.consumers[consumer]).toMatchObject({ dead: 0, failed: 0, inProgress: 0 });
  });
});
