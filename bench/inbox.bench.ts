/**
 * `npm run bench:inbox [-- --json] [-- --events N] [-- --concurrency C] [-- --rounds R]`:
 * sends N EventBridge events (default 5,000, 10% of them duplicates of earlier ones) through
 * the inbox (`processOnce` over `DynamoInboxStore`) and, on the same dynalite, through
 * `@aws-lambda-powertools/idempotency` (`makeIdempotent` with its DynamoDB persistence layer,
 * keyed on the CloudEvent id, payload validation on), with the same no-op work and C
 * deliveries in flight. Each implementation gets its own dynalite process (a real DynamoDB
 * does not share the client's thread either); the two take turns every 500 deliveries. DynamoDB
 * calls are counted by a middleware on the client and attributed to each delivery through
 * AsyncLocalStorage. Each round uses fresh engines and events; the throughput reported is the
 * median round (R, default 3). It is a benchmark, not a test: nothing asserts.
 *
 * With `--json`, stdout is exactly one line:
 * `{"events":..,"inboxEventsPerSec":..,"powertoolsEventsPerSec":..,"writesPerFirstDelivery":..,"callsPerDuplicate":..}`
 * (the call counts are the inbox's; Powertools' are on stderr).
 */

import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { CreateTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Context, EventBridgeEvent } from 'aws-lambda';
import { consumerNames, topology } from '../functions/topology';
import { ensureTables } from '../shared/consumers/ensure-tables';
import { DynamoInboxStore } from '../shared/inbox/dynamo-inbox-store';
import { payloadHash } from '../shared/inbox/payload-hash';
import { processOnce } from '../shared/inbox/process-once';
import { inboxSettingsFor } from '../shared/inbox/settings';
import { dynamoClient } from '../test/support/dynamo';
import { approvedRow, busEvent } from '../test/support/dynamo-consumer-fixtures';
import { startDynaliteProcess } from '../test/support/dynamo-engines';
import { isMain, numberArg, progress } from './support/cli';
import { median, round } from './support/stats';

const duplicateShare = 0.1;

/** How much one measurement sends. */
export interface InboxBenchOptions {
  /** Deliveries per round, 10% of them duplicates. */
  readonly events: number;
  /** Deliveries in flight at once. */
  readonly concurrency: number;
  readonly rounds: number;
}

/** The medians of the rounds, and the call counts behind them. */
export interface InboxBenchResult {
  readonly events: number;
  readonly inboxEventsPerSec: number;
  readonly powertoolsEventsPerSec: number;
  readonly writesPerFirstDelivery: number;
  readonly callsPerDuplicate: number;
  readonly concurrency: number;
  readonly rounds: number;
  readonly inbox: ImplementationDetail;
  readonly powertools: ImplementationDetail;
}

interface ImplementationDetail {
  readonly callsPerFirstDelivery: number;
  readonly writesPerFirstDelivery: number;
  readonly callsPerDuplicate: number;
  readonly writesPerDuplicate: number;
  readonly eventsPerSecByRound: number[];
  readonly errors: number;
}

type BusEvent = EventBridgeEvent<string, Record<string, unknown>>;
interface Delivery {
  readonly event: BusEvent;
  readonly duplicate: boolean;
}
interface CallCount {
  calls: number;
  writes: number;
}

/**
 * N deliveries: unique events, and after every nine a duplicate of one delivered at least
 * 8 x concurrency positions earlier, so it arrives after the original finished (a duplicate
 * that overlaps its original is the concurrency test's business, not this benchmark's).
 */
function makeDeliveries(total: number, concurrency: number): Delivery[] {
  const duplicates = Math.round(total * duplicateShare);
  const uniques = total - duplicates;
  const out: Delivery[] = [];
  const originals: BusEvent[] = [];
  const gap = 8 * concurrency;
  let pending = duplicates;
  for (let i = 0; i < uniques; i++) {
    const event = busEvent(approvedRow());
    out.push({ event, duplicate: false });
    originals.push(event);
    if ((i + 1) % 9 === 0 && pending > 0 && originals.length > gap) {
      const original = originals[Math.floor(Math.random() * (originals.length - gap))] as BusEvent;
      // A re-publish: a new EventBridge id around the same CloudEvent.
      out.push({ event: { ...original, id: randomUUID() }, duplicate: true });
      pending--;
    }
  }
  for (; pending > 0; pending--) {
    const original = originals[Math.floor(Math.random() * (originals.length - gap))] as BusEvent;
    out.push({ event: { ...original, id: randomUUID() }, duplicate: true });
  }
  return out;
}

const scope = new AsyncLocalStorage<CallCount>();

/** Counts every DynamoDB API call (before retries) against the delivery that made it. */
function countCalls(client: DynamoDBClient): void {
  client.middlewareStack.add(
    (next) => async (args) => {
      const count = scope.getStore();
      if (count) {
        const target = String(
          (args.request as { headers?: Record<string, string> }).headers?.['x-amz-target'] ?? '',
        );
        count.calls++;
        if (/\.(PutItem|UpdateItem|DeleteItem)$/.test(target)) count.writes++;
      }
      return next(args);
    },
    { step: 'build', name: 'benchCallCounter' },
  );
}

interface RunResult {
  readonly seconds: number;
  readonly firstWrites: number;
  readonly firstCalls: number;
  readonly firsts: number;
  readonly duplicateCalls: number;
  readonly duplicateWrites: number;
  readonly duplicates: number;
  readonly errors: number;
}

async function run(
  deliveries: Delivery[],
  deliver: (event: BusEvent) => Promise<unknown>,
  concurrency: number,
): Promise<RunResult> {
  const counts = deliveries.map(() => ({ calls: 0, writes: 0 }));
  let next = 0;
  let errors = 0;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < deliveries.length; i = next++) {
        const d = deliveries[i] as Delivery;
        try {
          await scope.run(counts[i] as CallCount, () => deliver(d.event));
        } catch (err) {
          errors++;
          if (errors <= 3) console.error(`delivery failed: ${String(err)}`);
        }
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const sum = (dup: boolean, key: keyof CallCount) =>
    deliveries.reduce((acc, d, i) => acc + (d.duplicate === dup ? (counts[i] as CallCount)[key] : 0), 0);
  return {
    seconds,
    firstWrites: sum(false, 'writes'),
    firstCalls: sum(false, 'calls'),
    firsts: deliveries.filter((d) => !d.duplicate).length,
    duplicateCalls: sum(true, 'calls'),
    duplicateWrites: sum(true, 'writes'),
    duplicates: deliveries.filter((d) => d.duplicate).length,
    errors,
  };
}

function combine(parts: RunResult[]): RunResult {
  const sum = (k: keyof RunResult) => parts.reduce((a, p) => a + (p[k] as number), 0);
  return {
    seconds: sum('seconds'),
    firstWrites: sum('firstWrites'),
    firstCalls: sum('firstCalls'),
    firsts: sum('firsts'),
    duplicateCalls: sum('duplicateCalls'),
    duplicateWrites: sum('duplicateWrites'),
    duplicates: sum('duplicates'),
    errors: sum('errors'),
  };
}

const round2 = (x: number) => round(x, 2);

type Implementation = 'inbox' | 'powertools';
const implementations: readonly Implementation[] = ['inbox', 'powertools'];

/** How many deliveries run back to back before the other implementation takes its turn. */
const chunkSize = 500;

/**
 * One round: each implementation on a fresh dynalite of its own (in its own process), warmed
 * up (its JIT is cold), then the same deliveries in chunks of 500, the two implementations
 * taking turns chunk by chunk. Taking turns spreads whatever else the machine is doing evenly
 * over both, instead of over whichever happened to run during a busy minute.
 */
async function measureRound(
  round: number,
  { events, concurrency }: InboxBenchOptions,
): Promise<Record<Implementation, RunResult>> {
  const deliveries = makeDeliveries(events, concurrency);
  const engines = await Promise.all(implementations.map(() => startDynaliteProcess()));
  const clients = engines.map((e) => dynamoClient(e.endpoint));
  for (const c of clients) countCalls(c);
  try {
    const [inboxClient, powertoolsClient] = clients as [DynamoDBClient, DynamoDBClient];
    const deliver: Record<Implementation, (event: BusEvent) => Promise<unknown>> = {
      inbox: await inboxDeliver(inboxClient),
      powertools: await powertoolsDeliver(powertoolsClient),
    };
    const warmUp = () => makeDeliveries(Math.min(events, 500), concurrency);
    await run(warmUp(), await inboxDeliver(inboxClient, 'warm'), concurrency);
    await run(warmUp(), await powertoolsDeliver(powertoolsClient, 'warm'), concurrency);
    const parts: Record<Implementation, RunResult[]> = { inbox: [], powertools: [] };
    for (let at = 0, turn = round; at < deliveries.length; at += chunkSize, turn++) {
      const chunk = deliveries.slice(at, at + chunkSize);
      const order = turn % 2 === 1 ? implementations : [...implementations].reverse();
      for (const which of order) parts[which].push(await run(chunk, deliver[which], concurrency));
    }
    return { inbox: combine(parts.inbox), powertools: combine(parts.powertools) };
  } finally {
    for (const c of clients) c.destroy();
    await Promise.all(engines.map((e) => e.stop()));
  }
}

async function inboxDeliver(client: DynamoDBClient, prefix = 'bench') {
  const table = `${prefix}-inbox`;
  const { openIndexShards } = topology.inbox;
  await ensureTables(client, { inboxTable: table }, { openIndexShards });
  const inbox = new DynamoInboxStore(client, { tableName: table, openIndexShards });
  const settings = inboxSettingsFor(topology, consumerNames[0]);
  return async (event: BusEvent) => {
    const detail = event.detail as { id: string; subject: string; type: string };
    return processOnce(
      {
        consumer: 'bench',
        eventId: detail.id,
        subject: detail.subject,
        eventType: detail.type,
        payloadHash: payloadHash(event.detail),
        event,
      },
      async () => undefined,
      { inbox, settings },
    );
  };
}

const context = {
  awsRequestId: 'bench',
  functionName: 'bench',
  getRemainingTimeInMillis: () => 60_000,
} as unknown as Context;

async function powertoolsDeliver(client: DynamoDBClient, prefix = 'bench') {
  const table = `${prefix}-powertools`;
  await client.send(
    new CreateTableCommand({
      TableName: table,
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
    }),
  );
  const idempotent = makeIdempotent(async (_event: BusEvent, _context: Context) => undefined, {
    persistenceStore: new DynamoDBPersistenceLayer({ tableName: table, awsSdkV3Client: client }),
    config: new IdempotencyConfig({
      eventKeyJmesPath: 'detail.id',
      payloadValidationJmesPath: 'detail',
      throwOnNoIdempotencyKey: true,
    }),
  });
  return (event: BusEvent) => idempotent(event, context);
}

/** Runs `rounds` rounds of inbox against Powertools and reports the median round of each. */
export async function measureInbox(options: InboxBenchOptions): Promise<InboxBenchResult> {
  const { events, rounds } = options;
  const runs: Record<Implementation, RunResult[]> = { inbox: [], powertools: [] };
  for (let r = 1; r <= rounds; r++) {
    const result = await measureRound(r, options);
    for (const which of implementations) {
      runs[which].push(result[which]);
      progress(
        `inbox round ${r}/${rounds} ${which}: ${round2(events / result[which].seconds)} events/s, ${result[which].errors} errors`,
      );
    }
  }
  const rate = (xs: RunResult[]) => round2(median(xs.map((x) => events / x.seconds)));
  const per = (xs: RunResult[], num: keyof RunResult, den: keyof RunResult) =>
    round2(xs.reduce((a, x) => a + (x[num] as number), 0) / xs.reduce((a, x) => a + (x[den] as number), 0));
  const detail = (xs: RunResult[]): ImplementationDetail => ({
    callsPerFirstDelivery: per(xs, 'firstCalls', 'firsts'),
    writesPerFirstDelivery: per(xs, 'firstWrites', 'firsts'),
    callsPerDuplicate: per(xs, 'duplicateCalls', 'duplicates'),
    writesPerDuplicate: per(xs, 'duplicateWrites', 'duplicates'),
    eventsPerSecByRound: xs.map((x) => round2(events / x.seconds)),
    errors: xs.reduce((a, x) => a + x.errors, 0),
  });
  return {
    events,
    inboxEventsPerSec: rate(runs.inbox),
    powertoolsEventsPerSec: rate(runs.powertools),
    writesPerFirstDelivery: per(runs.inbox, 'firstWrites', 'firsts'),
    callsPerDuplicate: per(runs.inbox, 'duplicateCalls', 'duplicates'),
    concurrency: options.concurrency,
    rounds,
    inbox: detail(runs.inbox),
    powertools: detail(runs.powertools),
  };
}

if (isMain(import.meta.url)) {
  const args = process.argv.slice(2);
  measureInbox({
    events: numberArg(args, '--events', 5_000),
    concurrency: numberArg(args, '--concurrency', 8),
    rounds: numberArg(args, '--rounds', 3),
  })
    .then((result) => {
      if (args.includes('--json')) {
        const { inbox, powertools, concurrency: _, rounds: __, ...line } = result;
        console.error(`inbox: ${JSON.stringify(inbox)}`);
        console.error(`powertools: ${JSON.stringify(powertools)}`);
        console.log(JSON.stringify(line));
      } else {
        console.log(result);
      }
    })
    .catch((err) => {
      console.error(err);
      process.exitCode = 1;
    });
}
