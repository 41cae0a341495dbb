import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { migrate } from '../../shared/db/migrate';
import { PgSqlClient } from '../../shared/db/pg-client';
import {
  allFunctionRoles,
  type FunctionRole,
  randomRolePassword,
  roleName,
  setRolePasswords,
  urlAs,
} from '../../shared/db/roles';
import type { OpsStatus } from '../../shared/ops/ops-api';
import { EventBridgePublisher } from '../../shared/outbox/eventbridge-publisher';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { createRelayInvocation } from '../../shared/outbox/relay-invocation';
import { RelayLeaseStore } from '../../shared/outbox/relay-lease';
import { metricsNamespace, relayServiceName } from '../../shared/outbox/relay-metrics';
import { noopRelayNudger } from '../../shared/tasks/relay-nudger';
import { createTasksApi } from '../../shared/tasks/tasks-api';
import { type ConsumerName, topology } from '../../shared/topology';
import { dashboardHtml } from './dashboard';
import { FaultInjector, type FaultRates, noFaults } from './faults';
import { startHttpServer } from './http-server';
import { LocalBus } from './local-bus';
import { type LocalConsumers, startLocalConsumers } from './local-consumers';
import { createLocalOpsApi, readOpsStatus } from './local-ops-api';
import { startLocalPostgres } from './postgres';
import { RelayRunner } from './relay-runner';

export interface RuntimeOptions {
  /** Where PostgreSQL, DynamoDB, the bus journal and the local effects keep their data. */
  readonly dataDir: string;
  /** HTTP port on `host` (0 picks a free one; `npm start` defaults to 3000). */
  readonly port: number;
  readonly host?: string;
  readonly dynamo?: 'dynalite' | 'dynamodb-local';
  readonly faults?: FaultRates;
  readonly faultSeed?: number;
  /** The relay's safety sweep period; the topology's by default (tests shorten it). */
  readonly sweepMs?: number;
  /** Nudge the relay after each approve/withdraw (default true); false leaves only the schedule. */
  readonly nudge?: boolean;
  readonly log?: (message: string, extra?: Record<string, unknown>) => void;
}

export interface Runtime {
  readonly url: string;
  readonly dataDir: string;
  /** The schema owner's client (migrations, benchmarks, checks); the functions use their own roles. */
  readonly db: PgSqlClient;
  readonly bus: LocalBus;
  readonly consumers: LocalConsumers;
  readonly relay: RelayRunner;
  status(): Promise<OpsStatus>;
  /** Graceful stop: stop claiming, settle what is in flight, stop services. Committed data stays. */
  stop(): Promise<void>;
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** One runtime per data directory: a second `npm start` on it would fight over PostgreSQL. */
function takeLock(dataDir: string): () => void {
  const lock = join(dataDir, 'runtime.pid');
  if (existsSync(lock)) {
    const pid = Number(readFileSync(lock, 'utf8'));
    if (pid !== process.pid && isAlive(pid)) {
      throw new Error(
        `another pipeline (pid ${pid}) is running on ${dataDir}; stop it or set PIPELINE_DATA_DIR`,
      );
    }
  }
  writeFileSync(lock, String(process.pid));
  return () => rmSync(lock, { force: true });
}

/**
 * Realizes `shared/topology.ts` in one process: embedded PostgreSQL (migrated), DynamoDB
 * (dynalite or DynamoDB Local), the local bus with the topology's rules, the consumer
 * handlers, the relay on its schedule plus nudges, and the HTTP server for the tasks API,
 * the ops API and the dashboard. Every port but the HTTP one is picked free at start.
 */
export async function startRuntime(options: RuntimeOptions): Promise<Runtime> {
  const log = options.log ?? (() => {});
  const dataDir = resolve(options.dataDir);
  mkdirSync(dataDir, { recursive: true });
  const unlock = takeLock(dataDir);
  const startedAt = new Date();
  const stack: (() => Promise<void>)[] = [async () => unlock()];
  const teardown = async () => {
    for (const step of stack.reverse())
      await step().catch((err) => log('stop step failed', { error: String(err) }));
  };
  try {
    const faults = new FaultInjector(options.faults ?? noFaults, options.faultSeed);

    const pg = await startLocalPostgres(join(dataDir, 'postgres'), (m) => log(m));
    stack.push(() => pg.stop());
    const db = new PgSqlClient({ connectionString: pg.url, maxConnections: 4 });
    stack.push(() => db.close());
    const migrated = await migrate(db);
    if (migrated.applied.length > 0) log('migrations applied', { versions: migrated.applied });
    // Each function reaches PostgreSQL as its own role, as on AWS; fresh passwords every start.
    const logins = allFunctionRoles.map((role) => ({
      role,
      username: roleName(role),
      password: randomRolePassword(),
    }));
    await setRolePasswords(db, logins);
    const roleClients = new Map<FunctionRole, PgSqlClient>();
    const connections: Record<FunctionRole, number> = { relay: 8, tasksApi: 8, archive: 4, ops: 4 };
    for (const login of logins) {
      const client = new PgSqlClient({
        connectionString: urlAs(pg.url, login),
        maxConnections: connections[login.role],
      });
      roleClients.set(login.role, client);
      stack.push(() => client.close());
    }
    const dbAs = (role: FunctionRole) => roleClients.get(role) as PgSqlClient;

    const consumers = await startLocalConsumers({
      dataDir,
      db: dbAs('archive'),
      engine: options.dynamo ?? 'dynalite',
      faults,
      log,
    });
    stack.push(() => consumers.stop());

    const bus = new LocalBus({
      busName: topology.busName,
      rules: topology.rules,
      dir: join(dataDir, 'bus'),
      maxRequestBytes: topology.relay.maxRequestBytes,
      faults,
      invoke: (consumer: ConsumerName, event) => consumers.invoke(consumer, event),
      retry: (consumer) => {
        const policy = topology.consumers[consumer];
        return {
          // No attempt budget: the inbox decides what is DEAD (and acknowledges it), transient
          // failures are retried until the maximum event age, plus a backoff for the inbox's last word.
          maxAttempts: Number.POSITIVE_INFINITY,
          baseMs: policy.backoff.baseMs,
          maxMs: policy.backoff.maxMs,
          maxAgeMs: policy.maxEventAgeSeconds * 1_000 + policy.backoff.maxMs,
        };
      },
      log,
    });
    await bus.start();
    stack.push(() => bus.stop());

    const abort = new AbortController();
    const logger = new Logger({ serviceName: relayServiceName, logLevel: 'WARN' });
    const metrics = new Metrics({ namespace: metricsNamespace, serviceName: relayServiceName });
    const eventBridge = new EventBridgeClient({
      endpoint: bus.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    const relayDb = dbAs('relay');
    const relayBody = createRelayInvocation({
      outbox: new OutboxStore(relayDb),
      lease: new RelayLeaseStore(relayDb),
      publisher: new EventBridgePublisher(eventBridge, {
        busName: topology.busName,
        source: topology.source,
        maxEntries: topology.relay.putEventsMaxEntries,
        maxRequestBytes: topology.relay.maxRequestBytes,
        concurrency: topology.relay.publishConcurrency,
      }),
      settings: topology.relay,
      logger,
      metrics,
      // The runner is created below; the relay only calls it after its first run has started.
      wakeups: { wakeAfter: (ms, reason) => relay.wakeAfter(ms, reason) },
      signal: abort.signal,
    });
    const sweepMs = options.sweepMs ?? topology.relay.sweepSeconds * 1_000;
    const relay: RelayRunner = new RelayRunner({
      // Locally the EMF lines would only flood the console: figures are on /ops/status instead.
      relay: async (event, context) => {
        try {
          return await relayBody(event, context);
        } finally {
          metrics.clearMetrics();
        }
      },
      sweepMs,
      timeoutMs: topology.relay.timeoutSeconds * 1_000,
      onError: (err, kind) => log('relay run failed', { kind, error: String(err) }),
    });
    relay.start();
    stack.push(async () => {
      abort.abort();
      await relay.stop();
      eventBridge.destroy();
    });

    const tasksApi = createTasksApi({
      db: dbAs('tasksApi'),
      nudger: options.nudge === false ? noopRelayNudger : relay,
      logger: new Logger({ serviceName: 'tasks-api', logLevel: 'WARN' }),
    });
    const opsApi = createLocalOpsApi({ db: dbAs('ops'), consumers, bus, relay, startedAt, sweepMs });
    const http = await startHttpServer({
      host: options.host ?? '127.0.0.1',
      port: options.port,
      tasksApi,
      opsApi,
      dashboardHtml,
      log,
    });
    stack.push(
      () =>
        new Promise<void>((resolve) => {
          http.server.close(() => resolve());
          http.server.closeAllConnections();
        }),
    );

    return {
      url: http.url,
      dataDir,
      db,
      bus,
      consumers,
      relay,
      status: () => readOpsStatus(opsApi),
      stop: teardown,
    };
  } catch (err) {
    await teardown();
    throw err;
  }
}
