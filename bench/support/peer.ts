/**
 * The peer in the relay benchmark: npm `pg-transactional-outbox`'s polling listener draining
 * the same rows from its own outbox table (the schema its `DatabaseSetup` creates) on the same
 * embedded PostgreSQL, its handler publishing through the same `EventBridgePublisher` as the
 * relay. Configured from its README: the outbox example turns the max-attempts and
 * poisonous-message protections off ("Might be disabled when using it for the outbox
 * scenario"), every row is `concurrency: 'parallel'` (the polling function's second pass takes
 * any unlocked parallel row, instead of only the oldest of each segment), and the batch size,
 * polling interval and handler pool are raised from their defaults (5 rows, 500 ms, 10
 * connections), which drain far slower.
 */
import type { ClientConfig, PoolConfig } from 'pg';
import pg from 'pg';
import {
  DatabaseSetup,
  type GeneralMessageHandler,
  getDisabledLogger,
  initializePollingMessageListener,
  type PollingListenerConfig,
  type StoredTransactionalMessage,
} from 'pg-transactional-outbox';
import type { EventPublisher } from '../../shared/outbox/publisher';
import { progress } from './cli';
import { countingPgClient, Tally } from './counting';

/** The peer's settings, printed with its figure. */
export interface PeerConfig {
  /** `nextMessagesBatchSize`: rows the polling function locks per call (default 5). */
  readonly batchSize: number;
  /** `nextMessagesPollingIntervalInMs` (default 500). */
  readonly pollingIntervalMs: number;
  /** The handler pool's `max`: each message is handled in its own transaction on it (pg's default 10). */
  readonly handlerConnections: number;
}

/** The configuration the benchmark reports the peer at: the fastest of those its README allows that we tried. */
export const tunedPeerConfig: PeerConfig = { batchSize: 100, pollingIntervalMs: 10, handlerConnections: 20 };

const schema = 'peer';
const table = 'outbox';
const functionName = 'next_outbox_messages';

/**
 * Creates the peer's table, polling function and indexes (its own `DatabaseSetup` SQL) and
 * copies every row of our outbox into it: same ids, types, aggregates, payloads and ages.
 */
export async function preparePeerRows(client: pg.Client): Promise<void> {
  const setup = {
    outboxOrInbox: 'outbox' as const,
    database: 'bench',
    schema,
    table,
    listenerRole: 'postgres',
    nextMessagesName: functionName,
  };
  await client.query(DatabaseSetup.dropAndCreateTable(setup));
  await client.query(DatabaseSetup.createPollingFunction(setup));
  await client.query(DatabaseSetup.setupPollingIndexes(setup));
  await client.query(
    `INSERT INTO ${schema}.${table} (id, aggregate_type, aggregate_id, message_type, concurrency, payload, metadata, created_at)
     SELECT event_id, 'task', aggregate_id::text, event_type, 'parallel', payload,
            jsonb_build_object('aggregateVersion', aggregate_version), created_at
       FROM public.outbox WHERE status = 'pending'`,
  );
  await client.query(`VACUUM ANALYZE ${schema}.${table}`);
}

/** What one drain by the peer measured. */
export interface PeerRun {
  readonly count: number;
  readonly seconds: number;
  readonly roundTrips: number;
}

/**
 * Starts the peer's polling listener on `url`, waits until every row is processed, and stops
 * it. Every query of both of its pools is counted (a counting `Client` class in the pool
 * config); the completion check uses a connection of its own, not counted.
 */
export async function drainWithPeer(
  url: string,
  expected: number,
  publisher: EventPublisher,
  config: PeerConfig,
): Promise<PeerRun> {
  const roundTrips = new Tally();
  let retired = false;
  const Client = countingPgClient(roundTrips, () => retired);
  // The library types these as ClientConfig but hands them to `new Pool(...)`, which takes `Client` and `max`.
  const listenerPool: PoolConfig = { connectionString: url, Client };
  const handlerPool: PoolConfig = { connectionString: url, Client, max: config.handlerConnections };
  const listenerConfig: PollingListenerConfig = {
    outboxOrInbox: 'outbox',
    dbListenerConfig: listenerPool as ClientConfig,
    dbHandlerConfig: handlerPool as ClientConfig,
    settings: {
      dbSchema: schema,
      dbTable: table,
      enableMaxAttemptsProtection: false,
      enablePoisonousMessageProtection: false,
      nextMessagesFunctionSchema: schema,
      nextMessagesFunctionName: functionName,
      nextMessagesBatchSize: config.batchSize,
      nextMessagesPollingIntervalInMs: config.pollingIntervalMs,
    },
  };
  let handled = 0;
  const handler: GeneralMessageHandler = {
    handle: async (message: StoredTransactionalMessage) => {
      const [outcome] = await publisher.publish([
        {
          eventId: message.id,
          eventType: message.messageType,
          aggregateId: message.aggregateId,
          aggregateVersion: Number(message.metadata?.aggregateVersion ?? 1),
          payload: message.payload,
          createdAt: new Date(message.createdAt),
        },
      ]);
      // A throw makes the library roll back and retry the message, as its handlers are meant to.
      if (!outcome?.ok) throw new Error(`PutEvents refused ${message.id}`);
      handled++;
    },
  };
  const watcher = new pg.Client({ connectionString: url });
  await watcher.connect();
  const start = process.hrtime.bigint();
  const [shutdown] = initializePollingMessageListener(listenerConfig, handler, getDisabledLogger());
  let lastProgress = { handled, at: Date.now() };
  try {
    for (;;) {
      await new Promise((r) => setTimeout(r, handled >= expected ? 5 : 50));
      if (handled !== lastProgress.handled) lastProgress = { handled, at: Date.now() };
      else if (Date.now() - lastProgress.at > 60_000)
        throw new Error(`the peer handled nothing for a minute (${handled} of ${expected})`);
      if (handled < expected) continue;
      const { rows } = await watcher.query<{ left: number }>(
        `SELECT count(*)::int AS left FROM ${schema}.${table} WHERE processed_at IS NULL`,
      );
      if ((rows[0]?.left ?? 1) === 0) break;
    }
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    return { count: expected, seconds, roundTrips: roundTrips.count };
  } finally {
    // From here on the drain is over: a pool connection the library's shutdown leaves behind may
    // be cut (its database is dropped next) without that being the run's error.
    retired = true;
    await shutdown();
    await closedConnections(watcher);
    await watcher.end();
  }
}

/**
 * Waits (up to 5 s) until no session but the watcher's is left on its database: the peer's
 * shutdown can resolve while a pool still holds a connection, and a later drain must not share
 * the machine with it.
 */
async function closedConnections(watcher: pg.Client): Promise<void> {
  for (let waited = 0; waited < 5_000; waited += 50) {
    const { rows } = await watcher.query<{ others: number }>(
      `SELECT count(*)::int AS others FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid()`,
    );
    if ((rows[0]?.others ?? 0) === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  progress('peer: connections still open 5 s after its shutdown; dropping its database cuts them');
}
