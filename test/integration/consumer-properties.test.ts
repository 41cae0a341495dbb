import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Logger } from '@aws-lambda-powertools/logger';
import type { Context, EventBridgeEvent } from 'aws-lambda';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { consumerNames, topology } from '../../functions/topology';
import { localPort } from '../../infra/local/consumer-resources/local-ports';
import { createConsumer } from '../../shared/consumers/consumer';
import { consumerDeps } from '../../shared/consumers/consumer-deps';
import { consumerServiceName } from '../../shared/consumers/contract';
import type { EffectFactory } from '../../shared/consumers/define-consumer';
import type { ConsumerEffect } from '../../shared/consumers/effect';
import type { ResourceSpecs } from '../../shared/consumers/resources';
import { PgSqlClient } from '../../shared/db/pg-client';
import type { FunctionRole } from '../../shared/db/roles';
import { uuidPattern } from '../../shared/ids';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { maxErrorBytes } from '../../shared/inbox/dynamo-inbox-table';
import { payloadHash } from '../../shared/inbox/payload-hash';
import { poisonKey } from '../../shared/inbox/process-once';
import { inboxSettingsFor } from '../../shared/inbox/settings';
import { type ConsumerName, eventTypes } from '../../shared/topology';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { describeEachEngine } from '../support/dynamo';
import { approvedRow, busEvent, withdrawnRow } from '../support/dynamo-consumer-fixtures';
import { anyJson, nastyString } from '../support/hostile-input';
import { lambdaContext } from '../support/lambda-context';

type AnyEvent = EventBridgeEvent<string, unknown>;
type Json = Record<string, unknown>;

/** Whether `consumer` subscribes to withdrawals (the rules route them to it). */
const takesWithdrawals = (consumer: ConsumerName) =>
  topology.registry.some((c) => c.name === consumer && c.subscribes.includes(eventTypes.withdrawn));

/** A well-formed event the consumer would process, to spoil. */
const validEvent = (consumer: ConsumerName): fc.Arbitrary<Json> =>
  fc
    .record({
      taskId: fc.uuid({ version: 4 }),
      eventId: fc.uuid({ version: 4 }),
      version: fc.integer({ min: 1, max: 1_000 }),
      withdrawn: takesWithdrawals(consumer) ? fc.boolean() : fc.constant(false),
    })
    .map(
      ({ withdrawn, ...ids }) =>
        busEvent(withdrawn ? withdrawnRow(ids) : approvedRow(ids)) as unknown as Json,
    );

const get = (event: Json, path: string[]): unknown =>
  path.reduce<unknown>((v, k) => (v && typeof v === 'object' ? (v as Json)[k] : undefined), event);

/** Sets `path` in a copy of `event` (removes it when `value` is `remove`). */
function withValue(event: Json, path: string[], value: unknown): Json {
  const copy = structuredClone(event);
  const parent = get(copy, path.slice(0, -1)) as Json;
  const leaf = path.at(-1) as string;
  if (value === remove) delete parent[leaf];
  else parent[leaf] = value;
  return copy;
}
const remove = Symbol('remove');

/** Fields every delivery must carry, by where they are and what they must be. */
const required: Record<string, 'string' | 'uuid' | 'number' | 'object' | 'array'> = {
  version: 'string',
  id: 'string',
  'detail-type': 'string',
  source: 'string',
  account: 'string',
  time: 'string',
  region: 'string',
  resources: 'array',
  detail: 'object',
  'detail.specversion': 'string',
  'detail.id': 'uuid',
  'detail.source': 'string',
  'detail.type': 'string',
  'detail.subject': 'uuid',
  'detail.time': 'string',
  'detail.datacontenttype': 'string',
  'detail.data': 'object',
  'detail.data.taskId': 'uuid',
  'detail.data.version': 'number',
  'detail.data.title': 'string',
};
/** Required fields whose value is one fixed string: anything else is wrong. */
const literals: Record<string, string> = {
  'detail.specversion': '1.0',
  'detail.source': topology.source,
  'detail.datacontenttype': 'application/json',
  source: topology.source,
};

const ofWrongType = (kind: (typeof required)[string]) =>
  anyJson.filter((v) => {
    if (kind === 'string' || kind === 'uuid') return typeof v !== 'string';
    if (kind === 'number') return typeof v !== 'number';
    if (kind === 'array') return !Array.isArray(v);
    return typeof v !== 'object' || v === null || Array.isArray(v);
  });

/** A field missing, of the wrong JSON type, a bad uuid or a wrong literal. */
const malformed = (consumer: ConsumerName) =>
  fc.oneof(
    fc
      .tuple(validEvent(consumer), fc.constantFrom(...Object.keys(required)))
      .map(([e, path]) => withValue(e, path.split('.'), remove)),
    fc
      .tuple(validEvent(consumer), fc.constantFrom(...Object.keys(required)))
      .chain(([e, path]) =>
        ofWrongType(required[path] as (typeof required)[string]).map((v) => withValue(e, path.split('.'), v)),
      ),
    fc
      .tuple(
        validEvent(consumer),
        fc.constantFrom('detail.id', 'detail.subject', 'detail.data.taskId'),
        nastyString.filter((s) => !uuidPattern.test(s)),
      )
      .map(([e, path, v]) => withValue(e, path.split('.'), v)),
    fc
      .tuple(validEvent(consumer), fc.constantFrom(...Object.keys(literals)), nastyString)
      .filter(([, path, v]) => v !== literals[path])
      .map(([e, path, v]) => withValue(e, path.split('.'), v)),
    fc
      .tuple(validEvent(consumer), fc.oneof(fc.integer({ max: 0 }), fc.double({ noInteger: true })))
      .map(([e, v]) => withValue(e, ['detail', 'data', 'version'], v)),
  );

/** Values past every limit: a title over 500 characters, ids and sources up to 120 KB. */
const oversized = (consumer: ConsumerName) =>
  fc.oneof(
    fc
      .tuple(validEvent(consumer), fc.integer({ min: 501, max: 20_000 }), fc.constantFrom('x', 'é', '😀'))
      .map(([e, n, unit]) => withValue(e, ['detail', 'data', 'title'], unit.repeat(n))),
    fc
      .tuple(
        validEvent(consumer),
        // Not the EventBridge `id`: the consumer only logs it, so a huge one is no reason to refuse the event.
        fc.constantFrom('detail.id', 'detail.subject', 'source', 'detail-type', 'detail.type'),
        fc.integer({ min: 1_000, max: 120_000 }),
      )
      .map(([e, path, n]) => withValue(e, path.split('.'), 'x'.repeat(n))),
  );

/** Parts that each look right and disagree: ids, types, the route. */
const mismatched = (consumer: ConsumerName) =>
  fc.oneof(
    fc
      .tuple(validEvent(consumer), fc.uuid({ version: 4 }))
      .filter(([e, other]) => other !== get(e, ['detail', 'data', 'taskId']))
      .map(([e, other]) => withValue(e, ['detail', 'subject'], other)),
    fc
      .tuple(validEvent(consumer), fc.oneof(fc.uuid({ version: 4 }), nastyString, anyJson))
      .filter(([e, other]) => other !== get(e, ['detail', 'id']) && other !== undefined)
      .map(([e, other]) => withValue(e, ['detail', 'data', 'eventId'], other)),
    fc
      .tuple(validEvent(consumer), fc.oneof(fc.constantFrom(...Object.values(eventTypes)), nastyString))
      .filter(([e, other]) => other !== get(e, ['detail', 'type']))
      .map(([e, other]) => withValue(e, ['detail-type'], other)),
    ...(takesWithdrawals(consumer)
      ? []
      : // No rule routes a withdrawal to this consumer.
        [
          fc
            .record({ taskId: fc.uuid({ version: 4 }), eventId: fc.uuid({ version: 4 }) })
            .map((ids) => busEvent(withdrawnRow(ids)) as unknown as Json),
        ]),
  );

/** The poison record's key, as the consumer derives it from the event (see `readDelivery`). */
function poisonRecordKey(consumer: ConsumerName, eventId: string, event: unknown) {
  const raw = typeof event === 'object' && event !== null ? (event as Json) : {};
  const detail = typeof raw.detail === 'object' && raw.detail !== null ? raw.detail : undefined;
  return { consumer, eventId: poisonKey(eventId, payloadHash(detail ?? event ?? null)) };
}

describeEachEngine(
  'consumer handlers: malformed, oversized and mismatched events take the poison path',
  (fixture) => {
    let db: TestDatabase;
    const roles = new Map<FunctionRole, PgSqlClient>();
    let dir: string;
    let inbox: DynamoInboxOps;
    const effectCalls = Object.fromEntries(consumerNames.map((c) => [c, 0])) as Record<ConsumerName, number>;
    const handlers = {} as Record<ConsumerName, (event: AnyEvent, context: Context) => Promise<unknown>>;

    beforeAll(async () => {
      db = await createTestDatabase();
      dir = mkdtempSync(join(tmpdir(), 'consumer-properties-'));
      const { client, inboxTable } = fixture();
      inbox = new DynamoInboxOps(client, {
        tableName: inboxTable,
        openIndexShards: topology.inbox.openIndexShards,
      });
      const dbAs = (role: FunctionRole) => {
        const pg =
          roles.get(role) ?? new PgSqlClient({ connectionString: db.urlAs(role), maxConnections: 2 });
        roles.set(role, pg);
        return pg;
      };
      // Each consumer's effect from its folder, over the local adapters (the same effect code as
      // on AWS), its tables the fixture's.
      for (const consumer of topology.registry) {
        const name = consumer.name as ConsumerName;
        const { effect } = (await import(new URL('effect.ts', consumer.folder).href)) as {
          effect: EffectFactory<ResourceSpecs>;
        };
        const ports = Object.fromEntries(
          Object.entries(consumer.resources).map(([key, spec]) => [
            key,
            spec.kind === 'table'
              ? { client, tableName: fixture().table(key) }
              : localPort(key, spec, { client, effectsDir: dir, dbAs }).port,
          ]),
        );
        const built = effect(ports);
        const counted: ConsumerEffect = (event, ctx) => {
          effectCalls[name] = (effectCalls[name] ?? 0) + 1;
          return built(event, ctx);
        };
        // The per-event core every realization runs (on AWS inside its queue's batch handler).
        handlers[name] = createConsumer({
          ...consumerDeps(
            name,
            { inboxTable },
            client,
            { openIndexShards: topology.inbox.openIndexShards },
            inboxSettingsFor(topology, name),
            topology,
          ),
          logger: new Logger({ serviceName: consumerServiceName(name), logLevel: 'SILENT' }),
          effect: counted,
        });
      }
      // The handlers flush their metrics (EMF) to stdout after every invocation.
      vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    });
    afterAll(async () => {
      vi.restoreAllMocks();
      for (const pg of roles.values()) await pg.close();
      await db?.drop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    /** Delivers `event` and checks the poison path: acknowledged, recorded DEAD, no effect run. */
    async function expectPoison(consumer: ConsumerName, event: unknown): Promise<void> {
      const before = effectCalls[consumer];
      const handler = handlers[consumer];
      if (!handler) throw new Error(`no handler for ${consumer}`);
      const result = (await handler(event as AnyEvent, lambdaContext(consumer, 'property-run'))) as {
        status: string;
        eventId: string;
        reason?: string;
      };
      // A duplicate is fast-check repeating a poison it already sent: acknowledged as well.
      expect(['poison', 'duplicate']).toContain(result.status);
      expect(effectCalls[consumer]).toBe(before);
      const record = await inbox.get(poisonRecordKey(consumer, result.eventId, event));
      expect(record).toMatchObject({ status: 'DEAD', poison: true });
      expect(Buffer.byteLength(record?.lastError ?? '')).toBeLessThanOrEqual(maxErrorBytes);
    }

    for (const consumer of consumerNames) {
      it(`${consumer}: any JSON at all is poison, never a crash`, async () => {
        await fc.assert(
          fc.asyncProperty(anyJson, (event) => expectPoison(consumer, event)),
          { numRuns: 100 },
        );
      });

      it(`${consumer}: a missing field, a wrong type, a bad id or a wrong literal is poison`, async () => {
        await fc.assert(
          fc.asyncProperty(malformed(consumer), (event) => expectPoison(consumer, event)),
          { numRuns: 150 },
        );
      });

      it(`${consumer}: an oversized title, id, source or type is poison, recorded within the item limit`, async () => {
        await fc.assert(
          fc.asyncProperty(oversized(consumer), (event) => expectPoison(consumer, event)),
          { numRuns: 30 },
        );
      });

      it(`${consumer}: ids, types or the route that disagree are poison`, async () => {
        await fc.assert(
          fc.asyncProperty(mismatched(consumer), (event) => expectPoison(consumer, event)),
          { numRuns: 100 },
        );
        expect(effectCalls[consumer]).toBe(0);
      });
    }
  },
);
