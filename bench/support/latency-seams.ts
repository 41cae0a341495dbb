/**
 * Applies the latency model (bench/support/latency-model.ts) to the local runtime through its
 * seams (`RuntimeSeams` in infra/local/runtime.ts): every hop's delay is drawn once per call at
 * the place that call happens, and counted, so a test can hold each hop to its calls.
 */
import type { LocalPort } from '../../infra/local/consumer-resources/local-ports';
import { seededRandom } from '../../infra/local/faults';
import type { LambdaName, RuntimeSeams, SdkClientSeam } from '../../infra/local/runtime';
import type { FunctionRole } from '../../shared/db/roles';
import type { QueryResult, Row, SqlClient, SqlExecutor, SqlParams } from '../../shared/db/sql-client';
import type { RelayNudger } from '../../shared/tasks/relay-nudger';
import { ContainerPool, type Hop, type LatencyModel, latencyModel, sampler } from './latency-model';

const sleep = (ms: number) => (ms > 0 ? new Promise<void>((r) => setTimeout(r, ms)) : Promise.resolve());

/** Draws of each hop, from one seeded sequence so two runs draw alike; each draw is counted. */
export class HopDelays {
  /** Draws made, by hop: one per call of the hop. */
  readonly draws: Record<Hop, number>;
  /** False turns every delay to 0 (still counted): for the reads a benchmark makes after its run. */
  active = true;
  private readonly samplers: Record<Hop, () => number>;

  constructor(model: LatencyModel = latencyModel, seed = 42) {
    const random = seededRandom(seed);
    const hops = Object.keys(model) as Hop[];
    this.samplers = Object.fromEntries(hops.map((h) => [h, sampler(model[h], random)])) as Record<
      Hop,
      () => number
    >;
    this.draws = Object.fromEntries(hops.map((h) => [h, 0])) as Record<Hop, number>;
  }

  /** One call of `hop`: its latency in ms. */
  draw(hop: Hop): number {
    this.draws[hop]++;
    const ms = this.samplers[hop]();
    return this.active ? ms : 0;
  }
}

/** Half of a call's latency before it reaches the service, half after: what the service holds (a lock, a row) it holds for the second half. */
async function call<T>(ms: number, work: () => Promise<T>): Promise<T> {
  await sleep(ms / 2);
  const result = await work();
  await sleep(ms / 2);
  return result;
}

/**
 * A SqlClient whose every call is a Data API call: each statement; a transaction's
 * BeginTransaction (half before the first statement, half inside, as the Data API holds the
 * transaction from its answer), its CommitTransaction (half inside before the commit, half
 * after) or RollbackTransaction.
 */
export class DataApiSqlClient implements SqlClient {
  constructor(
    private readonly inner: SqlClient,
    private readonly delays: HopDelays,
  ) {}

  query<R extends Row = Row>(sql: string, params?: SqlParams): Promise<QueryResult<R>> {
    return call(this.delays.draw('dataApiCall'), () => this.inner.query<R>(sql, params));
  }

  async transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const begin = this.delays.draw('dataApiCall');
    await sleep(begin / 2);
    let commitHalf = 0;
    try {
      const result = await this.inner.transaction(async (tx) => {
        await sleep(begin / 2);
        const done = await work({
          query: <R extends Row>(sql: string, params?: SqlParams) =>
            call(this.delays.draw('dataApiCall'), () => tx.query<R>(sql, params)),
        });
        commitHalf = this.delays.draw('dataApiCall') / 2;
        await sleep(commitHalf);
        return done;
      });
      await sleep(commitHalf);
      return result;
    } catch (err) {
      // A failed commit was already drawn; anything else is rolled back by a call of its own.
      if (commitHalf === 0) await sleep(this.delays.draw('dataApiCall'));
      throw err;
    }
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** An SDK middleware that delays each call (not each retry attempt: it sits before the retry step) by one draw of `hop`. */
export function delayEachCall(client: SdkClientSeam, delays: HopDelays, hop: Hop): void {
  client.middlewareStack.add((next) => async (args) => call(delays.draw(hop), () => next(args)), {
    step: 'initialize',
    name: `latencyModel-${hop}`,
  });
}

/**
 * A consumer resource's stand-in whose every call is its AWS service's: a bucket's put is an S3
 * PutObject, a topic's publish an SNS Publish. A table's calls are its DynamoDB client's (the
 * `sdkClient` seam delays them), a database's its role's client's (the `sql` seam).
 */
export function resourceCall(built: LocalPort, delays: HopDelays): LocalPort {
  switch (built.kind) {
    case 'bucket': {
      const inner = built.port;
      return {
        kind: 'bucket',
        port: { put: (key, body) => call(delays.draw('s3Put'), () => inner.put(key, body)) },
      };
    }
    case 'topic': {
      const inner = built.port;
      return {
        kind: 'topic',
        port: { publish: (m) => call(delays.draw('snsPublish'), () => inner.publish(m)) },
      };
    }
    case 'table':
    case 'database':
      return built;
  }
}

/** What one model run observed besides its delays. */
export interface ModelObservations {
  /** Environments (cold starts) and peak concurrency of each function. */
  readonly containers: Map<LambdaName, ContainerPool>;
  /** When each consumer invocation finished, by outbox event id and consumer service name. */
  readonly consumerDone: Map<string, Map<LambdaName, number>>;
}

/** Which functions API Gateway fronts (its overhead and a synchronous invoke); the rest are invoked asynchronously. */
const behindApiGateway = new Set<LambdaName>(['tasks-api']);

const eventIdOf = (args: unknown[]) =>
  (args[0] as { detail?: { id?: unknown } } | undefined)?.detail?.id as string | undefined;

/**
 * The runtime seams that apply `delays` hop by hop, and what the run observed. The tasks API's
 * pool is larger: its transaction (four Data API calls today) holds a connection for about
 * half a second, so 100 approvals/s keep about 50 open, as they would keep 50 Aurora
 * connections (whose limit, `max_connections`, is far higher); the embedded PostgreSQL allows
 * 100 in all. A statement outside a transaction holds one only while it runs locally.
 */
export function latencySeams(delays: HopDelays): { seams: RuntimeSeams; observed: ModelObservations } {
  const observed: ModelObservations = { containers: new Map(), consumerDone: new Map() };
  const poolOf = (name: LambdaName) => {
    const pool = observed.containers.get(name) ?? new ContainerPool();
    observed.containers.set(name, pool);
    return pool;
  };
  const lambda = <A extends unknown[], R>(name: LambdaName, fn: (...args: A) => Promise<R>) => {
    const pool = poolOf(name);
    const fronted = behindApiGateway.has(name);
    return async (...args: A): Promise<R> => {
      const gateway = fronted ? delays.draw('apiGateway') : 0;
      await sleep(gateway / 2);
      // Only invocations under the model hold an environment: set-up calls before it (creating the tasks) start none.
      const pooled = delays.active;
      const cold = pooled && pool.acquire().cold;
      try {
        await sleep((fronted ? delays.draw('lambdaInvoke') : 0) + (cold ? delays.draw('coldStart') : 0));
        const result = await fn(...args);
        const eventId = name.startsWith('consumer-') ? eventIdOf(args) : undefined;
        if (eventId) {
          const done = observed.consumerDone.get(eventId) ?? new Map<LambdaName, number>();
          done.set(name, Date.now());
          observed.consumerDone.set(eventId, done);
        }
        return result;
      } finally {
        if (pooled) pool.release();
        await sleep(gateway / 2);
      }
    };
  };
  const seams: RuntimeSeams = {
    sql: (client: SqlClient, _role: FunctionRole) => new DataApiSqlClient(client, delays),
    connections: { tasksApi: 70, relay: 8, taskReader: 8, ops: 4 },
    sdkClient: (client, service) =>
      delayEachCall(client, delays, service === 'dynamodb' ? 'dynamoDbCall' : 'putEvents'),
    wrapPort: (_consumer, _key, built) => resourceCall(built, delays),
    lambda,
    nudger: (inner: RelayNudger): RelayNudger => ({
      async nudge() {
        // The caller waits for Lambda to queue the event; the relay runs after the queue's delay.
        await call(delays.draw('lambdaInvokeApi'), async () => undefined);
        setTimeout(() => void inner.nudge(), delays.draw('asyncQueue')).unref();
      },
    }),
    // EventBridge to the consumer's queue, then the queue's event source mapping to the function.
    deliveryDelayMs: () => delays.draw('eventDelivery') + delays.draw('queueHop'),
    // The consumers reserve no concurrency on AWS: the account's unreserved pool (1,000 by default) is their limit.
    consumerConcurrency: 1_000,
  };
  return { seams, observed };
}
