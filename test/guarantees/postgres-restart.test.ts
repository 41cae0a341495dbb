import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../shared/db/migrate';
import { PgSqlClient } from '../../shared/db/pg-client';
import { allFunctionRoles, setRolePasswords, urlAs } from '../../shared/db/roles';
import type { EventPublisher } from '../../shared/outbox/publisher';
import { runRelay } from '../../shared/outbox/relay';
import { testLogin } from '../support/database';
import { type RestartablePostgres, startRestartablePostgres } from '../support/embedded-pg';
import { deferred } from '../support/gates';
import { engineEndpoint, type Harness, startHarness } from './harness';
import { scenarioTimeoutMs, settleTimeoutMs, sized } from './profile';

/**
 * Failed invocations of the archive consumer (which reads the task from PostgreSQL) while
 * PostgreSQL is down: the outage lasts until that many have failed on it, more in the full profile.
 */
const archiveFailuresDuringOutage = sized(1, 10);

/** A migrated database with the roles' test logins on `server`, as the run's template gives. */
async function pipelineDatabase(server: RestartablePostgres) {
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  await admin.query('CREATE DATABASE pipeline');
  await admin.end();
  const url = server.url.replace(/\/postgres$/, '/pipeline');
  const owner = new PgSqlClient({ connectionString: url });
  try {
    await migrate(owner);
    await setRolePasswords(owner, allFunctionRoles.map(testLogin));
  } finally {
    await owner.close();
  }
  return { url, urlAs: (role: (typeof allFunctionRoles)[number]) => urlAs(url, testLogin(role)) };
}

/** Tries one connection: the error it gets, or undefined when PostgreSQL answers. */
async function probe(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return undefined;
  } catch (err) {
    return String((err as { code?: string }).code ?? err);
  } finally {
    await client.end().catch(() => undefined);
  }
}

describe('guarantee: PostgreSQL stopped in the middle of a relay run, then started again', () => {
  let server: RestartablePostgres;
  let harness: Harness;
  let url: string;
  // The archive consumer's invocations that fail while PostgreSQL is down.
  const outage = { down: false, archiveFailures: 0, enough: deferred() };
  beforeAll(async () => {
    server = await startRestartablePostgres();
    const database = await pipelineDatabase(server);
    url = database.url;
    harness = await startHarness({
      dynamoEndpoint: engineEndpoint('dynalite').endpoint as string,
      database,
      interpose: async (consumer, event, invoke) => {
        try {
          return await invoke(consumer, event);
        } catch (err) {
          if (
            outage.down &&
            consumer === 'archive' &&
            ++outage.archiveFailures >= archiveFailuresDuringOutage
          )
            outage.enough.resolve();
          throw err;
        }
      },
    });
  });
  afterAll(async () => {
    await harness?.stop();
    await server?.stop();
  });

  it(
    'delivers every committed event once PostgreSQL is back, each effect once',
    async () => {
      const tasks = sized(20, 300);
      await harness.approveTasks(tasks);
      let downProbe: string | undefined = 'not probed';
      let deliveriesBeforeOutage = 0;
      let began = false;
      const stopped = deferred();
      // The first PutEvents of the run is on its way when PostgreSQL goes down: the bus accepts it,
      // the relay cannot mark it, and consumers that need the database fail until it is back.
      const stopsDatabase = (publisher: EventPublisher): EventPublisher => ({
        async publish(events) {
          if (!began) {
            began = true;
            outage.down = true;
            deliveriesBeforeOutage = harness.observed.deliveries.length;
            await server.halt();
            downProbe = await probe(url);
            stopped.resolve();
          }
          return publisher.publish(events);
        },
      });
      const run = runRelay(harness.relayDeps({ publisher: stopsDatabase }), {
        remainingMs: () => 10_000,
      }).then(
        () => undefined,
        (err: unknown) => err,
      );
      // PostgreSQL comes back at a point, not after a time: once the run in flight has failed
      // for want of it (its mark retried and gave up) and the archive consumer has failed on it.
      const back = (async () => {
        await Promise.race([stopped.promise, run]);
        if (!began) return;
        await Promise.all([run, outage.enough.promise]);
        outage.down = false;
        await server.resume();
      })();
      const interrupted = await run;
      // Relay runs go on (as the schedule would), failing until PostgreSQL is back.
      const settled = await harness.settle({ timeoutMs: settleTimeoutMs });
      // Had the archive consumer never failed, PostgreSQL comes back now: the checks below say what went wrong.
      outage.enough.resolve();
      await back;
      const report = await harness.check();

      // The fault happened: the run in flight failed for want of its database, which refused
      // connections, while the bus took the batch it had published.
      expect(interrupted).toBeInstanceOf(Error);
      expect(downProbe).toBe('ECONNREFUSED');
      expect(server.running).toBe(true);
      expect(deliveriesBeforeOutage).toBe(0);
      expect(report.figures.duplicates.publish).toBeGreaterThan(0);
      // The archive consumer, which reads the task from PostgreSQL, failed on the outage and retried.
      expect(report.figures.maxConsumerAttempts.archive).toBeGreaterThan(1);
      // Nothing committed was lost, nothing is stuck, nothing is dead.
      expect(report.violations).toEqual([]);
      expect(settled.quiet).toBe(true);
      expect(report.figures.approvedTasks).toBe(tasks);
    },
    scenarioTimeoutMs,
  );
});
