import middy, { type MiddyfiedHandler } from '@middy/core';
import type { APIGatewayProxyResult, Context } from 'aws-lambda';
import { DeliveryAuditStore } from '../audit/audit-store';
import { withDeadline } from '../deadline';
import { localBusIdentity } from '../events/bus-event';
import { HttpError, httpErrors } from '../http/error-responses';
import { type JsonBodyEvent, jsonBody } from '../http/json-body';
import { createRouter } from '../http/router';
import { retryAfterSeconds } from '../http/unavailable';
import { OutboxStore } from '../outbox/outbox-store';
import { noAnswer, type OpsApiDeps, type OpsContext } from './ops-context';
import { createOpsRedrives } from './ops-redrive';
import { type OpsRouteDeps, opsApiRoutes } from './ops-routes';
import { createOpsStatus } from './ops-status';
import { createOpsTrace } from './ops-trace';

// The names the parts' modules declare, re-exported so that this module's importers keep them.
export { type JournalStatus, type OpsApiDeps, type OpsApiLogger, opsListLimits } from './ops-context';
export { type OpsRouteDeps, opsApiResources, opsApiRoutes } from './ops-routes';
export type { AuditStatus, OpsStatus } from './ops-status';
export type { AuditListing, TaskTrace, TraceEntry } from './ops-trace';

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
    ...deps,
    consumerNames: topology.consumerNames,
    outbox: new OutboxStore(db),
    audits: new DeliveryAuditStore(db),
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
