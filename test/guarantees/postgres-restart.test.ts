import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../shared/db/migrate';
import { PgSqlClient } from '../../shared/db/pg-client';
import { allFunctionRoles, setRolePasswords, urlAs } from '../../shared/db/roles';
import type { EventPublisher } from '../../shared/outbox/publisher';
import { runRelay } from '../../shared/outbox/relay';
import { testLogin } from '../support/database';
import { type RestartablePostgres, startRestartablePostgres } from '../support/embedded-pg';
import { engineEndpoint, type Harness, startHarness } from './harness';
import { scenarioTimeoutMs, settleTimeoutMs, sized } from './profile';

/** How long PostgreSQL stays down: seconds here, longer in the full profile. */
const outageMs = sized(2_000, 10_000);

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
  beforeAll(async () => {
    server = await startRestartablePostgres();
    const database = await pipelineDatabase(server);
    url = database.url;
    harness = await startHarness({ dynamoEndpoint: engineEndpoint('dynalite').endpoint as string, database });
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
      let outage: Promise<void> | undefined;
      let deliveriesBeforeOutage = 0;
      // The first PutEvents of the run is on its way when PostgreSQL goes down: the bus accepts it,
      // the relay cannot mark it, and consumers that need the database fail until it is back.
      const stopsDatabase = (publisher: EventPublisher): EventPublisher => ({
        async publish(events) {
          if (!outage) {
            deliveriesBeforeOutage = harness.observed.deliveries.length;
            await server.halt();
            downProbe = await probe(url);
            outage = new Promise<void>((resolve) => setTimeout(resolve, outageMs)).then(() =>
              server.resume(),
            );
          }
          return publisher.publish(events);
        },
      });
      const interrupted = await runRelay(harness.relayDeps({ publisher: stopsDatabase }), {
        remainingMs: () => 10_000,
      }).then(
        () => undefined,
        (err: unknown) => err,
      );
      // Relay runs go on (as the schedule would), failing until PostgreSQL is back.
      const settled = await harness.settle({ timeoutMs: outageMs + settleTimeoutMs });
      await outage;
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
