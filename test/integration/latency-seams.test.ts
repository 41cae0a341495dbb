import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { type LatencyModel, latencyModel } from '../../bench/support/latency-model';
import { DataApiSqlClient, HopDelays, latencySeams } from '../../bench/support/latency-seams';
import { topology } from '../../functions/topology';
import { type Runtime, type SdkClientSeam, startRuntime } from '../../infra/local/runtime';
import type { QueryResult, Row, SqlClient, SqlExecutor } from '../../shared/db/sql-client';
import type { RelayNudger } from '../../shared/tasks/relay-nudger';
import { pipelineClient, tempDataDir } from '../support/pipeline-client';
import { subscribersOf } from '../support/topology-expectations';
import { waitFor } from '../support/wait-for';

/** The model with every hop at 0 ms: the seams draw (and count) as under the real one, without waiting. */
const instant = Object.fromEntries(
  Object.keys(latencyModel).map((hop) => [
    hop,
    {
      points: [
        [0, 0],
        [1, 0],
      ],
      source: 'test',
    },
  ]),
) as unknown as LatencyModel;

/** A SqlClient that counts what reaches it, as the Data API would count its calls. */
class CountingSql implements SqlClient {
  statements = 0;
  transactions = 0;
  constructor(private readonly inner?: SqlClient) {}
  async query<R extends Row = Row>(sql: string, params?: never): Promise<QueryResult<R>> {
    this.statements++;
    return this.inner
      ? this.inner.query<R>(sql, params)
      : ({ rows: [], rowCount: 0 } as unknown as QueryResult<R>);
  }
  async transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.transactions++;
    const counting = (tx: SqlExecutor): SqlExecutor => ({
      query: (sql, params) => {
        this.statements++;
        return tx.query(sql, params);
      },
    });
    if (this.inner) return this.inner.transaction((tx) => work(counting(tx)));
    return work(counting({ query: async () => ({ rows: [], rowCount: 0 }) as never }));
  }
  close(): Promise<void> {
    return this.inner?.close() ?? Promise.resolve();
  }
}

/** Data API calls of what `counted` saw: one per statement, and a transaction's Begin and its Commit or Rollback. */
const dataApiCalls = (counted: CountingSql) => counted.statements + 2 * counted.transactions;

describe('the latency model at its seams', () => {
  it('charges one Data API call per statement, and a transaction its BeginTransaction and CommitTransaction or RollbackTransaction', async () => {
    const delays = new HopDelays(instant);
    const inner = new CountingSql();
    const client = new DataApiSqlClient(inner, delays);

    await client.query('SELECT 1');
    await client.transaction(async (tx) => {
      await tx.query('UPDATE a');
      await tx.query('INSERT b');
    });
    await expect(
      client.transaction(async (tx) => {
        await tx.query('UPDATE a');
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');

    expect(inner).toMatchObject({ statements: 4, transactions: 2 });
    expect(delays.draws.dataApiCall).toBe(dataApiCalls(inner));
  });

  it('makes the nudge one Invoke call the caller waits for, then the relay runs after one queue delay', async () => {
    const delays = new HopDelays(instant);
    const { seams } = latencySeams(delays);
    let nudged = 0;
    let resolveNudged: () => void = () => undefined;
    const ran = new Promise<void>((r) => {
      resolveNudged = r;
    });
    const inner: RelayNudger = {
      async nudge() {
        nudged++;
        resolveNudged();
      },
    };

    await seams.nudger?.(inner).nudge();
    await ran;

    expect(nudged).toBe(1);
    expect(delays.draws).toMatchObject({ lambdaInvokeApi: 1, asyncQueue: 1 });
  });

  it('starts an environment only when none is idle, and puts API Gateway and a synchronous invoke only in front of the tasks API', async () => {
    const delays = new HopDelays(instant);
    const { seams, observed } = latencySeams(delays);
    const lambda = seams.lambda as NonNullable<typeof seams.lambda>;
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const api = lambda('tasks-api', async (wait: boolean) => {
      if (wait) await held;
      return 'ok';
    });
    const consumer = lambda('consumer-index', async () => 'done');

    const first = api(true);
    await api(false); // the first is still running: a second environment
    release();
    await first;
    await api(false); // two idle now: no new one
    await consumer();

    expect(observed.containers.get('tasks-api')).toMatchObject({ created: 2, peak: 2 });
    expect(observed.containers.get('consumer-index')).toMatchObject({ created: 1 });
    expect(delays.draws).toMatchObject({ apiGateway: 3, lambdaInvoke: 3, coldStart: 3 });
  });

  describe('on the running pipeline', () => {
    let runtime: Runtime | undefined;
    let dir: string | undefined;
    afterEach(async () => {
      await runtime?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('draws every hop of one approval once per call at its seam, counted apart by the components it wraps', async () => {
      const delays = new HopDelays(instant);
      const { seams, observed } = latencySeams(delays);
      const counted = new Map<string, CountingSql>();
      const sdkSends = { dynamodb: 0, eventbridge: 0 };
      dir = tempDataDir();
      runtime = await startRuntime({
        dataDir: dir,
        port: 0,
        seams: {
          ...seams,
          // The model's wrappers over counters placed between them and the real components.
          sql: (client, role) => {
            const counter = new CountingSql(client);
            counted.set(role, counter);
            return seams.sql?.(counter, role) ?? counter;
          },
          sdkClient: (client: SdkClientSeam, service) => {
            seams.sdkClient?.(client, service);
            client.middlewareStack.add(
              (next) => async (args) => {
                sdkSends[service]++;
                return next(args);
              },
              { step: 'initialize', name: 'countSends' },
            );
          },
        },
      });
      const client = pipelineClient(runtime.url);
      // The start's own sweep holds the relay's run lease while it runs; an approve that finds
      // it held leaves the event to that run and nudges nothing (one nudge is counted below).
      const started = runtime;
      await waitFor(
        () => Promise.resolve(started.relay.lastRunAt),
        (at) => at !== undefined,
        { timeoutMs: 300_000, what: "the start's sweep done" },
      );

      const created = await client.call<{ taskId: string }>('POST', '/tasks', { title: 't', assignee: 'a' });
      const approved = await client.call<{ eventId: string }>(
        'POST',
        `/tasks/${created.body.taskId}/approve`,
        {},
      );
      // The consumers an approval goes to, and what their effects put and publish per event.
      const subscribers = subscribersOf(topology.eventTypes.approved);
      const resources = subscribers.flatMap((c) => Object.values(c.resources));
      const puts = resources.reduce((n, r) => n + (r.kind === 'bucket' ? r.perEvent.puts : 0), 0);
      const publishes = resources.reduce((n, r) => n + (r.kind === 'topic' ? r.perEvent.publishes : 0), 0);
      await waitFor(
        () => Promise.resolve(observed.consumerDone.get(approved.body.eventId)?.size ?? 0),
        (done) => done === subscribers.length,
        // In-process work with every hop instant: a bound on a hang, not a speed.
        { timeoutMs: 120_000, what: 'every consumer of the approval done' },
      );

      expect(approved.status).toBe(200);
      const sqlCalls = [...counted.values()].reduce((sum, c) => sum + dataApiCalls(c), 0);
      expect(delays.draws.dataApiCall).toBe(sqlCalls);
      expect(delays.draws.dynamoDbCall).toBe(sdkSends.dynamodb);
      expect(delays.draws.putEvents).toBe(sdkSends.eventbridge);
      expect(sdkSends.eventbridge).toBeGreaterThanOrEqual(1);
      expect(delays.draws).toMatchObject({
        apiGateway: 2, // the create and the approve
        lambdaInvoke: 2,
        lambdaInvokeApi: 1, // the approve's nudge
        asyncQueue: 1,
        eventDelivery: subscribers.length, // one per consumer
        queueHop: subscribers.length, // and its queue
        s3Put: puts,
        snsPublish: publishes,
      });
      // One environment per function that ran, each started cold once.
      const environments = [...observed.containers.values()].reduce((sum, pool) => sum + pool.created, 0);
      expect(delays.draws.coldStart).toBe(environments);
      expect(observed.containers.get('consumer-archive')?.created).toBe(1);
    });
  });
});
