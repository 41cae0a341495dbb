import type { Context } from 'aws-lambda';
import type { DeliveryAuditStore } from '../audit/audit-store';
import type { SqlClient } from '../db/sql-client';
import type { BusIdentity } from '../events/bus-event';
import type { ErrorLogger } from '../http/error-responses';
import type { InboxOps } from '../inbox/inbox-ops';
import type { InboxStore } from '../inbox/inbox-store';
import type { OutboxStore } from '../outbox/outbox-store';
import type { RelayNudger } from '../tasks/relay-nudger';
import type { ConsumerName, Topology } from '../topology';
import type { ConsumerRedelivery, DeadLetterStore, EffectCounts, PipelineHealth } from './ops-ports';

/** The logging the ops API does; a Powertools Logger fits. */
export interface OpsApiLogger extends ErrorLogger {
  warn(message: string, ...extra: unknown[]): void;
}

/** The local bus journal as `GET /ops/status` shows it. */
export interface JournalStatus {
  /** Lines starts could not read and kept aside (their deliveries made again from the outbox), until the file is removed. */
  readonly linesKeptAside: number;
  /** Where they are kept, beside the journal. */
  readonly file: string;
}

/** The largest lists the API returns in one answer (a Lambda response holds 6 MB; stored events go along). */
export const opsListLimits = { outboxDead: 500, inboxDead: 50, deadLetters: 50, audit: 500 } as const;

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
  /** How long a read waits for its stores. @default `opsReadTimeoutMs` (ops-api.ts) */
  readonly readTimeoutMs?: number;
}

/**
 * What the ops API's parts (its status read, its redrives, its trace) share, built once per API
 * by `createOpsApi` (ops-api.ts): its deps with their defaults applied, and the stores over its
 * database.
 */
export interface OpsContext
  extends Omit<OpsApiDeps, 'bus' | 'auditGraceSeconds' | 'stuckAfterSeconds' | 'clock' | 'readTimeoutMs'> {
  /** The topology's consumers, in its order. */
  readonly consumerNames: Topology['consumerNames'];
  /** The outbox as the ops database role reads and redrives it. */
  readonly outbox: OutboxStore;
  /** The delivery audit's state and findings. */
  readonly audits: DeliveryAuditStore;
  readonly auditGraceSeconds: number;
  readonly stuckAfterSeconds: number;
  readonly clock: () => number;
  readonly readTimeoutMs: number;
}

/** What a read past its deadline says of its stores. */
export const noAnswer = ({ readTimeoutMs }: Pick<OpsContext, 'readTimeoutMs'>): string =>
  `no answer within ${readTimeoutMs / 1_000} s`;
