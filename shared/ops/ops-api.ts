import middy, { type MiddyfiedHandler } from '@middy/core';
import type { APIGatewayProxyResult, Context } from 'aws-lambda';
import * as z from 'zod';
import { type AuditState, DeliveryAuditStore, type ListedFinding } from '../audit/audit-store';
import type { SqlClient } from '../db/sql-client';
import { withDeadline } from '../deadline';
import { type BusIdentity, deliveredBusEvent, localBusIdentity } from '../events/bus-event';
import { type ErrorLogger, HttpError, httpErrors } from '../http/error-responses';
import { type JsonBodyEvent, jsonBody } from '../http/json-body';
import type { ApiResource } from '../http/resource-match';
import { jsonResponse } from '../http/responses';
import { createRouter, type Route, routeFor } from '../http/router';
import { retryAfterSeconds } from '../http/unavailable';
import { isInboxError } from '../inbox/errors';
import { inboxHealth } from '../inbox/inbox-health';
import { type InboxOps, isStuck } from '../inbox/inbox-ops';
import type { InboxRecord, InboxStore } from '../inbox/inbox-store';
import { inboxSettingsFor } from '../inbox/settings';
import { type DeadRedriveCursor, type OutboxStats, OutboxStore } from '../outbox/outbox-store';
import type { RelayNudger } from '../tasks/relay-nudger';
import type { ConsumerName, Topology } from '../topology';
import {
  type AlarmState,
  type ComponentState,
  type ConsumerRedelivery,
  type DeadLetterStore,
  type EffectCounts,
  type InboxStatusCounts,
  type PipelineHealth,
  type RelayHealth,
  type StatusComponent,
  statusComponents,
} from './ops-ports';
import {
  type EventRow,
  latestEvents,
  maxEventsLimit,
  taskCounts,
  taskEvents,
  taskExists,
} from './ops-queries';

/**
 * `GET /ops/status`: the figures the alarms watch, the alarms themselves, and whether each
 * component serves. A section whose store could not be read is null and its component is marked
 * down with the cause: the answer is still a 200 with everything else that could be read, since
 * an outage is when an operator needs the page most.
 */
export interface OpsStatus {
  /** Up or down, with the cause and (locally) since when: `postgres`, `dynamo`, `bus`. */
  readonly components: Record<StatusComponent, ComponentState>;
  readonly tasks: Record<string, number> | null;
  /** The relay's figures, and the delivered rows still kept (counted off the relay's path). */
  readonly outbox: (OutboxStats & { readonly delivered: number }) | null;
  readonly consumers: Record<ConsumerName, InboxStatusCounts> | null;
  /** What the effects did; null where the realization cannot count it cheaply (AWS) or its store is down. */
  readonly effects: EffectCounts | null;
  readonly deadLetters: number | null;
  /** The delivery audit: delivered events missing from each consumer's inbox, and its last run. */
  readonly audit: AuditStatus | null;
  /** Each alarm's state; INSUFFICIENT_DATA (locally) for one whose figure could not be read. */
  readonly alarms: Record<string, AlarmState> | null;
  readonly relay: RelayHealth | null;
  /** The local bus's journal: lines a start could not read, kept aside; null where there is none (AWS). */
  readonly journal: JournalStatus | null;
}

/** The local bus journal as `GET /ops/status` shows it. */
export interface JournalStatus {
  /** Lines starts could not read and kept aside (their deliveries made again from the outbox), until the file is removed. */
  readonly linesKeptAside: number;
  /** Where they are kept, beside the journal. */
  readonly file: string;
}

/** The delivery audit as `GET /ops/status` shows it. */
export interface AuditStatus {
  /** Open findings per consumer: delivered events with no record in that consumer's inbox. */
  readonly undelivered: Record<ConsumerName, number>;
  readonly lastRunAt: string | null;
  /** How far behind the audit's walk is, in seconds past the grace period (0: caught up). */
  readonly behindSeconds: number;
  /**
   * Local only: effects each consumer performed for events that have no outbox row (a forged or
   * foreign event on the bus), as the audit found them (shared/audit/foreign-effects.ts).
   */
  readonly foreignEffects?: Record<ConsumerName, number>;
}

/** `GET /ops/audit`: the audit's state and its open findings, oldest delivery first. */
export interface AuditListing extends AuditState {
  readonly undelivered: Record<ConsumerName, number>;
  readonly findings: readonly ListedFinding[];
}

/** One consumer's inbox state for an event, as a task's trace shows it. */
export interface TraceEntry {
  readonly status: string;
  readonly attempts: number;
  readonly lastError: string | null;
  readonly updatedAt: string;
}

/** The logging the ops API does; a Powertools Logger fits. */
export interface OpsApiLogger extends ErrorLogger {
  warn(message: string, ...extra: unknown[]): void;
}

/** Everything the ops API reads and changes, injected so Lambda, the local runtime and tests share one API. */
export interface OpsApiDeps {
  /** The pipeline it operates: the consumers it lists, checks and redrives, the audit's figures. */
  readonly topology: Topology;
  /** As the ops database role: reads tasks and the outbox, puts dead outbox rows back. */
  readonly db: SqlClient;
  /** The consumers' inbox as operators read and redrive it (one table; each consumer's records keyed `<consumer>#<eventId>`). */
  readonly inbox: InboxOps;
  /**
   * The same table through the consumers' port, for one write: a redriven record whose re-send
   * failed goes back `DEAD` (`markDead`, fenced on the redrive's ownership), so it stays listed.
   */
  readonly inboxStore: Pick<InboxStore, 'markDead'>;
  readonly deadLetters: DeadLetterStore;
  readonly redelivery: ConsumerRedelivery;
  readonly health: PipelineHealth;
  /** Woken after an outbox redrive, so the events go out now rather than at the next sweep. */
  readonly nudger: RelayNudger;
  readonly logger: OpsApiLogger;
  /** Local only: counts of what the effects did (their files and tables). */
  readonly effects?: () => Promise<EffectCounts>;
  /** Local only: the bus journal's lines kept aside (there is no journal on AWS). */
  readonly journal?: () => Promise<JournalStatus>;
  /** Local only: effects of events without an outbox row the audit found, per consumer (shared/audit/foreign-effects.ts). */
  readonly foreignEffects?: () => Promise<Record<ConsumerName, number>>;
  /** Local only: events each consumer processed, from a maintained counter (the inbox cannot count its history). */
  readonly processedCount?: (consumer: ConsumerName) => Promise<number>;
  /**
   * The bus's account and Region, written into an event an audit redrive re-sends, told by the
   * invocation (on AWS its function's ARN). @default the local bus's
   */
  readonly bus?: (context: Context) => BusIdentity;
  /** The delivery audit's grace period, from which its lag is told. @default the topology's `audit.graceSeconds` */
  readonly auditGraceSeconds?: number;
  /**
   * How long an open record nothing was due on stays before its redrive re-sends it (see
   * shared/audit/stuck-records.ts). @default the topology's `audit.stuckAfterSeconds`
   */
  readonly stuckAfterSeconds?: number;
  readonly clock?: () => number;
  /** How long a read waits for its stores. @default {@link opsReadTimeoutMs} */
  readonly readTimeoutMs?: number;
}

/**
 * How long an ops read (a status section, a list, a trace) waits for the stores it reads before
 * it answers without them: each is a few index reads, milliseconds on a store that serves, so
 * past this the store is not serving (a hung PostgreSQL backend, a pool that cannot connect). The
 * status page then answers at once with that section null and its component down with why, as
 * an operator needs it in an outage; a list or a trace answers 503 with Retry-After (a read
 * changes nothing, so sending it again is safe). Below the pools' own statement bounds
 * (`shared/db/pg-settings.ts`) and API Gateway's 29 s.
 */
export const opsReadTimeoutMs = 8_000;

/** The ops API as one callable: an API Gateway REST proxy event in, a proxy result out. */
export type OpsApi = MiddyfiedHandler<JsonBodyEvent, APIGatewayProxyResult, Error, Context>;

/** The largest lists the API returns in one answer (a Lambda response holds 6 MB; stored events go along). */
export const opsListLimits = { outboxDead: 500, inboxDead: 50, deadLetters: 50, audit: 500 } as const;

/** What a redrive answers: how many, and whether that was everything (a redrive of all may stop early). */
interface Redriven {
  readonly redriven: number;
  readonly complete: boolean;
}

/** Rows a redrive of every dead outbox event puts back per statement. */
const outboxRedriveBatch = 1_000;
/** Time a redrive of everything keeps for answering. */
const answerMarginMs = 5_000;

const redriveAll = z.strictObject({ all: z.literal(true) });
const outboxRedriveBody = z.union([z.strictObject({ eventId: z.uuid('must be a UUID') }), redriveAll]);
const inboxRedriveBody = z.union([z.strictObject({ eventId: z.string().min(1).max(1024) }), redriveAll]);
/** The bodies that name a consumer: one of the topology's. */
function consumerBodies(consumerNames: Topology['consumerNames']) {
  const consumerField = z.enum(consumerNames);
  return {
    deadLetterRedriveBody: z.union([
      z.strictObject({ eventId: z.string().min(1).max(256), consumer: consumerField.optional() }),
      redriveAll,
    ]),
    consumerField,
    auditRedriveBody: z.union([
      z.strictObject({ eventId: z.uuid('must be a UUID'), consumer: consumerField.optional() }),
      z.strictObject({ all: z.literal(true), since: z.iso.datetime({ offset: true }).optional() }),
    ]),
  };
}
/** What a redrive names: one event (for one consumer, where the list holds several), or everything. */
type RedriveTarget = { eventId: string } | { all: true };
type ConsumerRedriveTarget = { eventId: string; consumer?: ConsumerName } | { all: true };
/** What an audit redrive names: one event, or every finding not re-sent since `since` (this call's start). */
type AuditRedriveTarget = { eventId: string; consumer?: ConsumerName } | { all: true; since?: string };
/** Findings an audit redrive of everything reads and re-sends per round. */
const auditRedriveBatch = 100;
const eventsLimit = z
  .string()
  .regex(/^\d+$/, `must be an integer from 1 to ${maxEventsLimit}`)
  .transform(Number)
  .pipe(
    z.number().int().min(1, 'must be at least 1').max(maxEventsLimit, `must be at most ${maxEventsLimit}`),
  );
/**
 * A dead inbox record as `GET /ops/inbox/{consumer}/dead` answers it: the inbox's generic
 * `subject` (the CloudEvent's) is this application's task id, and the operator's tools read it
 * as `taskId`.
 */
type DeadRecordBody = Omit<InboxRecord, 'subject'> & { readonly taskId: string | null };

function deadRecordBody({ subject, ...record }: InboxRecord): DeadRecordBody {
  return { ...record, taskId: subject };
}

const taskIdParams = z.object({ taskId: z.uuid('must be a UUID') });

/** The 400's message for a redrive body its schema refuses. */
const redriveShape = 'body must be {"eventId": "..."} or {"all": true}';

/** An error's message as a component's cause: what an operator reads first. */
const causeOf = (err: unknown): string =>
  (err instanceof Error ? `${err.name === 'Error' ? '' : `${err.name}: `}${err.message}` : String(err)).slice(
    0,
    500,
  );

/**
 * The consumer a path names; 404 for any name not in `t` (an own-property check: `toString` is
 * no consumer).
 */
function consumerOf(
  t: Pick<Topology, 'consumers' | 'consumerNames'>,
  name: string | undefined,
): ConsumerName {
  if (name === undefined || !Object.hasOwn(t.consumers, name)) {
    throw new HttpError(404, `unknown consumer "${name ?? ''}"; one of ${t.consumerNames.join(', ')}`);
  }
  return name;
}

/** A task's way through the pipeline: its events, and each consumer's inbox state for each. */
export interface TaskTrace {
  readonly taskId: string;
  readonly events: readonly (EventRow & { readonly consumers: Record<ConsumerName, TraceEntry | null> })[];
}

/** What the ops routes' handlers use, built once per API by {@link createOpsApi}. */
export interface OpsRouteDeps {
  readonly topology: Pick<Topology, 'consumers' | 'consumerNames'>;
  readonly db: SqlClient;
  readonly inbox: InboxOps;
  readonly outbox: OutboxStore;
  readonly deadLetters: DeadLetterStore;
  status(): Promise<OpsStatus>;
  /** 404 for a task that does not exist. */
  trace(taskId: string): Promise<TaskTrace>;
  auditListing(consumer: ConsumerName | undefined): Promise<AuditListing>;
  redriveOutbox(target: RedriveTarget, stopBy: number): Promise<Redriven>;
  redriveInbox(
    consumer: ConsumerName,
    target: RedriveTarget,
    stopBy: number,
    bus: BusIdentity,
  ): Promise<Redriven>;
  redriveDeadLetters(target: ConsumerRedriveTarget, stopBy: number): Promise<Redriven>;
  redriveAudit(
    target: AuditRedriveTarget,
    stopBy: number,
    bus: BusIdentity,
  ): Promise<Redriven & { readonly skipped: number; readonly since?: string }>;
  /**
   * When a redrive of everything stops, so that it answers before API Gateway gives up (29 s):
   * the answer says `complete: false`, and the same request goes on from where it stopped.
   */
  stopBy(context: Context): number;
  /** The bus's account and Region, for an event an audit redrive re-sends. */
  bus(context: Context): BusIdentity;
  /** What a read route answers: `read()`, or a 503 once it is past the read deadline. */
  within<T>(read: () => Promise<T>): Promise<T>;
}

/** A 200 an operator's tools never cache: every answer is the pipeline's state now. */
const ok = (body: unknown) => jsonResponse(200, body, { 'cache-control': 'no-store' });

const route = routeFor<OpsRouteDeps>();

/**
 * The ops API's routes for a pipeline of the consumers `consumerNames`: each one's resource,
 * method, schemas and handler. The router dispatches from this table, the local server matches
 * resources with it, and the CDK builds the API Gateway resources, methods, query parameters and
 * request models from it.
 */
export function opsApiRoutes(consumerNames: Topology['consumerNames']): readonly Route<OpsRouteDeps>[] {
  const { deadLetterRedriveBody, auditRedriveBody, consumerField } = consumerBodies(consumerNames);
  return [
    route({ method: 'GET', resource: '/ops/status', handler: async (_, ops) => ok(await ops.status()) }),
    route({
      method: 'GET',
      resource: '/ops/events',
      query: z.object({ limit: eventsLimit.optional() }),
      handler: async ({ query }, { db, within }) =>
        ok(await within(() => latestEvents(db, query.limit ?? 20))),
    }),
    route({
      method: 'GET',
      resource: '/ops/outbox/dead',
      handler: async (_, { outbox, within }) =>
        ok(await within(() => outbox.listDead(opsListLimits.outboxDead))),
    }),
    route({
      method: 'POST',
      resource: '/ops/outbox/dead/redrive',
      body: outboxRedriveBody,
      invalid: redriveShape,
      handler: async ({ body, context }, ops) => ok(await ops.redriveOutbox(body, ops.stopBy(context))),
    }),
    route({
      method: 'GET',
      resource: '/ops/inbox/{consumer}/dead',
      handler: async ({ params }, { topology, inbox, within }) => {
        const consumer = consumerOf(topology, params.consumer);
        const listed = await within(() => inbox.listDead(consumer, { limit: opsListLimits.inboxDead }));
        return ok(listed.records.map(deadRecordBody));
      },
    }),
    route({
      method: 'POST',
      resource: '/ops/inbox/{consumer}/dead/redrive',
      body: inboxRedriveBody,
      invalid: redriveShape,
      handler: async ({ params, body, context }, ops) =>
        ok(
          await ops.redriveInbox(
            consumerOf(ops.topology, params.consumer),
            body,
            ops.stopBy(context),
            ops.bus(context),
          ),
        ),
    }),
    route({
      method: 'GET',
      resource: '/ops/dead-letters',
      handler: async (_, { deadLetters, within }) =>
        ok(await within(() => deadLetters.list(opsListLimits.deadLetters))),
    }),
    route({
      method: 'POST',
      resource: '/ops/dead-letters/redrive',
      body: deadLetterRedriveBody,
      invalid: redriveShape,
      handler: async ({ body, context }, ops) => ok(await ops.redriveDeadLetters(body, ops.stopBy(context))),
    }),
    route({
      method: 'GET',
      resource: '/ops/audit',
      query: z.object({ consumer: consumerField.optional() }),
      handler: async ({ query }, ops) => ok(await ops.within(() => ops.auditListing(query.consumer))),
    }),
    route({
      method: 'POST',
      resource: '/ops/audit/redrive',
      body: auditRedriveBody,
      invalid: redriveShape,
      handler: async ({ body, context }, ops) =>
        ok(await ops.redriveAudit(body, ops.stopBy(context), ops.bus(context))),
    }),
    route({
      method: 'GET',
      resource: '/ops/tasks/{taskId}/trace',
      params: taskIdParams,
      handler: async ({ params }, ops) => ok(await ops.within(() => ops.trace(params.taskId))),
    }),
  ];
}

/**
 * The routes' methods and resources, which are the same whatever a topology's consumers (a
 * consumer is a path parameter or a body field): what a server matches requests with.
 */
export const opsApiResources: readonly ApiResource[] = opsApiRoutes(['consumer']).map(
  ({ method, resource }) => ({ method, resource }),
);

/**
 * Builds the ops API: status, latest events, a task's trace through every consumer, the dead
 * lists (outbox, each consumer's inbox, the bus's dead letters) and their redrive, with the same
 * routes and JSON wherever it runs. Inbox reads use the inbox's operator index, never a scan.
 */
export function createOpsApi(deps: OpsApiDeps): OpsApi {
  const { db, inbox, inboxStore, deadLetters, redelivery, health, nudger, logger } = deps;
  const clock = deps.clock ?? Date.now;
  const outbox = new OutboxStore(db);
  const audits = new DeliveryAuditStore(db);
  const { consumerNames } = deps.topology;
  const dispatch = createRouter(opsApiRoutes(consumerNames));
  const auditGraceSeconds = deps.auditGraceSeconds ?? deps.topology.audit.graceSeconds;
  const stuckAfterSeconds = deps.stuckAfterSeconds ?? deps.topology.audit.stuckAfterSeconds;
  const busOf = deps.bus ?? (() => localBusIdentity);
  const readTimeoutMs = deps.readTimeoutMs ?? opsReadTimeoutMs;
  const noAnswer = () => `no answer within ${readTimeoutMs / 1_000} s`;

  async function consumerCounts(consumer: ConsumerName): Promise<InboxStatusCounts> {
    const [open, processed] = await Promise.all([
      inbox.openFigures(consumer),
      deps.processedCount ? deps.processedCount(consumer) : Promise.resolve(null),
    ]);
    return { processed, ...inboxHealth(open, clock()) };
  }

  async function status(): Promise<OpsStatus> {
    const down = new Map<StatusComponent, string>();
    // Each section on its own: one store down costs its sections, never the whole answer.
    const read = async <T>(
      section: string,
      component: StatusComponent | undefined,
      fn: () => Promise<T>,
    ): Promise<T | null> => {
      try {
        return await withDeadline(fn(), readTimeoutMs, () => new Error(noAnswer()));
      } catch (err) {
        logger.warn('a status section could not be read', { section, component, error: err });
        if (component && !down.has(component)) down.set(component, causeOf(err));
        return null;
      }
    };
    const [tasks, outboxStats, delivered, consumerList, effects, deadLetterCount, relay, audit, watched] =
      await Promise.all([
        read('tasks', 'postgres', () => taskCounts(db)),
        read('outbox', 'postgres', () => outbox.stats()),
        read('outbox', 'postgres', () => outbox.deliveredCount()),
        read('consumers', 'dynamo', () => Promise.all(consumerNames.map(consumerCounts))),
        deps.effects ? read('effects', 'dynamo', deps.effects) : Promise.resolve(null),
        read('deadLetters', 'bus', () => deadLetters.count()),
        read('relay', undefined, () => health.relay()),
        read('audit', 'postgres', () =>
          Promise.all([audits.undeliveredCounts(consumerNames), audits.state(auditGraceSeconds)]),
        ),
        read('components', undefined, async () => (await health.components?.()) ?? {}),
      ]);
    const journal = deps.journal ? await read('journal', 'bus', deps.journal) : null;
    const foreignEffects = deps.foreignEffects
      ? await read('audit', undefined, deps.foreignEffects)
      : undefined;
    const consumers =
      consumerList &&
      (Object.fromEntries(consumerNames.map((c, i) => [c, consumerList[i]])) as Record<
        ConsumerName,
        InboxStatusCounts
      >);
    const alarms = await read('alarms', undefined, () =>
      health.alarms({
        outbox: outboxStats,
        consumers,
        deadLetters: deadLetterCount,
        undelivered: audit?.[0] ?? null,
        ...(foreignEffects === undefined
          ? {}
          : { foreignEffects: foreignEffects && Object.values(foreignEffects).reduce((n, c) => n + c, 0) }),
      }),
    );
    const components = Object.fromEntries(
      statusComponents.map((c): [StatusComponent, ComponentState] => {
        const known = watched?.[c];
        if (known && !known.up) return [c, known];
        const cause = down.get(c);
        return [c, cause === undefined ? { up: true } : { up: false, cause }];
      }),
    ) as Record<StatusComponent, ComponentState>;
    return {
      components,
      tasks,
      outbox: outboxStats && delivered !== null ? { ...outboxStats, delivered } : null,
      consumers,
      effects,
      deadLetters: deadLetterCount,
      audit: audit && {
        undelivered: audit[0],
        lastRunAt: audit[1].lastRunAt,
        behindSeconds: audit[1].behindSeconds,
        ...(foreignEffects ? { foreignEffects } : {}),
      },
      alarms,
      relay,
      journal,
    };
  }

  async function redriveOutbox(target: RedriveTarget, stopBy: number): Promise<Redriven> {
    let redriven = 0;
    let complete = true;
    if ('eventId' in target) {
      if (!(await outbox.redriveDead(target.eventId))) {
        throw new HttpError(404, `no dead outbox event ${target.eventId}`);
      }
      redriven = 1;
    } else {
      // A thousand rows per statement: a few statements even for a big backlog. The walk takes
      // each dead event once: one put back that dies again while this goes on is behind it.
      let after: DeadRedriveCursor | null = null;
      for (;;) {
        const batch = await outbox.redriveDeadBatch(outboxRedriveBatch, after);
        redriven += batch.redriven;
        after = batch.last;
        if (batch.last === null || batch.redriven < outboxRedriveBatch) break;
        if (clock() >= stopBy) {
          complete = false;
          break;
        }
      }
    }
    if (redriven > 0) {
      await nudger.nudge().catch((err: unknown) =>
        logger.warn('relay nudge after redrive failed; the next sweep publishes the events', {
          error: err,
        }),
      );
    }
    return { redriven, complete };
  }

  /**
   * Redrives one DEAD inbox record: reset it (the next delivery may run the effect again),
   * then hand the stored event to the consumer. A record whose event was stored truncated
   * cannot be re-sent and is left DEAD (409). If the hand-over fails, the record goes back to
   * DEAD so it stays listed, and the failure is a 500: a store or invoke error is never a 404.
   */
  async function redriveInboxRecord(consumer: ConsumerName, eventId: string): Promise<boolean> {
    const current = await inbox.get({ consumer, eventId });
    if (current?.status !== 'DEAD') return false;
    if (typeof current.event !== 'object' || current.event === null) {
      throw new HttpError(
        409,
        `the stored event of ${consumer}/${eventId} was truncated; it cannot be re-sent`,
        {
          currentStatus: current.status,
        },
      );
    }
    let reset: InboxRecord;
    try {
      reset = await inbox.redrive({ consumer, eventId }, clock());
    } catch (err) {
      if (isInboxError(err, 'NOT_FOUND', 'NOT_DEAD')) return false;
      throw err;
    }
    try {
      await redelivery.redeliver(consumer, reset.event);
    } catch (err) {
      const now = clock();
      await inboxStore.markDead(
        { consumer, eventId },
        { status: 'FAILED', leaseOwner: reset.leaseOwner },
        {
          now,
          reason: `redrive could not re-send the event: ${err instanceof Error ? err.message : String(err)}`,
          expiresAt: Math.floor(now / 1000) + inboxSettingsFor(deps.topology, consumer).deadRetentionSeconds,
        },
      );
      throw err;
    }
    return true;
  }

  /**
   * Re-sends a record nothing will retry (`FAILED` or `PROCESSING`, nothing due on it for
   * `stuckAfterSeconds`: its delivery was lost), as the delivery audit does on its own: the
   * stored event, or (stored truncated) the event rebuilt from its outbox row. The record is
   * not changed, so there is no step between two writes for a crash to fall into.
   */
  async function resendStuckRecord(
    consumer: ConsumerName,
    eventId: string,
    bus: BusIdentity,
  ): Promise<boolean> {
    const current = await inbox.get({ consumer, eventId });
    if (!current || !isStuck(current, clock() - stuckAfterSeconds * 1_000)) return false;
    let event = current.event;
    if (typeof event !== 'object' || event === null) {
      const row = (await audits.deliveredEvents([eventId])).get(eventId);
      if (!row) {
        throw new HttpError(
          409,
          `the stored event of ${consumer}/${eventId} was truncated and its outbox row is gone`,
        );
      }
      event = deliveredBusEvent(row, row.busEventId, bus);
    }
    await redelivery.redeliver(consumer, event);
    return true;
  }

  async function redriveInbox(
    consumer: ConsumerName,
    target: RedriveTarget,
    stopBy: number,
    bus: BusIdentity,
  ): Promise<Redriven> {
    if ('eventId' in target) {
      if (
        !(await redriveInboxRecord(consumer, target.eventId)) &&
        !(await resendStuckRecord(consumer, target.eventId, bus))
      ) {
        throw new HttpError(
          404,
          `no dead ${consumer} inbox record ${target.eventId}, nor one nothing will retry`,
        );
      }
      return { redriven: 1, complete: true };
    }
    // Each record at most once per request: one that dies again while this goes on is listed
    // again after the cursor (its death is newer) and must not be redriven again, or a redrive
    // of records that keep dying runs until its deadline.
    const seen = new Set<string>();
    let redriven = 0;
    let cursor: string | undefined;
    do {
      const page = await inbox.listDead(consumer, { limit: opsListLimits.inboxDead, cursor });
      for (const r of page.records) {
        if (seen.has(r.eventId)) continue;
        seen.add(r.eventId);
        // Between records only, never between a reset and its hand-over.
        if (clock() >= stopBy) return { redriven, complete: false };
        if (await redriveInboxRecord(consumer, r.eventId).catch(skipTruncated)) redriven++;
      }
      cursor = page.cursor;
    } while (cursor);
    return { redriven, complete: true };
  }

  // In a redrive of everything, a record that cannot be re-sent stays DEAD and the rest go on.
  const skipTruncated = (err: unknown): false => {
    if (err instanceof HttpError && err.statusCode === 409) return false;
    throw err;
  };

  async function redriveDeadLetters(target: ConsumerRedriveTarget, stopBy: number): Promise<Redriven> {
    if ('eventId' in target) {
      const redriven = await deadLetters.redrive({ id: target.eventId, consumer: target.consumer });
      if (redriven === 0) throw new HttpError(404, `no dead letter ${target.eventId}`);
      return { redriven, complete: true };
    }
    // One pass takes what each queue hands out (up to 1,000 messages on AWS): pass again until
    // a pass finds nothing, or the time is up. Only letters dead before this request began: one
    // it redrove that dies again meanwhile is a new letter, and passing again for it would
    // redrive letters that keep dying until the deadline.
    const startedAt = clock();
    let redriven = 0;
    for (;;) {
      const pass = await deadLetters.redrive('all', stopBy, startedAt);
      redriven += pass;
      if (pass === 0) return { redriven, complete: true };
      if (clock() >= stopBy) return { redriven, complete: false };
    }
  }

  async function auditListing(consumer: ConsumerName | undefined): Promise<AuditListing> {
    const [state, undelivered, findings] = await Promise.all([
      audits.state(auditGraceSeconds),
      audits.undeliveredCounts(consumerNames),
      audits.list(opsListLimits.audit, { consumer }),
    ]);
    return { ...state, undelivered, findings };
  }

  /**
   * Re-sends what the audit found missing: each finding's event, rebuilt from its outbox row as
   * the bus delivered it, handed to its consumer the way an inbox redrive hands a stored event
   * (an async invoke on AWS, the bus locally), so the inbox keeps it once whatever else arrives.
   * A finding stays open, noted as re-sent, until an audit run finds the record. An event the
   * outbox no longer keeps (purged after its retention) cannot be rebuilt: 409 for one, skipped in all.
   */
  async function redriveAudit(
    target: AuditRedriveTarget,
    stopBy: number,
    bus: BusIdentity,
  ): Promise<Redriven & { readonly skipped: number; readonly since?: string }> {
    let redriven = 0;
    let skipped = 0;
    const resend = async (findings: readonly { eventId: string; consumer: ConsumerName }[]) => {
      const events = await audits.deliveredEvents(findings.map((f) => f.eventId));
      for (const f of findings) {
        const row = events.get(f.eventId);
        if (!row) {
          skipped++;
          continue;
        }
        await redelivery.redeliver(f.consumer, deliveredBusEvent(row, row.busEventId, bus));
        await audits.noteRedrive(f.eventId, f.consumer);
        redriven++;
      }
    };
    if ('eventId' in target) {
      const findings = await audits.toRedrive(consumerNames.length, target);
      if (findings.length === 0) {
        throw new HttpError(
          404,
          `no audit finding for event ${target.eventId}${target.consumer ? ` and consumer ${target.consumer}` : ''}`,
        );
      }
      await resend(findings);
      if (redriven === 0) {
        throw new HttpError(409, `event ${target.eventId} is no longer in the outbox; it cannot be re-sent`);
      }
      return { redriven, skipped, complete: true };
    }
    // Those re-sent within the grace period are on their way, and those re-sent since the call
    // began (`since`, the database's time, answered so that a repeated request after `complete:
    // false` carries it on) were re-sent by this call: a second pass or request leaves both, so
    // each finding is re-sent at most once per call and the call always moves on. `attempted`
    // keeps one that cannot be re-sent (left un-noted) from being read again in this request.
    const since = target.since ?? (await audits.now());
    const attempted = new Set<string>();
    for (;;) {
      const batch = await audits.toRedrive(auditRedriveBatch, { quietSeconds: auditGraceSeconds, since });
      const fresh = batch.filter((f) => !attempted.has(`${f.eventId}#${f.consumer}`));
      for (const f of fresh) attempted.add(`${f.eventId}#${f.consumer}`);
      if (fresh.length === 0) return { redriven, skipped, complete: true, since };
      await resend(fresh);
      if (clock() >= stopBy) return { redriven, skipped, complete: false, since };
    }
  }

  async function trace(taskId: string): Promise<TaskTrace> {
    if (!(await taskExists(db, taskId))) throw new HttpError(404, `no task ${taskId}`);
    const events = await taskEvents(db, taskId);
    return {
      taskId,
      events: await Promise.all(
        events.map(async (e) => {
          const entries = await Promise.all(
            consumerNames.map(async (c) => {
              const r = await inbox.get({ consumer: c, eventId: e.eventId });
              const entry: TraceEntry | null = r
                ? {
                    status: r.status,
                    attempts: r.attempts,
                    lastError: r.lastError ?? null,
                    updatedAt: new Date(r.updatedAt).toISOString(),
                  }
                : null;
              return [c, entry] as const;
            }),
          );
          return { ...e, consumers: Object.fromEntries(entries) as Record<ConsumerName, TraceEntry | null> };
        }),
      ),
    };
  }

  const routeDeps: OpsRouteDeps = {
    topology: deps.topology,
    db,
    inbox,
    outbox,
    deadLetters,
    status,
    trace,
    auditListing,
    redriveOutbox,
    redriveInbox,
    redriveDeadLetters,
    redriveAudit,
    stopBy(context) {
      const remaining = context?.getRemainingTimeInMillis?.() ?? Number.POSITIVE_INFINITY;
      return clock() + remaining - answerMarginMs;
    },
    bus: busOf,
    within: (read) =>
      withDeadline(
        read(),
        readTimeoutMs,
        () =>
          new HttpError(
            503,
            `the stores this read needs gave ${noAnswer()}; try again later`,
            {},
            { 'retry-after': String(retryAfterSeconds) },
          ),
      ),
  };

  return middy<JsonBodyEvent, APIGatewayProxyResult, Error, Context>(
    (event: JsonBodyEvent, context: Context) => dispatch(event, context, routeDeps),
  )
    .use(httpErrors({ logger }))
    .use(jsonBody());
}
