import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { migrate } from '../../shared/db/migrate';
import { PgSqlClient } from '../../shared/db/pg-client';
import { EventBridgePublisher } from '../../shared/outbox/eventbridge-publisher';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { createRelayInvocation } from '../../shared/outbox/relay-invocation';
import { metricsNamespace } from '../../shared/outbox/relay-metrics';
import { noopRelayNudger } from '../../shared/tasks/relay-nudger';
import { createTasksApi } from '../../shared/tasks/tasks-api';
import { type ConsumerName, topology } from '../../shared/topology';
import { dashboardHtml } from './dashboard';
import { FaultInjector, type FaultRates, noFaults } from './faults';
import { OpsError, startHttpServer } from './http-server';
import { LocalBus } from './local-bus';
import { type LocalConsumers, startLocalConsumers } from './local-consumers';
import { evaluateAlarms, latestEvents, type OpsStatus, taskCounts, taskEvents } from './ops';
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
  /** Relay schedule period; the topology's by default (tests shorten it). */
  readonly scheduleMs?: number;
  /** Nudge the relay after each approve/withdraw (default true); false leaves only the schedule. */
  readonly nudge?: boolean;
  readonly log?: (message: string, extra?: Record<string, unknown>) => void;
}

export interface Runtime {
  readonly url: string;
  readonly dataDir: string;
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
    const db = new PgSqlClient({ connectionString: pg.url, maxConnections: 20 });
    stack.push(() => db.close());
    const migrated = await migrate(db);
    if (migrated.applied.length > 0) log('migrations applied', { versions: migrated.applied });

    const consumers = await startLocalConsumers({
      dataDir,
      db,
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
          // Room for the inbox to reach its own max attempts (it then acknowledges as DEAD),
          // plus the deliveries that find another still holding the lease.
          maxAttempts: policy.maxAttempts + 2,
          baseMs: policy.backoff.baseMs,
          maxMs: policy.backoff.maxMs,
          maxAgeMs: policy.asyncInvoke.maximumEventAgeSeconds * 1_000,
        };
      },
      log,
    });
    await bus.start();
    stack.push(() => bus.stop());

    const abort = new AbortController();
    const logger = new Logger({ serviceName: 'outbox-relay', logLevel: 'WARN' });
    const metrics = new Metrics({ namespace: metricsNamespace, serviceName: 'outbox-relay' });
    const eventBridge = new EventBridgeClient({
      endpoint: bus.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    const relayBody = createRelayInvocation({
      outbox: new OutboxStore(db),
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
      signal: abort.signal,
    });
    const relay = new RelayRunner({
      // Locally the EMF lines would only flood the console: figures are on /ops/status instead.
      relay: async (event, context) => {
        try {
          return await relayBody(event, context);
        } finally {
          metrics.clearMetrics();
        }
      },
      scheduleMs: options.scheduleMs ?? topology.relay.scheduleSeconds * 1_000,
      budgetMarginMs: topology.relay.budgetMarginMs,
      onError: (err, kind) => log('relay run failed', { kind, error: String(err) }),
    });
    relay.start();
    stack.push(async () => {
      abort.abort();
      await relay.stop();
      eventBridge.destroy();
    });

    const outbox = new OutboxStore(db);
    const status = async (): Promise<OpsStatus> => {
      const [tasks, outboxStats, inbox, effects] = await Promise.all([
        taskCounts(db),
        outbox.stats(),
        consumers.inboxCounts(),
        consumers.effectCounts(),
      ]);
      const deadLetters = bus.deadLetters().length;
      return {
        tasks,
        outbox: outboxStats,
        consumers: inbox,
        effects,
        deadLetters,
        alarms: evaluateAlarms({
          outbox: outboxStats,
          consumers: inbox,
          deadLetters,
          relayErrors: relay.errors,
          relayLastRunAt: relay.lastRunAt,
          now: new Date(),
          startedAt,
        }),
        relay: { lastRunAt: relay.lastRunAt?.toISOString() ?? null, errors: relay.errors },
      };
    };

    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
    const consumerName = (name: string | undefined): ConsumerName => {
      if (!name || !(name in topology.consumers)) {
        throw new OpsError(
          400,
          `unknown consumer "${name}"; one of ${Object.keys(topology.consumers).join(', ')}`,
        );
      }
      return name as ConsumerName;
    };
    const redriveTarget = (body: unknown): { eventId?: string; all: boolean } => {
      const b = (body ?? {}) as { eventId?: unknown; all?: unknown };
      if (b.all === true) return { all: true };
      if (typeof b.eventId === 'string' && b.eventId !== '') return { eventId: b.eventId, all: false };
      throw new OpsError(400, 'body must be {"eventId": "..."} or {"all": true}');
    };
    const tasksApi = createTasksApi({
      db,
      nudger: options.nudge === false ? noopRelayNudger : relay,
      logger: new Logger({ serviceName: 'tasks-api', logLevel: 'WARN' }),
    });
    const http = await startHttpServer({
      host: options.host ?? '127.0.0.1',
      port: options.port,
      tasksApi,
      dashboardHtml,
      log,
      ops: [
        { method: 'GET', path: /^\/ops\/status$/, route: () => status() },
        {
          method: 'GET',
          path: /^\/ops\/events$/,
          route: async (_m, _b, url) => latestEvents(db, Number(url.searchParams.get('limit') ?? 20) || 20),
        },
        { method: 'GET', path: /^\/ops\/outbox\/dead$/, route: () => outbox.listDead(500) },
        {
          method: 'POST',
          path: /^\/ops\/outbox\/dead\/redrive$/,
          route: async (_m, body) => {
            const target = redriveTarget(body);
            const ids = target.all
              ? (await outbox.listDead(10_000)).map((d) => d.eventId)
              : [target.eventId as string];
            let redriven = 0;
            for (const id of ids) if (uuid.test(id) && (await outbox.redriveDead(id))) redriven++;
            if (!target.all && redriven === 0)
              throw new OpsError(404, `no dead outbox event ${target.eventId}`);
            if (redriven > 0) void relay.nudge();
            return { redriven };
          },
        },
        {
          method: 'GET',
          path: /^\/ops\/inbox\/([^/]+)\/dead$/,
          route: (m) => consumers.inboxDead(consumerName(m[1])),
        },
        {
          method: 'POST',
          path: /^\/ops\/inbox\/([^/]+)\/dead\/redrive$/,
          route: async (m, body) => {
            const consumer = consumerName(m[1]);
            const target = redriveTarget(body);
            const redriven = await consumers.redriveInbox(
              consumer,
              target.all ? 'all' : (target.eventId as string),
              (event) => bus.redeliver(consumer, event),
            );
            if (!target.all && redriven === 0)
              throw new OpsError(404, `no dead ${consumer} inbox record ${target.eventId}`);
            return { redriven };
          },
        },
        { method: 'GET', path: /^\/ops\/dead-letters$/, route: async () => bus.deadLetters() },
        {
          method: 'POST',
          path: /^\/ops\/dead-letters\/redrive$/,
          route: async (_m, body) => {
            const target = redriveTarget(body);
            // A letter is (event id, consumer): the same event can be dead for two consumers.
            const named = (body as { consumer?: string } | undefined)?.consumer;
            const only = named === undefined ? undefined : consumerName(named);
            const ids = target.all
              ? bus.deadLetters().map((d) => [d.id, d.consumer] as const)
              : [[target.eventId as string, only] as const];
            let redriven = 0;
            for (const [id, consumer] of ids) if (bus.redrive(id, consumer)) redriven++;
            if (!target.all && redriven === 0) throw new OpsError(404, `no dead letter ${target.eventId}`);
            return { redriven };
          },
        },
        {
          method: 'GET',
          path: /^\/ops\/tasks\/([^/]+)\/trace$/,
          route: async (m) => {
            const taskId = m[1] ?? '';
            if (!uuid.test(taskId)) throw new OpsError(400, `task id "${taskId}" is not a UUID`);
            const { rows } = await db.query('SELECT task_id FROM tasks WHERE task_id = :id::uuid', {
              id: taskId,
            });
            if (rows.length === 0) throw new OpsError(404, `no task ${taskId}`);
            const events = await taskEvents(db, taskId);
            return {
              taskId,
              events: await Promise.all(
                events.map(async (e) => ({ ...e, consumers: await consumers.trace(e.eventId) })),
              ),
            };
          },
        },
      ],
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
      status,
      stop: teardown,
    };
  } catch (err) {
    await teardown();
    throw err;
  }
}
