import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { topology as projectTopology } from '../../functions/topology';
import { DeliveryAuditStore } from '../../shared/audit/audit-store';
import { runDeliveryAudit } from '../../shared/audit/delivery-audit';
import { consumerServiceName } from '../../shared/consumers/contract';
import { migrate } from '../../shared/db/migrate';
import { ConnectionScope, PgSqlClient } from '../../shared/db/pg-client';
import { applicationName, timeoutsOf } from '../../shared/db/pg-settings';
import {
  allFunctionRoles,
  type FunctionRole,
  randomRolePassword,
  roleName,
  setRolePasswords,
  urlAs,
} from '../../shared/db/roles';
import type { SqlClient } from '../../shared/db/sql-client';
import { localBusIdentity } from '../../shared/events/bus-event';
import { localHeaderCaller } from '../../shared/http/caller';
import type { OpsStatus } from '../../shared/ops/ops-api';
import type { ConsumerRedelivery, StatusComponent } from '../../shared/ops/ops-ports';
import { EventBridgePublisher } from '../../shared/outbox/eventbridge-publisher';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { RelayCircuitStore } from '../../shared/outbox/relay-circuit';
import { createRelayInvocation } from '../../shared/outbox/relay-invocation';
import { RelayLeaseStore } from '../../shared/outbox/relay-lease';
import { metricsNamespace, relayServiceName } from '../../shared/outbox/relay-metrics';
import { noopRelayNudger, type RelayNudger } from '../../shared/tasks/relay-nudger';
import { createTasksApi } from '../../shared/tasks/tasks-api';
import {
  type AuditSettings,
  type ConsumerName,
  consumerPolicyOf,
  type Topology,
} from '../../shared/topology';
import { dashboardHtml } from '../ops-tools/dashboard/page';
import { AuditRunner } from './audit-runner';
import { type JournalDisk, journalUnavailableMessage } from './bus/journal';
import type { LocalPort } from './consumer-resources/local-ports';
import { FaultInjector, type FaultRates, noFaults } from './faults';
import { ForeignEffectsWatch } from './foreign-effects';
import { startHttpServer } from './http-server';
import { remakeDamagedDeliveries } from './journal-repair';
import { type BusEvent, LocalBus } from './local-bus';
import { type LocalConsumers, startLocalConsumers } from './local-consumers';
import { type LocalCredentials, localCredentials, localRegion } from './local-credentials';
import { BusRedelivery } from './local-ops';
import { createLocalOpsApi, readOpsStatus } from './local-ops-api';
import { type LocalPostgres, startLocalPostgres } from './postgres';
import { PostgresProbe } from './postgres-probe';
import { RelayRunner } from './relay-runner';
import { databaseFigures, StatusHistory } from './status-history';
import { steadyClock } from './steady-clock';

/** The local caller when `PIPELINE_CALLER` is unset: the person running the pipeline. */
export function defaultLocalCaller(): string {
  return `local:${userInfo().username}`;
}

export interface RuntimeOptions {
  /** Where PostgreSQL, DynamoDB, the bus journal and the local effects keep their data. */
  readonly dataDir: string;
  /**
   * What to realize: its rules, its consumers (the registry's, with their resources), their
   * policies, the relay's, the inbox's and the audit's settings. A test passes a variant
   * (`topologyWith`) to run a consumer of its own.
   * @default the project's topology (`functions/topology.ts`)
   */
  readonly topology?: Topology;
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
  /**
   * Who the local server says every request comes from (`PIPELINE_CALLER`): the reviewer of an
   * approval and the withdrawer of a withdrawal, as the IAM principal is on AWS.
   * @default `local:<the OS user's name>`
   */
  readonly caller?: string;
  readonly log?: (message: string, extra?: Record<string, unknown>) => void;
  /** Where a benchmark puts the cloud's latencies in (bench/support/latency-seams.ts); none by default. */
  readonly seams?: RuntimeSeams;
  /**
   * The delivery audit: how often it runs (`topology.audit.localPeriodSeconds` by default) and
   * settings over the topology's (a test shortens the grace period and runs it itself).
   */
  readonly audit?: { readonly periodMs?: number; readonly settings?: Partial<AuditSettings> };
  /**
   * The runtime's one clock (epoch ms) for every age, lease, backoff and alarm window it keeps:
   * the bus's, the consumers' inbox, the relay's, the runners', the ops API's. By default a
   * steady clock (steady-clock.ts): the wall clock read at start, then moved by the monotonic
   * clock, so a step of the system clock while it runs changes none of them.
   */
  readonly clock?: () => number;
  /**
   * The bus's clock for its own bookkeeping (delivery ages, dead-letter expiry): the runtime's
   * clock by default; a test moves it to make a delivery outlive its retries or a dead letter its queue.
   */
  readonly busClock?: () => number;
  /**
   * Epoch ms of the runners' records and the local alarms' windows (`relay-errors` counts the
   * failures of its period): the runtime's clock by default; a test moves it past a period.
   */
  readonly alarmClock?: () => number;
  /** How long a client may take to send its request headers before a 408 (the server's default otherwise). */
  readonly headersTimeoutMs?: number;
  /** How often the dashboard chart's history takes a reading (10 s; tests shorten it). */
  readonly historyPeriodMs?: number;
  /**
   * Awaited before each restart of an engine that died (PostgreSQL, the DynamoDB engine): a test
   * holds an engine down here to look at the runtime meanwhile. None by default.
   */
  readonly beforeRestart?: (component: StatusComponent, cause: string) => Promise<void>;
  /** Told when a component serves again after a failure (after the runtime woke what waited on it). */
  readonly onRecovered?: (component: StatusComponent) => void;
  /**
   * The bus journal's disk (a test puts a failing one here; the real one by default) and how
   * much is appended before it compacts (see BusJournalOptions.compactAfterBytes).
   */
  readonly busJournal?: { readonly disk?: Partial<JournalDisk>; readonly compactAfterBytes?: number };
  /**
   * Awaited before an ops redrive hands its event to the bus, after an inbox redrive reset its
   * record: a test holds it here to kill the runtime between the two writes. None by default.
   */
  readonly beforeRedelivery?: (consumer: ConsumerName, event: unknown) => Promise<void>;
  /**
   * Aborts the start (`npm start` asked to stop while starting): looked at between its steps;
   * what was started is stopped again and the start rejects with the signal's reason.
   */
  readonly signal?: AbortSignal;
}

/** An AWS SDK v3 client, as far as a seam touches it: its middleware stack. */
export interface SdkClientSeam {
  readonly middlewareStack: {
    add(
      middleware: (next: (args: never) => Promise<unknown>) => (args: never) => Promise<unknown>,
      options: { step: 'initialize'; name: string },
    ): void;
  };
}

/** A function the runtime runs as Lambda would, by its Powertools service name. */
export type LambdaName = 'tasks-api' | 'outbox-relay' | ReturnType<typeof consumerServiceName>;

/**
 * Injection points for what only the cloud has: each wraps one hop at the place the hop
 * happens, so a benchmark can put a latency on every call of that hop and on nothing else.
 * Locally, without them, every hop is a loopback call or a function call.
 */
export interface RuntimeSeams {
  /** Wraps each function role's database client: on AWS every statement (and BeginTransaction, CommitTransaction) is a Data API call. */
  readonly sql?: (client: SqlClient, role: FunctionRole) => SqlClient;
  /** Connections of a role's pool, over the runtime's own counts: slower calls hold them longer. */
  readonly connections?: Partial<Record<FunctionRole, number>>;
  /** Called once with each AWS SDK client the runtime builds (the relay's EventBridge, the consumers' DynamoDB), before its first call. */
  readonly sdkClient?: (client: SdkClientSeam, service: 'eventbridge' | 'dynamodb') => void;
  /**
   * Wraps each consumer resource's local stand-in (a bucket's files for S3, a topic's file for
   * SNS, ...) before the consumer's effect is built over it; return `built` to leave one alone.
   */
  readonly wrapPort?: (consumer: string, key: string, built: LocalPort) => LocalPort;
  /** Wraps each function as its trigger invokes it: the tasks API (behind API Gateway), the relay, each consumer. */
  readonly lambda?: <A extends unknown[], R>(
    name: LambdaName,
    fn: (...args: A) => Promise<R>,
  ) => (...args: A) => Promise<R>;
  /** Wraps the relay nudger the tasks API calls (on AWS an asynchronous Invoke of the relay). */
  readonly nudger?: (nudger: RelayNudger) => RelayNudger;
  /** How long the bus holds each (event, consumer) before invoking the consumer: EventBridge's ingestion to invocation. */
  readonly deliveryDelayMs?: (consumer: ConsumerName) => number;
  /** Invocations in flight per consumer; the bus's default stands for a reserved concurrency the stack does not set. */
  readonly consumerConcurrency?: number;
}

export interface Runtime {
  readonly url: string;
  readonly dataDir: string;
  /**
   * The data directory's credentials (`credentials.json`, 0600): the key pair the bus's
   * PutEvents endpoint and dynalite accept signatures of, for a test's own client.
   */
  readonly credentials: Pick<LocalCredentials, 'file' | 'aws'>;
  /** The PostgreSQL server (its postmaster's pid and health, for fault drills; its port). */
  readonly postgres: Pick<LocalPostgres, 'pid' | 'health' | 'port'>;
  /** The schema owner's client (migrations, benchmarks, checks); the functions use their own roles. */
  readonly db: PgSqlClient;
  readonly bus: LocalBus;
  readonly consumers: LocalConsumers;
  readonly relay: RelayRunner;
  /** The delivery audit, run on its period; `audit.run()` runs it now. */
  readonly audit: AuditRunner;
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

/**
 * One runtime per data directory: a second `npm start` on it would fight over PostgreSQL. The
 * lock is removed by a clean stop, so finding one of a process that is gone means the last run
 * stopped without one (a SIGKILL, a crash): `uncleanStop` is that run's pid.
 */
function takeLock(dataDir: string): { unlock: () => void; uncleanStop: number | undefined } {
  const lock = join(dataDir, 'runtime.pid');
  let uncleanStop: number | undefined;
  if (existsSync(lock)) {
    const pid = Number(readFileSync(lock, 'utf8'));
    if (pid !== process.pid && isAlive(pid)) {
      throw new Error(
        `another pipeline (pid ${pid}) is running on ${dataDir}; stop it or set PIPELINE_DATA_DIR`,
      );
    }
    uncleanStop = pid;
  }
  writeFileSync(lock, String(process.pid));
  return { unlock: () => rmSync(lock, { force: true }), uncleanStop };
}

/**
 * Realizes `shared/topology.ts` (or `options.topology`) in one process: embedded PostgreSQL
 * (migrated), DynamoDB (dynalite or DynamoDB Local), the local bus with the topology's rules,
 * the handler of each consumer of its registry, the relay on its schedule plus nudges, and the
 * HTTP server for the tasks API, the ops API and the dashboard. Every port but the HTTP one is
 * picked free at start.
 */
export async function startRuntime(options: RuntimeOptions): Promise<Runtime> {
  const log = options.log ?? (() => {});
  const topology = options.topology ?? projectTopology;
  options.signal?.throwIfAborted();
  const dataDir = resolve(options.dataDir);
  mkdirSync(dataDir, { recursive: true });
  const { unlock, uncleanStop } = takeLock(dataDir);
  if (uncleanStop !== undefined) {
    log(
      `the last run on ${dataDir} (pid ${uncleanStop}) did not stop cleanly (killed or crashed): recovering what it left`,
    );
  }
  const clock = options.clock ?? steadyClock();
  const alarmClock = options.alarmClock ?? clock;
  const startedAt = new Date(clock());
  const stack: (() => Promise<void>)[] = [async () => unlock()];
  const teardown = async () => {
    for (const step of stack.reverse())
      await step().catch((err) => log('stop step failed', { error: String(err) }));
  };
  try {
    // Made by the data directory's first start, kept 0600: nothing below has a fixed password.
    const credentials = localCredentials(dataDir, (m) => log(m));
    const faults = new FaultInjector(options.faults ?? noFaults, options.faultSeed);
    // What waited on a component that failed is woken once it serves again, so the backoff
    // built up against the outage does not hold deliveries: set once the relay and the bus exist.
    let wake: (component: StatusComponent) => Promise<void> = async () => {};
    const recovered = (component: StatusComponent) => {
      wake(component)
        .catch((err: unknown) =>
          log('waking the pipeline after a recovery failed; the relay and the bus retry on their own', {
            component,
            error: String(err),
          }),
        )
        .finally(() => options.onRecovered?.(component));
    };

    const pg = await startLocalPostgres(join(dataDir, 'postgres'), (m) => log(m), {
      superuserPassword: credentials.postgres.superuserPassword,
      beforeRestart: options.beforeRestart,
      onRecovered: recovered,
    });
    stack.push(() => pg.stop());
    options.signal?.throwIfAborted();
    const seams = options.seams ?? {};
    // Whether PostgreSQL serves is what a probe with a deadline sees (a stopped postmaster
    // exits no process), and what its supervisor saw die: the supervisor's word first.
    const probe = new PostgresProbe({
      url: pg.url,
      log,
      onRecovered: () => recovered('postgres'),
      supervised: () => pg.health(),
    });
    probe.start();
    stack.push(() => probe.stop());
    const postgresHealth = () => {
      const supervised = pg.health();
      return supervised.up ? probe.state : supervised;
    };
    const db = new PgSqlClient({
      connectionString: pg.url,
      maxConnections: 4,
      applicationName: applicationName('owner'),
      timeouts: timeoutsOf('owner'),
    });
    stack.push(() => db.close());
    const migrated = await migrate(db);
    if (migrated.applied.length > 0) log('migrations applied', { versions: migrated.applied });
    options.signal?.throwIfAborted();
    // This process holds the data directory's lock: any relay run that still holds a slot of
    // the run lease died with an earlier process (a SIGKILL leaves it held for its lease), and
    // would keep this runtime's first sweep and nudges from starting a run until it ran out.
    await db.query('UPDATE relay_lease SET owner = NULL, lease_until = NULL WHERE owner IS NOT NULL');
    // Each function reaches PostgreSQL as its own role, as on AWS; fresh passwords every start.
    const logins = allFunctionRoles.map((role) => ({
      role,
      username: roleName(role),
      password: randomRolePassword(),
    }));
    await setRolePasswords(db, logins);
    const roleClients = new Map<FunctionRole, SqlClient>();
    const connections: Record<FunctionRole, number> = {
      ...{ relay: 8, tasksApi: 8, taskReader: 4, ops: 4, audit: 2 },
      ...seams.connections,
    };
    for (const login of logins) {
      const client = new PgSqlClient({
        connectionString: urlAs(pg.url, login),
        maxConnections: connections[login.role],
        applicationName: applicationName(login.role),
        timeouts: timeoutsOf(login.role),
      });
      roleClients.set(login.role, seams.sql?.(client, login.role) ?? client);
      stack.push(() => client.close());
    }
    const dbAs = (role: FunctionRole) => roleClients.get(role) as SqlClient;
    const asLambda = <A extends unknown[], R>(name: LambdaName, fn: (...args: A) => Promise<R>) =>
      seams.lambda ? seams.lambda(name, fn) : fn;

    // Every effect a consumer performs is checked by the delivery audit against the outbox.
    const foreign = new ForeignEffectsWatch(join(dataDir, 'foreign-effects.json'), log);
    const auditSettings: AuditSettings = { ...topology.audit, ...options.audit?.settings };
    const retentionSeconds = topology.relay.purge.retentionHours * 3_600;
    const consumers = await startLocalConsumers({
      dataDir,
      topology,
      dbAs,
      engine: options.dynamo ?? 'dynalite',
      faults,
      log,
      recount: uncleanStop !== undefined,
      clock,
      credentials: credentials.aws,
      arrivals: { note: (a) => foreign.note(a), recountSince: clock() - retentionSeconds * 1_000 },
      sdkClient: seams.sdkClient && ((client) => seams.sdkClient?.(client, 'dynamodb')),
      wrapPort: seams.wrapPort,
      beforeRestart: options.beforeRestart,
      onRecovered: recovered,
    });
    stack.push(() => consumers.stop());
    // The audit's last look, once the bus has stopped delivering and before the engine stops:
    // what was processed since its last run is checked now, not left unchecked by the stop.
    let lastForeignCheck = async () => {};
    stack.push(() => lastForeignCheck());
    options.signal?.throwIfAborted();
    const consumerInvoke = new Map(
      topology.registry.map(({ name }) => [
        name,
        asLambda(consumerServiceName(name), (event: BusEvent) => consumers.invoke(name, event)),
      ]),
    );
    const invokeConsumer = async (consumer: string, event: BusEvent) => {
      const invoke = consumerInvoke.get(consumer);
      if (invoke === undefined)
        throw new Error(`a rule targets ${consumer}, which is no consumer of the registry`);
      return invoke(event);
    };

    const bus = new LocalBus({
      busName: topology.busName,
      rules: topology.rules,
      dir: join(dataDir, 'bus'),
      maxRequestBytes: topology.relay.maxRequestBytes,
      faults,
      invoke: invokeConsumer,
      deliveryDelayMs: seams.deliveryDelayMs,
      concurrency: seams.consumerConcurrency,
      // Dead letters expire as their queues' messages do on AWS (SQS keeps one at most 14 days).
      deadLetterRetentionMs: (consumer) =>
        consumerPolicyOf(topology, consumer).deadLetterRetentionSeconds * 1_000,
      clock: options.busClock ?? clock,
      onJournalRecovered: () => recovered('bus'),
      journal: options.busJournal,
      credentials: credentials.aws,
      retry: (consumer) => {
        const policy = consumerPolicyOf(topology, consumer);
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
    options.signal?.throwIfAborted();
    const damaged = bus.journalDamage().lines;
    if (damaged.length > 0) {
      // The outbox is the truth: what the unreadable lines still name is delivered again from it.
      const repair = await remakeDamagedDeliveries(
        damaged.map((d) => d.text),
        { db, rules: topology.rules, bus },
      );
      log(
        `bus journal: ${damaged.length} line(s) could not be read; ${repair.deliveries} deliveries of ${repair.events} event(s) they name made again from the outbox`,
        { component: 'bus', file: bus.journalDamage().file, ...repair },
      );
    }

    const abort = new AbortController();
    const logger = new Logger({ serviceName: relayServiceName, logLevel: 'WARN' });
    const metrics = new Metrics({ namespace: metricsNamespace, serviceName: relayServiceName });
    const eventBridge = new EventBridgeClient({
      endpoint: bus.endpoint,
      region: localRegion,
      // A copy: the SDK notes where credentials came from on the object it is given.
      credentials: { ...credentials.aws },
    });
    seams.sdkClient?.(eventBridge as unknown as SdkClientSeam, 'eventbridge');
    const relayDb = dbAs('relay');
    const relayCircuit = new RelayCircuitStore(relayDb);
    const relayBody = createRelayInvocation({
      outbox: new OutboxStore(relayDb),
      lease: new RelayLeaseStore(relayDb),
      circuit: relayCircuit,
      publisher: new EventBridgePublisher(eventBridge, {
        busName: topology.busName,
        source: topology.source,
        maxEntries: topology.relay.putEventsMaxEntries,
        maxRequestBytes: topology.relay.maxRequestBytes,
        concurrency: topology.relay.publishConcurrency,
      }),
      settings: topology.relay,
      clock,
      logger,
      metrics,
      // The runner is created below; the relay only calls it after its first run has started.
      wakeups: { wakeAfter: (ms, reason) => relay.wakeAfter(ms, reason) },
      signal: abort.signal,
    });
    const sweepMs = options.sweepMs ?? topology.relay.sweepSeconds * 1_000;
    const relayLambda = asLambda('outbox-relay', async (...args: Parameters<typeof relayBody>) => {
      try {
        return await relayBody(...args);
      } finally {
        // Locally the EMF lines would only flood the console: figures are on /ops/status instead.
        metrics.clearMetrics();
      }
    });
    const relay: RelayRunner = new RelayRunner({
      // Each run in a scope of its own: a run abandoned at its deadline has its connections
      // dropped, and their backends ended (pg_terminate_backend, as the owner), so a statement a
      // hung backend was sent does not run (and commit: a run lease taken for a run long given
      // up) once it goes on. The drop's cancel request misses one sent to a backend stopped
      // while idle: PostgreSQL forgets a cancel that arrives between statements.
      relay: async (event, context, deadline) => {
        const scope = new ConnectionScope();
        const drop = () => {
          const pids = scope.drop();
          if (pids.length === 0) return;
          db.query(
            'SELECT count(pg_terminate_backend(pid))::int AS n FROM unnest(CAST(:pids AS int[])) AS pid',
            {
              pids: `{${pids.join(',')}}`,
            },
          ).then(
            () => log('relay run abandoned: its backends ended', { pids }),
            (err: unknown) =>
              log('relay run abandoned: ending its backends failed; they end when their connections close', {
                pids,
                error: String(err),
              }),
          );
        };
        deadline.addEventListener('abort', drop, { once: true });
        try {
          return await scope.run(() => relayLambda(event, context));
        } finally {
          deadline.removeEventListener('abort', drop);
        }
      },
      sweepMs,
      timeoutMs: topology.relay.timeoutSeconds * 1_000,
      clock: alarmClock,
      onRun: (summary) => {
        if ('skipped' in summary) return;
        const { opened, closed } = summary.circuit;
        if (opened !== undefined)
          log(
            `relay circuit opened: the bus refused every event (${opened}); no run claims until a probe is accepted`,
            {
              component: 'relay',
              cause: opened,
              held: summary.held,
            },
          );
        if (closed)
          log(
            `relay circuit closed: a probe was accepted after ${closed.openForMs} ms open; ${closed.madeDue} waiting events due`,
            { component: 'relay', ...closed },
          );
      },
      onError: (err, kind) => log('relay run failed', { kind, error: String(err) }),
    });
    relay.start();
    stack.push(async () => {
      abort.abort();
      await relay.stop();
      eventBridge.destroy();
    });

    const relayOutbox = new OutboxStore(relayDb);
    wake = async (component) => {
      // The bus writes again: the relay's next probe is due now (its circuit, opened when the
      // bus refused everything, closes as soon as the probe is accepted, and every waiting row
      // is due), and rows it backed off because the bus refused them beside accepted ones are
      // due too; then a run to take them.
      if (component === 'bus') {
        await relayCircuit.probeNow();
        await relayOutbox.dueAfterOutage(journalUnavailableMessage);
      }
      // Deliveries that failed on the engine (the inbox and the consumers' tables on DynamoDB,
      // a consumer reading PostgreSQL) wait in the bus's retry pauses: retried now.
      if (component !== 'bus') bus.retryNow();
      await relay.nudge();
    };

    const nudger: RelayNudger = options.nudge === false ? noopRelayNudger : relay;
    const tasksApi = asLambda(
      'tasks-api',
      createTasksApi({
        db: dbAs('tasksApi'),
        nudger: seams.nudger?.(nudger) ?? nudger,
        logger: new Logger({ serviceName: 'tasks-api', logLevel: 'WARN' }),
        caller: localHeaderCaller,
      }),
    );
    // The delivery audit as its own role, over the consumers' inbox, on its period.
    const auditStore = new DeliveryAuditStore(dbAs('audit'));
    const checkForeign = () =>
      foreign.check({
        committed: (ids) => auditStore.committedEvents(ids),
        inbox: consumers.inbox,
        now: clock(),
        retentionSeconds,
      });
    const audit = new AuditRunner({
      run: () => {
        // Bounded as the Lambda is, by its timeout.
        // A duration: on the monotonic clock.
        const deadline = performance.now() + auditSettings.timeoutSeconds * 1_000;
        return runDeliveryAudit({
          topology,
          store: auditStore,
          inbox: consumers.inbox,
          bus: localBusIdentity,
          rules: topology.rules,
          settings: auditSettings,
          remainingMs: () => deadline - performance.now(),
          stuck: { inbox: consumers.inbox, redelivery: new BusRedelivery(bus), clock },
        }).then(async (report) => {
          const found = await checkForeign();
          const resent = Object.values(report.resent).reduce((n, c) => n + c, 0);
          if (resent > 0 || report.unsendable > 0) {
            log('delivery audit re-sent inbox records nothing would retry', {
              resent: report.resent,
              unsendable: report.unsendable,
            });
          }
          return { ...report, foreign: found };
        });
      },
      periodMs: options.audit?.periodMs ?? auditSettings.localPeriodSeconds * 1_000,
      onError: (err) => log('delivery audit run failed', { error: String(err) }),
      clock: alarmClock,
    });
    audit.start();
    stack.push(() => audit.stop());
    lastForeignCheck = async () => {
      if (foreign.waiting === 0) return;
      await checkForeign().catch((err: unknown) =>
        log('the delivery audit could not check the last effects against the outbox before the stop', {
          unchecked: foreign.waiting,
          error: String(err),
        }),
      );
    };

    const opsApi = createLocalOpsApi({
      db: dbAs('ops'),
      consumers,
      bus,
      relay,
      audit,
      auditGraceSeconds: auditSettings.graceSeconds,
      stuckAfterSeconds: auditSettings.stuckAfterSeconds,
      redelivery:
        options.beforeRedelivery && gatedRedelivery(new BusRedelivery(bus), options.beforeRedelivery),
      startedAt,
      sweepMs,
      components: () => ({ postgres: postgresHealth(), dynamo: consumers.health(), bus: bus.health() }),
      clock: alarmClock,
      recordClock: clock,
      topology,
      foreignEffects: foreign,
    });
    const history = new StatusHistory({
      read: databaseFigures(dbAs('ops')),
      periodMs: options.historyPeriodMs,
      clock,
      onError: (err) => log('status history reading failed', { error: String(err) }),
    });
    history.start();
    stack.push(async () => history.stop());
    const http = await startHttpServer({
      host: options.host ?? '127.0.0.1',
      port: options.port,
      tasksApi,
      opsApi,
      dashboardHtml,
      history: () => history.snapshot(),
      caller: options.caller ?? defaultLocalCaller(),
      log,
      headersTimeoutMs: options.headersTimeoutMs,
    });
    stack.push(
      () =>
        new Promise<void>((resolve) => {
          http.server.close(() => resolve());
          http.server.closeAllConnections();
        }),
    );

    options.signal?.throwIfAborted();
    return {
      url: http.url,
      dataDir,
      credentials: Object.freeze({ file: credentials.file, aws: Object.freeze({ ...credentials.aws }) }),
      postgres: pg,
      db,
      bus,
      consumers,
      relay,
      audit,
      status: () => readOpsStatus(opsApi),
      stop: teardown,
    };
  } catch (err) {
    await teardown();
    throw err;
  }
}

/** A redelivery that waits for `gate` before each hand-over (RuntimeOptions.beforeRedelivery). */
function gatedRedelivery(
  inner: ConsumerRedelivery,
  gate: (consumer: ConsumerName, event: unknown) => Promise<void>,
): ConsumerRedelivery {
  return {
    async redeliver(consumer, event) {
      await gate(consumer, event);
      await inner.redeliver(consumer, event);
    },
  };
}
