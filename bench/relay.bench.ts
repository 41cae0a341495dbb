/**
 * `npm run bench:relay [-- --json] [-- --events N]`: drains N (default 20,000) pending outbox
 * rows from an embedded PostgreSQL 17 three ways and compares throughput:
 * - relay: the real relay code (`runRelay` -> OutboxStore -> EventBridgePublisher) over an
 *   EventBridge client that accepts every entry at once, so only our code and the database count;
 * - ceiling: the same claim and mark statements, as many loops in parallel, with no publish at
 *   all (the database's limit);
 * - naive: select one row, publish it, update one row.
 * It is a benchmark, not a test: nothing here asserts a timing.
 */
import { randomUUID } from 'node:crypto';
import type { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import pg from 'pg';
import { migrate } from '../shared/db/migrate';
import { PgSqlClient } from '../shared/db/pg-client';
import { EventBridgePublisher } from '../shared/outbox/eventbridge-publisher';
import { OutboxStore } from '../shared/outbox/outbox-store';
import { runRelay } from '../shared/outbox/relay';
import { topology } from '../shared/topology';
import { startEmbeddedPostgres } from '../test/support/embedded-pg';
import { seedPending } from '../test/support/outbox-fixtures';

const args = process.argv.slice(2);
const json = args.includes('--json');
const eventsArg = args.indexOf('--events');
const events = eventsArg >= 0 ? Number(args[eventsArg + 1]) : 20_000;
const naiveEvents = events;
const log = (msg: string) => {
  if (!json) console.error(msg);
};

/** An EventBridge client stand-in that accepts every entry at once. */
const acceptingClient = {
  async send(command: PutEventsCommand) {
    const entries = command.input.Entries ?? [];
    return { FailedEntryCount: 0, Entries: entries.map(() => ({ EventId: randomUUID() })) };
  },
} as unknown as EventBridgeClient;

const publisher = new EventBridgePublisher(acceptingClient, {
  busName: topology.busName,
  source: topology.source,
  maxEntries: topology.relay.putEventsMaxEntries,
  maxRequestBytes: topology.relay.maxRequestBytes,
  concurrency: topology.relay.publishConcurrency,
});

async function freshDatabase(admin: pg.Client, base: string, name: string): Promise<PgSqlClient> {
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  const db = new PgSqlClient({ connectionString: base.replace(/\/postgres$/, `/${name}`) });
  await migrate(db);
  return db;
}

async function timed(fn: () => Promise<number>): Promise<{ count: number; seconds: number }> {
  const start = process.hrtime.bigint();
  const count = await fn();
  return { count, seconds: Number(process.hrtime.bigint() - start) / 1e9 };
}

async function main() {
  const server = await startEmbeddedPostgres({ durable: true });
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  try {
    // Relay.
    const relayDb = await freshDatabase(admin, server.url, 'bench_relay');
    await seedPending(relayDb, events);
    await relayDb.query('VACUUM ANALYZE outbox');
    global.gc?.();
    const rssBefore = process.memoryUsage().rss;
    let rssPeak = rssBefore;
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    }, 20);
    log(`relay: draining ${events} events`);
    const relay = await timed(async () => {
      const report = await runRelay(
        { outbox: new OutboxStore(relayDb), publisher, owner: 'bench-relay', settings: topology.relay },
        { remainingMs: () => 15 * 60_000 },
      );
      return report.published;
    });
    clearInterval(sampler);
    rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    await relayDb.close();

    // Ceiling: the same statements, no publish.
    const ceilingDb = await freshDatabase(admin, server.url, 'bench_ceiling');
    await seedPending(ceilingDb, events);
    await ceilingDb.query('VACUUM ANALYZE outbox');
    log(`ceiling: claim + mark ${events} events`);
    const ceilingStore = new OutboxStore(ceilingDb);
    // Same parallelism as the relay (roundsInFlight loops), so the ratio isolates publish cost.
    const ceiling = await timed(async () => {
      let done = 0;
      const loop = async () => {
        for (;;) {
          const { claimed } = await ceilingStore.claim('bench-ceiling', {
            rows: topology.relay.claimBatchSize,
            leaseSeconds: 30,
            bytes: topology.relay.claimBytes,
            maxUnsettledClaims: topology.relay.maxUnsettledClaims,
          });
          if (claimed.length === 0) return;
          const marked = await ceilingStore.markDelivered(
            claimed.map((c) => ({ eventId: c.eventId, busEventId: 'x' })),
          );
          done += marked.length;
        }
      };
      await Promise.all(Array.from({ length: topology.relay.roundsInFlight }, loop));
      return done;
    });
    await ceilingDb.close();

    // Naive: one row at a time.
    const naiveDb = await freshDatabase(admin, server.url, 'bench_naive');
    await seedPending(naiveDb, naiveEvents);
    await naiveDb.query('VACUUM ANALYZE outbox');
    log(`naive: ${naiveEvents} events one at a time`);
    const naive = await timed(async () => {
      let done = 0;
      for (;;) {
        const { rows } = await naiveDb.query<{
          event_id: string;
          event_type: string;
          aggregate_id: string;
          aggregate_version: number;
          payload: unknown;
          created_at: Date;
        }>(
          `SELECT event_id, event_type, aggregate_id, aggregate_version, payload, created_at
             FROM outbox WHERE status = 'pending' ORDER BY created_at LIMIT 1`,
        );
        const row = rows[0];
        if (!row) return done;
        const [outcome] = await publisher.publish([
          {
            eventId: row.event_id,
            eventType: row.event_type,
            aggregateId: row.aggregate_id,
            aggregateVersion: row.aggregate_version,
            payload: row.payload,
            createdAt: row.created_at,
          },
        ]);
        await naiveDb.query(
          "UPDATE outbox SET status = 'delivered', delivered_at = now(), bus_event_id = :bus WHERE event_id = :id::uuid",
          { id: row.event_id, bus: outcome?.ok ? outcome.busEventId : null },
        );
        done++;
      }
    });
    await naiveDb.close();

    const result = {
      events,
      relayEventsPerSec: Math.round(relay.count / relay.seconds),
      ceilingEventsPerSec: Math.round(ceiling.count / ceiling.seconds),
      naiveEventsPerSec: Math.round(naive.count / naive.seconds),
      rssGrowthMb: Math.round(((rssPeak - rssBefore) / 1024 / 1024) * 10) / 10,
    };
    if (relay.count !== events || ceiling.count !== events || naive.count !== naiveEvents) {
      throw new Error(`drained ${relay.count}/${ceiling.count}/${naive.count}, expected ${events}`);
    }
    if (json) {
      console.log(JSON.stringify(result));
    } else {
      console.log(result);
      console.log(
        `relay/ceiling ${(result.relayEventsPerSec / result.ceilingEventsPerSec).toFixed(2)}, ` +
          `relay/naive ${(result.relayEventsPerSec / result.naiveEventsPerSec).toFixed(1)}x ` +
          `(naive measured on ${naiveEvents} events)`,
      );
    }
  } finally {
    await admin.end();
    await server.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
