import type { Context } from 'aws-lambda';
import * as z from 'zod';
import type { SqlClient } from '../db/sql-client';
import type { BusIdentity } from '../events/bus-event';
import { HttpError } from '../http/error-responses';
import type { ApiResource } from '../http/resource-match';
import { jsonResponse } from '../http/responses';
import { type Route, routeFor } from '../http/router';
import type { InboxOps } from '../inbox/inbox-ops';
import type { InboxRecord } from '../inbox/inbox-store';
import type { OutboxStore } from '../outbox/outbox-store';
import type { ConsumerName, Topology } from '../topology';
import { opsListLimits } from './ops-context';
import type { DeadLetterStore } from './ops-ports';
import { latestEvents, maxEventsLimit } from './ops-queries';
import type { AuditRedriveTarget, ConsumerRedriveTarget, Redriven, RedriveTarget } from './ops-redrive';
import type { OpsStatus } from './ops-status';
import type { AuditListing, TaskTrace } from './ops-trace';

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

/** What the ops routes' handlers use, built once per API by `createOpsApi` (ops-api.ts). */
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
