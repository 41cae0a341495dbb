import middy, { type MiddyfiedHandler } from '@middy/core';
import type { APIGatewayProxyResult, Context } from 'aws-lambda';
import { DeliveryAuditStore } from '../audit/audit-store';
import type { SqlClient } from '../db/sql-client';
import { withDeadline } from '../deadline';
import { type BusIdentity, localBusIdentity } from '../events/bus-event';
import { HttpError, httpErrors } from '../http/error-responses';
import { type JsonBodyEvent, jsonBody } from '../http/json-body';
import { createRouter } from '../http/router';
import { retryAfterSeconds } from '../http/unavailable';
import type { InboxOps } from '../inbox/inbox-ops';
import type { InboxStore } from '../inbox/inbox-store';
import { OutboxStore } from '../outbox/outbox-store';
import type { RelayNudger } from '../tasks/relay-nudger';
import type { ConsumerName, Topology } from '../topology';
import { type JournalStatus, noAnswer, type OpsApiLogger, type OpsContext } from './ops-context';
import type { ConsumerRedelivery, DeadLetterStore, EffectCounts, PipelineHealth } from './ops-ports';
import { createOpsRedrives } from './ops-redrive';
import { type OpsRouteDeps, opsApiRoutes } from './ops-routes';
import { createOpsStatus } from './ops-status';
import { createOpsTrace } from './ops-trace';

// The names the parts' modules declare, re-exported so that this module's importers keep them.
export { type JournalStatus, type OpsApiLogger, opsListLimits } from './ops-context';
export { type OpsRouteDeps, opsApiResources, opsApiRoutes } from './ops-routes';
export type { AuditStatus, OpsStatus } from './ops-status';
export type { AuditListing, TaskTrace, TraceEntry } from './ops-trace';

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

/** Time a redrive of everything keeps for answering. */
const answerMarginMs = 5_000;

/**
 * Builds the ops API: status, latest events, a task's trace through every consumer, the dead
 * lists (outbox, each consumer's inbox, the bus's dead letters) and their redrive, with the same
 * routes and JSON wherever it runs. Inbox reads use the inbox's operator index, never a scan.
 */
export function createOpsApi(deps: OpsApiDeps): OpsApi {
  const { topology, db, logger } = deps;
  const ctx: OpsContext = {
    topology,
    consumerNames: topology.consumerNames,
    db,
    outbox: new OutboxStore(db),
    audits: new DeliveryAuditStore(db),
    inbox: deps.inbox,
    inboxStore: deps.inboxStore,
    deadLetters: deps.deadLetters,
    redelivery: deps.redelivery,
    health: deps.health,
    nudger: deps.nudger,
    logger,
    effects: deps.effects,
    journal: deps.journal,
    foreignEffects: deps.foreignEffects,
    processedCount: deps.processedCount,
    auditGraceSeconds: deps.auditGraceSeconds ?? topology.audit.graceSeconds,
    stuckAfterSeconds: deps.stuckAfterSeconds ?? topology.audit.stuckAfterSeconds,
    clock: deps.clock ?? Date.now,
    readTimeoutMs: deps.readTimeoutMs ?? opsReadTimeoutMs,
  };
  const dispatch = createRouter(opsApiRoutes(ctx.consumerNames));
  const busOf = deps.bus ?? (() => localBusIdentity);

  const routeDeps: OpsRouteDeps = {
    topology,
    db,
    inbox: ctx.inbox,
    outbox: ctx.outbox,
    deadLetters: ctx.deadLetters,
    ...createOpsStatus(ctx),
    ...createOpsTrace(ctx),
    ...createOpsRedrives(ctx),
    stopBy(context) {
      const remaining = context?.getRemainingTimeInMillis?.() ?? Number.POSITIVE_INFINITY;
      return ctx.clock() + remaining - answerMarginMs;
    },
    bus: busOf,
    within: (read) =>
      withDeadline(
        read(),
        ctx.readTimeoutMs,
        () =>
          new HttpError(
            503,
            `the stores this read needs gave ${noAnswer(ctx)}; try again later`,
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
