import { Logger } from '@aws-lambda-powertools/logger';
import type { SqlClient } from '../../shared/db/sql-client';
import { localBusIdentity } from '../../shared/events/bus-event';
import { localLambdaContext, toProxyEvent } from '../../shared/http/proxy-event';
import { createOpsApi, type OpsApi, type OpsStatus, opsApiResources } from '../../shared/ops/ops-api';
import type { ComponentState, ConsumerRedelivery, StatusComponent } from '../../shared/ops/ops-ports';
import type { Topology } from '../../shared/topology';
import type { AuditRunner } from './audit-runner';
import type { ForeignEffectsWatch } from './foreign-effects';
import type { LocalBus } from './local-bus';
import type { LocalConsumers } from './local-consumers';
import { BusDeadLetters, BusRedelivery, LocalHealth } from './local-ops';
import type { RelayRunner } from './relay-runner';

/** What the local ops API reads and redrives: the runtime's own services. */
export interface LocalOpsApiDeps {
  /** As the ops database role. */
  readonly db: SqlClient;
  readonly consumers: LocalConsumers;
  readonly bus: LocalBus;
  readonly relay: RelayRunner;
  readonly audit: AuditRunner;
  /** The audit's grace period here (the topology's, or a test's). */
  readonly auditGraceSeconds: number;
  /** How a redrive hands an event to a consumer: the bus (journalled) by default. */
  readonly redelivery?: ConsumerRedelivery;
  /** When an open record nothing was due on counts as stuck here (the topology's, or a test's). */
  readonly stuckAfterSeconds: number;
  /** When the runtime started: the relay-silence alarm waits one sweep from here. */
  readonly startedAt: Date;
  readonly sweepMs: number;
  /** The components the runtime watches and their state now. */
  readonly components: () => Partial<Record<StatusComponent, ComponentState>>;
  /** Epoch ms of the alarms' windows; `Date.now` by default. */
  readonly clock?: () => number;
  /**
   * Epoch ms of the records the ops API reads and writes (open records' ages, a redrive's new
   * first attempt): the runtime's clock, which the consumers' inbox keeps its times by; `Date.now` by default.
   */
  readonly recordClock?: () => number;
  /** The pipeline it operates: its consumers, its audit, its alarm thresholds and consumer policies. */
  readonly topology: Topology;
  /** The audit's findings of effects of uncommitted events (foreign-effects.ts), for the status and its alarm. */
  readonly foreignEffects?: Pick<ForeignEffectsWatch, 'counts'>;
}

/**
 * The shared ops API (the same routes and JSON as on AWS) over the local runtime: the bus's dead
 * letters and re-delivery, the consumers' inbox and effect counts, the relay's and the audit's health.
 */
export function createLocalOpsApi(deps: LocalOpsApiDeps): OpsApi {
  const { db, consumers, bus, relay } = deps;
  return createOpsApi({
    topology: deps.topology,
    db,
    inbox: consumers.inbox,
    inboxStore: consumers.inboxStore,
    deadLetters: new BusDeadLetters(bus),
    redelivery: deps.redelivery ?? new BusRedelivery(bus),
    health: new LocalHealth({
      relay,
      audit: deps.audit,
      startedAt: deps.startedAt,
      sweepMs: deps.sweepMs,
      components: deps.components,
      clock: deps.clock,
      topology: deps.topology,
    }),
    nudger: relay,
    effects: () => consumers.effectCounts(),
    journal: async () => {
      const { keptAside, file } = bus.journalDamage();
      return { linesKeptAside: keptAside, file };
    },
    processedCount: (consumer) => consumers.processedCount(consumer),
    ...(deps.foreignEffects ? { foreignEffects: foreignCounts(deps.foreignEffects) } : {}),
    bus: () => localBusIdentity,
    auditGraceSeconds: deps.auditGraceSeconds,
    stuckAfterSeconds: deps.stuckAfterSeconds,
    clock: deps.recordClock,
    logger: new Logger({ serviceName: 'ops-api', logLevel: 'WARN' }),
  });
}

const foreignCounts = (watch: Pick<ForeignEffectsWatch, 'counts'>) => async () => watch.counts();

/** `GET /ops/status` through the ops API itself, so the runtime's figures are the status page's. */
export async function readOpsStatus(opsApi: OpsApi): Promise<OpsStatus> {
  const result = await opsApi(
    toProxyEvent({ method: 'GET', url: '/ops/status' }, opsApiResources),
    localLambdaContext('ops-api'),
  );
  if (result.statusCode !== 200) throw new Error(`ops status answered ${result.statusCode}: ${result.body}`);
  return JSON.parse(result.body) as OpsStatus;
}
