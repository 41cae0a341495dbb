/**
 * `npm run bench:relay [-- --json] [-- --events N] [-- --rounds R]`: drains N (default 20,000)
 * pending outbox rows from an embedded PostgreSQL 17 (fsync on) in several ways, each on its own
 * copy of the same seeded database, and compares throughput:
 * - relay: the real relay code (`runRelay` -> OutboxStore -> EventBridgePublisher) at the
 *   topology's defaults, over an EventBridge client that accepts every entry at once, so only
 *   our code and the database count;
 * - ceiling: the same claim and mark statements with no publish at all, over a grid of batch
 *   sizes and connections (the database's limit, wherever it lies);
 * - naive: select one row, publish it, update one row;
 * - peer: `pg-transactional-outbox`'s polling listener on the same rows (bench/support/peer.ts);
 * - aws: the relay again under the latency model's Data API and PutEvents calls
 *   (bench/support/latency-model.ts).
 * Database round trips and PutEvents calls are counted for the relay and the peer. The
 * implementations take turns within each of R rounds (default 3): the relay and the ceiling
 * cells back to back in a shuffled order, then the slow ones; the median of the rounds is
 * reported, so the machine's noise falls on all of them alike. A benchmark, not a test:
 * nothing here asserts a timing.
 */
import pg from 'pg';
import { topology } from '../functions/topology';
import { seededRandom } from '../infra/local/faults';
import { migrate } from '../shared/db/migrate';
import { PgSqlClient } from '../shared/db/pg-client';
import { timeoutsOf } from '../shared/db/pg-settings';
import type { SqlClient } from '../shared/db/sql-client';
import { EventBridgePublisher } from '../shared/outbox/eventbridge-publisher';
import { OutboxStore } from '../shared/outbox/outbox-store';
import { type RelayRunSettings, runRelay } from '../shared/outbox/relay';
import type { RelaySettings } from '../shared/topology';
import { startEmbeddedPostgres } from '../test/support/embedded-pg';
import { seedPending } from '../test/support/outbox-fixtures';
import { isMain, numberArg, progress } from './support/cli';
import { acceptingEventBridge, CountingSqlClient, Tally } from './support/counting';
import { DataApiSqlClient, HopDelays } from './support/latency-seams';
import { drainWithPeer, type PeerConfig, preparePeerRows, tunedPeerConfig } from './support/peer';
import { median, round, timed } from './support/stats';

/** The relay settings a run uses: the topology's, or others to compare (tuning). */
export type RelayBenchSettings = RelayRunSettings & Pick<RelaySettings, 'publishConcurrency'>;

export interface RelayBenchOptions {
  /** Pending rows each implementation drains. */
  readonly events: number;
  readonly rounds: number;
  /** The ceiling grid. */
  readonly batches: readonly number[];
  readonly connections: readonly number[];
  readonly settings: RelayBenchSettings;
  readonly peer: PeerConfig;
  /** Leave out the slow ones (naive, peer) or the AWS profile, e.g. while tuning. */
  readonly skip?: readonly ('naive' | 'peer' | 'aws')[];
  /** Other relay settings to drain with in the same rounds (tuning); reported in `byRound` only. */
  readonly compare?: readonly RelayBenchSettings[];
}

/** One ceiling cell: claim batch size x connections (= loops in parallel). */
export interface CeilingCell {
  readonly batch: number;
  readonly connections: number;
}

export const cellName = (c: CeilingCell) => `${c.batch}x${c.connections}`;

/** `batch/rounds in flight/publish concurrency`, as `--compare` takes them. */
const settingsName = (s: RelayBenchSettings) =>
  `${s.claimBatchSize}/${s.roundsInFlight}/${s.publishConcurrency}`;

export interface RelayBenchResult {
  readonly events: number;
  readonly rounds: number;
  readonly relayEventsPerSec: number;
  readonly relayRoundTripsPer1000: number;
  readonly relayPutEventsPer1000: number;
  /** The largest RSS growth over one relay drain, of all rounds. */
  readonly rssGrowthMb: number;
  /** Median events/s of every ceiling cell, by `cellName`. */
  readonly ceiling: Readonly<Record<string, number>>;
  readonly bestCeilingEventsPerSec: number;
  readonly bestCeilingCell: CeilingCell;
  readonly naiveEventsPerSec: number | null;
  readonly peerEventsPerSec: number | null;
  readonly peerRoundTripsPer1000: number | null;
  readonly peerPutEventsPer1000: number | null;
  readonly peerConfig: PeerConfig;
  readonly awsRelayEventsPerSec: number | null;
  readonly awsRelayRoundTripsPer1000: number | null;
  readonly settings: Pick<RelayBenchSettings, 'claimBatchSize' | 'roundsInFlight' | 'publishConcurrency'>;
  /** Every round's events/s, by implementation, for the record. */
  readonly byRound: Readonly<Record<string, number[]>>;
}

/** What one drain measured. */
interface Drain {
  readonly count: number;
  readonly seconds: number;
  readonly roundTrips?: number;
  readonly putEvents?: number;
  readonly rssGrowthMb?: number;
}

type Implementation = { readonly name: string; readonly run: (url: string) => Promise<Drain> };

function publisherOver(client: ReturnType<typeof acceptingEventBridge>['client'], concurrency: number) {
  return new EventBridgePublisher(client, {
    busName: topology.busName,
    source: topology.source,
    maxEntries: topology.relay.putEventsMaxEntries,
    maxRequestBytes: topology.relay.maxRequestBytes,
    concurrency,
  });
}

/** The real relay, one run from a fresh owner, over `db`; RSS sampled while it drains. */
async function drainWithRelay(db: SqlClient, settings: RelayBenchSettings, putEventsDelay?: () => number) {
  const counted = new CountingSqlClient(db);
  const eventBridge = acceptingEventBridge(new Tally(), putEventsDelay);
  const publisher = publisherOver(eventBridge.client, settings.publishConcurrency);
  global.gc?.();
  const rssBefore = process.memoryUsage().rss;
  let rssPeak = rssBefore;
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
  }, 20);
  try {
    const drained = await timed(async () => {
      const report = await runRelay(
        { outbox: new OutboxStore(counted), publisher, owner: 'bench-relay', settings },
        { remainingMs: () => 15 * 60_000 },
      );
      return report.published;
    });
    rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    return {
      ...drained,
      roundTrips: counted.roundTrips.count,
      putEvents: eventBridge.calls.count,
      rssGrowthMb: (rssPeak - rssBefore) / 1024 / 1024,
    };
  } finally {
    clearInterval(sampler);
  }
}

/** A bus event id as long as EventBridge's (a uuid): the ceiling writes the bytes the relay writes. */
const ceilingBusEventId = '00000000-0000-4000-8000-000000000000';

/** The claim and mark statements alone: `cell.connections` loops claiming `cell.batch` rows. */
async function drainCeiling(url: string, cell: CeilingCell, settings: RelayBenchSettings): Promise<Drain> {
  const db = new PgSqlClient({ connectionString: url, maxConnections: cell.connections });
  const store = new OutboxStore(db);
  try {
    return await timed(async () => {
      let done = 0;
      const loop = async () => {
        for (;;) {
          const { claimed } = await store.claim('bench-ceiling', {
            rows: cell.batch,
            leaseSeconds: settings.leaseSeconds,
            bytes: settings.claimBytes,
            maxUnsettledClaims: settings.maxUnsettledClaims,
          });
          if (claimed.length === 0) return;
          const marked = await store.markDelivered(
            claimed.map((c) => ({ eventId: c.eventId, busEventId: ceilingBusEventId })),
          );
          done += marked.length;
        }
      };
      await Promise.all(Array.from({ length: cell.connections }, loop));
      return done;
    });
  } finally {
    await db.close();
  }
}

/** Select one row, publish it, update one row: what an outbox relay does without batching. */
async function drainNaive(url: string): Promise<Drain> {
  const db = new PgSqlClient({ connectionString: url, maxConnections: 1 });
  const publisher = publisherOver(acceptingEventBridge().client, 1);
  try {
    return await timed(async () => {
      let done = 0;
      for (;;) {
        const { rows } = await db.query<{
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
        await db.query(
          "UPDATE outbox SET status = 'delivered', delivered_at = now(), bus_event_id = :bus WHERE event_id = :id::uuid",
          { id: row.event_id, bus: outcome?.ok ? outcome.busEventId : null },
        );
        done++;
      }
    });
  } finally {
    await db.close();
  }
}

function implementations(options: RelayBenchOptions): Implementation[] {
  const { settings } = options;
  const skip = new Set(options.skip ?? []);
  const relayAt = (name: string, relaySettings: RelayBenchSettings): Implementation => ({
    name,
    run: async (url) => {
      const db = new PgSqlClient({ connectionString: url });
      try {
        return await drainWithRelay(db, relaySettings);
      } finally {
        await db.close();
      }
    },
  });
  const list: Implementation[] = [
    relayAt('relay', settings),
    ...(options.compare ?? []).map((other) => relayAt(`relay ${settingsName(other)}`, other)),
  ];
  for (const batch of options.batches)
    for (const connections of options.connections) {
      const cell = { batch, connections };
      list.push({ name: `ceiling ${cellName(cell)}`, run: (url) => drainCeiling(url, cell, settings) });
    }
  if (!skip.has('naive')) list.push({ name: 'naive', run: drainNaive });
  if (!skip.has('peer'))
    list.push({
      name: 'peer',
      run: async (url) => {
        const eventBridge = acceptingEventBridge();
        const run = await drainWithPeer(
          url,
          options.events,
          publisherOver(eventBridge.client, 1),
          options.peer,
        );
        return { ...run, putEvents: eventBridge.calls.count };
      },
    });
  if (!skip.has('aws'))
    list.push({
      name: 'aws relay',
      run: async (url) => {
        const delays = new HopDelays();
        const pgClient = new PgSqlClient({ connectionString: url });
        try {
          return await drainWithRelay(new DataApiSqlClient(pgClient, delays), settings, () =>
            delays.draw('putEvents'),
          );
        } finally {
          await pgClient.close();
        }
      },
    });
  return list;
}

/** The drains of a few hundred milliseconds: the relay's and the ceiling's, compared with each other. */
const isFast = (impl: Implementation) => impl.name.startsWith('relay') || impl.name.startsWith('ceiling');

/**
 * The order of round `r`: the fast drains back to back, shuffled (a seeded shuffle, a new one
 * each round), then the slow ones (naive, peer, AWS profile), rotated. Back to back, the relay
 * and the ceiling cells meet the same load from whatever else runs on the machine; spread
 * across a round of a minute and more, a load that came and went fell on some of them only.
 */
function roundOrder(list: readonly Implementation[], r: number): Implementation[] {
  const fast = list.filter(isFast);
  const random = seededRandom(r + 1);
  for (let i = fast.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [fast[i], fast[j]] = [fast[j] as Implementation, fast[i] as Implementation];
  }
  const slow = list.filter((impl) => !isFast(impl));
  return [...fast, ...slow.map((_, i) => slow[(i + r) % slow.length] as Implementation)];
}

/** A database named `name` copied from the seeded template, and its URL. */
async function copyOfTemplate(admin: pg.Client, base: string, name: string): Promise<string> {
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  // FILE_COPY checkpoints before and after the copy: every drain starts with no dirty pages of the one before.
  await admin.query(`CREATE DATABASE ${name} TEMPLATE bench_template STRATEGY = FILE_COPY`);
  return base.replace(/\/postgres$/, `/${name}`);
}

/** The template every drain copies: migrated, `events` pending rows, the peer's table holding the same rows. */
async function seedTemplate(admin: pg.Client, base: string, events: number): Promise<void> {
  await admin.query('DROP DATABASE IF EXISTS bench_template WITH (FORCE)');
  await admin.query('CREATE DATABASE bench_template');
  const url = base.replace(/\/postgres$/, '/bench_template');
  // The schema owner's bounds: seeding and VACUUM of a large outbox take more than a function's.
  const db = new PgSqlClient({ connectionString: url, timeouts: timeoutsOf('owner') });
  try {
    await migrate(db);
    await seedPending(db, events);
    await db.query('VACUUM ANALYZE outbox');
  } finally {
    await db.close();
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await preparePeerRows(client);
  } finally {
    await client.end();
  }
}

const per1000 = (n: number, events: number) => round((n / events) * 1000, 2);

/** Runs every implementation `rounds` times, taking turns, and reports the medians. */
export async function measureRelayBench(options: RelayBenchOptions): Promise<RelayBenchResult> {
  const server = await startEmbeddedPostgres({ durable: true });
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  const runs = new Map<string, Drain[]>();
  try {
    progress(`relay: seeding ${options.events} pending rows`);
    await seedTemplate(admin, server.url, options.events);
    const list = implementations(options);
    // Unmeasured: the relay and the claim statements once, so that no round's first drain pays for a cold JIT and cache.
    for (const impl of list.filter((i) => i.name === 'relay' || i.name.startsWith('ceiling')).slice(0, 2)) {
      progress(`relay: warming up (${impl.name})`);
      await impl.run(await copyOfTemplate(admin, server.url, 'bench_drain'));
      await admin.query('DROP DATABASE IF EXISTS bench_drain WITH (FORCE)');
    }
    for (let r = 0; r < options.rounds; r++) {
      const order = roundOrder(list, r);
      for (const impl of order) {
        const url = await copyOfTemplate(admin, server.url, 'bench_drain');
        const drain = await impl.run(url);
        await admin.query('DROP DATABASE IF EXISTS bench_drain WITH (FORCE)');
        if (drain.count !== options.events)
          throw new Error(`${impl.name} drained ${drain.count} of ${options.events} events`);
        runs.set(impl.name, [...(runs.get(impl.name) ?? []), drain]);
        progress(
          `relay round ${r + 1}/${options.rounds}: ${impl.name} ${Math.round(drain.count / drain.seconds)} events/s` +
            (drain.roundTrips === undefined
              ? ''
              : `, ${per1000(drain.roundTrips, drain.count)} round trips/1000`),
        );
      }
    }
  } finally {
    await admin.end();
    await server.stop();
  }
  const rate = (name: string) => {
    const xs = runs.get(name);
    return xs ? Math.round(median(xs.map((d) => d.count / d.seconds))) : null;
  };
  const perThousand = (name: string, key: 'roundTrips' | 'putEvents') => {
    const xs = runs.get(name);
    return xs ? per1000(median(xs.map((d) => d[key] ?? Number.NaN)), options.events) : null;
  };
  const cells = options.batches.flatMap((batch) =>
    options.connections.map((connections) => ({ batch, connections })),
  );
  const ceiling = Object.fromEntries(cells.map((c) => [cellName(c), rate(`ceiling ${cellName(c)}`) ?? 0]));
  const best = cells.reduce((a, b) => ((ceiling[cellName(b)] ?? 0) > (ceiling[cellName(a)] ?? 0) ? b : a));
  return {
    events: options.events,
    rounds: options.rounds,
    relayEventsPerSec: rate('relay') ?? 0,
    relayRoundTripsPer1000: perThousand('relay', 'roundTrips') ?? 0,
    relayPutEventsPer1000: perThousand('relay', 'putEvents') ?? 0,
    rssGrowthMb: round(Math.max(...(runs.get('relay') ?? []).map((d) => d.rssGrowthMb ?? 0)), 1),
    ceiling,
    bestCeilingEventsPerSec: ceiling[cellName(best)] ?? 0,
    bestCeilingCell: best,
    naiveEventsPerSec: rate('naive'),
    peerEventsPerSec: rate('peer'),
    peerRoundTripsPer1000: perThousand('peer', 'roundTrips'),
    peerPutEventsPer1000: perThousand('peer', 'putEvents'),
    peerConfig: options.peer,
    awsRelayEventsPerSec: rate('aws relay'),
    awsRelayRoundTripsPer1000: perThousand('aws relay', 'roundTrips'),
    settings: {
      claimBatchSize: options.settings.claimBatchSize,
      roundsInFlight: options.settings.roundsInFlight,
      publishConcurrency: options.settings.publishConcurrency,
    },
    byRound: Object.fromEntries(
      [...runs].map(([name, xs]) => [name, xs.map((d) => Math.round(d.count / d.seconds))]),
    ),
  };
}

/** The relay's defaults, with overrides from the command line (`--batch`, `--loops`, `--publish`) to compare. */
export function relaySettingsFrom(args: readonly string[]): RelayBenchSettings {
  return {
    ...topology.relay,
    claimBatchSize: numberArg(args, '--batch', topology.relay.claimBatchSize),
    roundsInFlight: numberArg(args, '--loops', topology.relay.roundsInFlight),
    publishConcurrency: numberArg(args, '--publish', topology.relay.publishConcurrency),
  };
}

if (isMain(import.meta.url)) {
  const args = process.argv.slice(2);
  const skip = (['naive', 'peer', 'aws'] as const).filter((s) => args.includes(`--no-${s}`));
  measureRelayBench({
    events: numberArg(args, '--events', 20_000),
    rounds: numberArg(args, '--rounds', 3),
    batches: args.includes('--small-grid') ? [500, 1_000] : [100, 500, 1_000],
    connections: args.includes('--small-grid') ? [2, 4] : [1, 2, 4],
    settings: relaySettingsFrom(args),
    peer: {
      batchSize: numberArg(args, '--peer-batch', tunedPeerConfig.batchSize),
      pollingIntervalMs: numberArg(args, '--peer-poll-ms', tunedPeerConfig.pollingIntervalMs),
      handlerConnections: numberArg(args, '--peer-connections', tunedPeerConfig.handlerConnections),
    },
    skip,
    compare: (args.includes('--compare') ? String(args[args.indexOf('--compare') + 1]).split(',') : []).map(
      (spec) => {
        const [batch, loops, publish] = spec.split('/').map(Number);
        return relaySettingsFrom([
          '--batch',
          String(batch),
          '--loops',
          String(loops),
          '--publish',
          String(publish),
        ]);
      },
    ),
  })
    .then((result) => {
      if (args.includes('--json')) console.log(JSON.stringify(result));
      else console.log(result);
    })
    .catch((err) => {
      console.error(err);
      process.exitCode = 1;
    });
}
