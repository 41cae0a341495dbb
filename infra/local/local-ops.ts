/**
 * The ops API's ports realized by the local runtime (the AWS ones are in
 * `shared/ops/adapters/aws/`): the local bus's dead letters and re-delivery, and the alarms
 * evaluated on the live figures.
 */

import { topology as projectTopology } from '../../functions/topology';
import type {
  AlarmState,
  ComponentState,
  ConsumerRedelivery,
  DeadLetter,
  DeadLetterStore,
  PipelineHealth,
  RelayHealth,
  StatusComponent,
  StatusFigures,
} from '../../shared/ops/ops-ports';
import type { ConsumerName, Topology } from '../../shared/topology';
import type { AuditRunner } from './audit-runner';
import { evaluateAlarms } from './local-alarms';
import type { BusEvent, LocalBus } from './local-bus';
import type { RelayRunner } from './relay-runner';

/** The local bus's dead-letter store as the ops API reads and redrives it. */
export class BusDeadLetters implements DeadLetterStore {
  constructor(private readonly bus: LocalBus) {}

  async count(): Promise<number> {
    return this.bus.deadLetters().length;
  }

  async list(limit: number): Promise<readonly DeadLetter[]> {
    return this.bus.deadLetters().slice(0, limit);
  }

  /**
   * Redrives each letter there is now (of `target`, dead before `deadBefore`) once: a letter
   * that dies again while this goes on is a new letter, left for another request.
   */
  async redrive(
    target: { readonly id: string; readonly consumer?: ConsumerName } | 'all',
    stopBy = Number.POSITIVE_INFINITY,
    deadBefore = Number.POSITIVE_INFINITY,
  ): Promise<number> {
    const letters = this.bus
      .deadLetters()
      .filter(
        (d) =>
          Date.parse(d.deadAt) < deadBefore &&
          (target === 'all' || (d.id === target.id && (!target.consumer || d.consumer === target.consumer))),
      );
    let redriven = 0;
    for (const letter of letters) {
      if (Date.now() >= stopBy) break;
      if (await this.bus.redriveLetter(letter)) redriven++;
    }
    return redriven;
  }
}

/** An inbox redrive's hand-over: the event goes back on the bus for that consumer (journalled). */
export class BusRedelivery implements ConsumerRedelivery {
  constructor(private readonly bus: LocalBus) {}

  async redeliver(consumer: ConsumerName, event: unknown): Promise<void> {
    await this.bus.redeliver(consumer, event as BusEvent);
  }
}

/** What the local health reads besides the status figures. */
export interface LocalHealthDeps {
  readonly relay: RelayRunner;
  readonly audit: Pick<AuditRunner, 'failures'>;
  /** When the runtime started: a relay that has not run yet is not silent before one sweep. */
  readonly startedAt: Date;
  readonly sweepMs: number;
  /** The components the runtime watches and their state now (its engines' supervisors, the bus journal). */
  readonly components: () => Partial<Record<StatusComponent, ComponentState>>;
  /** Epoch ms of the alarms' windows; `Date.now` by default. */
  readonly clock?: () => number;
  /** Whose alarm thresholds and consumer policies: the project's topology by default. */
  readonly topology?: Pick<Topology, 'alarms' | 'consumers'>;
}

/**
 * The topology's alarms evaluated on the figures the status page just read and the runners'
 * records (failures counted over the alarm's period, as CloudWatch does), and the components
 * the runtime watches.
 */
export class LocalHealth implements PipelineHealth {
  constructor(private readonly deps: LocalHealthDeps) {}

  async alarms(figures: StatusFigures): Promise<Record<string, AlarmState>> {
    const now = (this.deps.clock ?? Date.now)();
    const topology = this.deps.topology ?? projectTopology;
    const windowStart = now - topology.alarms.periodSeconds * 1_000;
    return evaluateAlarms(
      {
        ...figures,
        relayErrors: this.deps.relay.failures.since(windowStart),
        auditErrors: this.deps.audit.failures.since(windowStart),
        relayLastRunAt: this.deps.relay.lastRunAt,
        now: new Date(now),
        startedAt: this.deps.startedAt,
        sweepMs: this.deps.sweepMs,
      },
      topology.alarms,
      topology.consumers,
    );
  }

  async relay(): Promise<RelayHealth> {
    return { lastRunAt: this.deps.relay.lastRunAt?.toISOString() ?? null, errors: this.deps.relay.errors };
  }

  async components(): Promise<Partial<Record<StatusComponent, ComponentState>>> {
    return this.deps.components();
  }
}
