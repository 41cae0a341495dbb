/**
 * `npm run bench:statements [-- --json] [-- --count N]`: what each database operation of one
 * approval costs the database, in CPU time of the PostgreSQL server's own processes (read from
 * /proc, so the benchmark's client and the machine's other work do not count). The capacity
 * model (`npm run capacity`) turns these into Aurora capacity at a given approval rate.
 *
 * Measured on an embedded PostgreSQL 17 (fsync on) through the real code paths, N approvals
 * (default 2,000) each phase, 4 connections:
 * - approve: `approveTask` (the statements the tasks API runs for one approval);
 * - relay drain: `runRelay` draining those N events over an EventBridge client that accepts
 *   everything, per event (claims, marks, a run's stats);
 * - task read: `getTask`, a task read by id: what the capacity model charges each database call a
 *   consumer declares (its database resource's `perEvent.calls`);
 * - purge: `purgeDelivered` of the delivered rows, per row;
 * - nudge: the relay's Lambda body (`createRelayInvocation`) invoked as the tasks API nudges
 *   it, with nothing left to drain, per invocation: what a nudge costs at most.
 * Writes `bench/results/statements.json` (its schema: infra/aws/capacity/measured.ts). Linux only
 * (/proc). A benchmark, not a test: nothing here asserts a timing.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import pg from 'pg';
import { topology } from '../functions/topology';
import { type StatementCosts, statementCostsPath } from '../infra/aws/capacity/measured';
import { migrate } from '../shared/db/migrate';
import { PgSqlClient } from '../shared/db/pg-client';
import { EventBridgePublisher } from '../shared/outbox/eventbridge-publisher';
import { OutboxStore } from '../shared/outbox/outbox-store';
import { runRelay } from '../shared/outbox/relay';
import { RelayCircuitStore } from '../shared/outbox/relay-circuit';
import { createRelayInvocation } from '../shared/outbox/relay-invocation';
import { RelayLeaseStore } from '../shared/outbox/relay-lease';
import { relayServiceName } from '../shared/outbox/relay-metrics';
import { approveTask, createTask, getTask } from '../shared/tasks/commands';
import { startEmbeddedPostgres } from '../test/support/embedded-pg';
import { isMain, numberArg, progress } from './support/cli';
import { acceptingEventBridge } from './support/counting';
import { round } from './support/stats';

/** Database CPU per operation, and how many operations the figure is the mean of. */
type StatementCost = StatementCosts['operations']['approve'];

// Linux reports process CPU in clock ticks; 100 a second on every common kernel (`getconf CLK_TCK`).
const ticksPerSecond = 100;

/** utime + stime (+ cutime + cstime, the reaped children's) of a process, in ticks. */
function processTicks(stat: string, withChildren: boolean): { ppid: number; ticks: number } {
  // The command name may hold spaces and parentheses: the fields start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const n = (i: number) => Number(fields[i - 3]);
  return { ppid: n(4), ticks: n(14) + n(15) + (withChildren ? n(16) + n(17) : 0) };
}

/**
 * The CPU the whole server has used, in ticks: the postmaster with the children it has reaped,
 * plus every live child (backends, WAL writer, checkpointer, autovacuum). A child that exits
 * between two readings moves from the second term to the first, so nothing is lost.
 */
function serverTicks(postmaster: number): number {
  let total = processTicks(readFileSync(`/proc/${postmaster}/stat`, 'utf8'), true).ticks;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const p = processTicks(readFileSync(`/proc/${entry}/stat`, 'utf8'), false);
      if (p.ppid === postmaster) total += p.ticks;
    } catch {
      // The process ended while the directory was read: its time is in the postmaster's now.
    }
  }
  return total;
}

async function postmasterPid(db: PgSqlClient): Promise<number> {
  const { rows } = await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const backend = rows[0]?.pid;
  if (backend === undefined) throw new Error('no backend pid');
  return processTicks(readFileSync(`/proc/${backend}/stat`, 'utf8'), false).ppid;
}

/** Runs `work` and returns the server CPU it cost per operation, over `count` operations. */
async function measure(postmaster: number, count: number, work: () => Promise<void>): Promise<StatementCost> {
  const before = serverTicks(postmaster);
  await work();
  const used = serverTicks(postmaster) - before;
  return { dbCpuMs: round(((used / ticksPerSecond) * 1000) / count, 4), count };
}

/** `items` through `worker` with `width` of them in flight. */
async function inParallel<T>(items: readonly T[], width: number, worker: (item: T) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await worker(items[next++] as T);
    }),
  );
}

const relaySettings = topology.relay;
const connections = 4;

/** Measures every operation once, on a fresh database. */
export async function measureStatementCosts(count: number): Promise<StatementCosts> {
  const server = await startEmbeddedPostgres({ durable: true });
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  try {
    await admin.query('CREATE DATABASE bench_statements');
    const db = new PgSqlClient({
      connectionString: server.url.replace(/\/postgres$/, '/bench_statements'),
      maxConnections: connections,
    });
    try {
      await migrate(db);
      // Every connection opened before the first reading: no backend's start-up is measured.
      await Promise.all(Array.from({ length: connections }, () => db.query('SELECT 1')));
      const postmaster = await postmasterPid(db);
      const outbox = new OutboxStore(db);
      const publisher = new EventBridgePublisher(acceptingEventBridge().client, {
        busName: topology.busName,
        source: topology.source,
        maxEntries: relaySettings.putEventsMaxEntries,
        maxRequestBytes: relaySettings.maxRequestBytes,
        concurrency: relaySettings.publishConcurrency,
      });
      const relayRun = (owner: string) =>
        runRelay({ outbox, publisher, owner, settings: relaySettings }, { remainingMs: () => 60_000 });

      progress(`statements: creating ${count} tasks`);
      const ids: string[] = [];
      await inParallel(
        Array.from({ length: count }, (_, i) => i),
        connections,
        async (i) => {
          ids.push((await createTask({ title: `task ${i}`, assignee: 'ana' }, { db })).taskId);
        },
      );
      await db.query('VACUUM ANALYZE');

      progress('statements: approve');
      const approve = await measure(postmaster, count, () =>
        inParallel(ids, connections, async (taskId) => {
          await approveTask({ taskId, approvedBy: 'rita' }, { db });
        }),
      );
      progress('statements: relay drain');
      const relayDrainPerEvent = await measure(postmaster, count, async () => {
        const report = await relayRun('bench-statements-drain');
        if (report.published !== count)
          throw new Error(`the relay published ${report.published} of ${count}`);
      });
      progress('statements: task read');
      const taskRead = await measure(postmaster, count, () =>
        inParallel(ids, connections, async (taskId) => {
          await getTask(taskId, { db });
        }),
      );
      progress('statements: nudges with nothing to drain');
      // The relay's Lambda body, invoked as the tasks API's nudge invokes it, one after another:
      // each takes the run lease, finds nothing, gives it up and looks once more (a nudge that
      // finds the lease held costs one statement, less than this).
      const nudge = createRelayInvocation({
        outbox,
        lease: new RelayLeaseStore(db),
        circuit: new RelayCircuitStore(db),
        publisher,
        settings: relaySettings,
        wakeups: { wakeAfter: async () => {} },
        logger: new Logger({ serviceName: relayServiceName, logLevel: 'SILENT' }),
        metrics: new Metrics({ namespace: 'bench', serviceName: relayServiceName }),
      });
      const nudges = Math.max(50, Math.round(count / 20));
      const relayNudge = await measure(postmaster, nudges, () =>
        inParallel(
          Array.from({ length: nudges }, (_, i) => i),
          1,
          async (i) => {
            await nudge(
              { nudge: true },
              { getRemainingTimeInMillis: () => 60_000, awsRequestId: `bench-${i}` },
            );
          },
        ),
      );
      progress('statements: nudges that find a run draining');
      // The run lease held by a run that drains: each nudge returns after its one statement.
      await db.query(
        "UPDATE relay_lease SET owner = 'bench-draining', lease_until = now() + interval '1 hour' WHERE slot = 0",
      );
      const relayNudgeSkipped = await measure(postmaster, nudges, () =>
        inParallel(
          Array.from({ length: nudges }, (_, i) => i),
          connections,
          async (i) => {
            await nudge(
              { nudge: true },
              { getRemainingTimeInMillis: () => 60_000, awsRequestId: `bench-skip-${i}` },
            );
          },
        ),
      );
      await db.query('UPDATE relay_lease SET owner = NULL, lease_until = NULL WHERE slot = 0');
      progress('statements: purge');
      // Retention 0: every delivered row is due; batches as the relay purges them.
      const purgePerRow = await measure(postmaster, count, async () => {
        let purged = 0;
        for (;;) {
          const n = await outbox.purgeDelivered(0, relaySettings.purge.batchSize);
          purged += n;
          if (n === 0) break;
        }
        if (purged !== count) throw new Error(`purged ${purged} of ${count} rows`);
      });
      return {
        measuredAt: new Date().toISOString(),
        machine: `${cpus().length} x ${cpus()[0]?.model ?? 'unknown CPU'}, embedded PostgreSQL 17, fsync on`,
        operations: { approve, relayDrainPerEvent, taskRead, purgePerRow, relayNudge, relayNudgeSkipped },
      };
    } finally {
      await db.close();
    }
  } finally {
    await admin.end();
    await server.stop();
  }
}

async function main(args: readonly string[]): Promise<void> {
  // The nudges' metrics would go to stdout as EMF; only the result belongs there.
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  const costs = await measureStatementCosts(numberArg(args, '--count', 2_000));
  writeFileSync(statementCostsPath, `${JSON.stringify(costs, null, 2)}\n`);
  progress(`statements: wrote ${statementCostsPath}`);
  if (args.includes('--json')) {
    process.stdout.write(`${JSON.stringify(costs)}\n`);
    return;
  }
  for (const [name, cost] of Object.entries(costs.operations))
    process.stdout.write(
      `${name.padEnd(20)} ${cost.dbCpuMs.toFixed(4)} ms database CPU (mean of ${cost.count})\n`,
    );
}

if (isMain(import.meta.url)) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  });
}
