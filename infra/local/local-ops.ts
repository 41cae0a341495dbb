/**
 * The ops API's ports realized by the local runtime (the AWS ones are in
 * `shared/ops/adapters/aws/`): the local bus's dead letters and re-delivery, and the alarms
 * evaluated on the live figures.
 */
import type {
  AlarmState,
  ConsumerRedelivery,
  DeadLetter,
  DeadLetterStore,
  PipelineHealth,
  RelayHealth,
  StatusFigures,
} from '../../shared/ops/ops-ports';
import type { ConsumerName } from '../../shared/topology';
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

  async redrive(target: { readonly id: string; readonly consumer?: ConsumerName } | 'all'): Promise<number> {
    const letters =
      target === 'all'
        ? this.bus.deadLetters().map((d) => ({ id: d.id, consumer: d.consumer }))
        : [{ id: target.id, consumer: target.consumer }];
    let redriven = 0;
    for (const { id, consumer } of letters) while (await this.bus.redrive(id, consumer)) redriven++;
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

/** The topology's alarms evaluated on the figures the status page just read, and the relay's and the audit's runners' records. */
export class LocalHealth implements PipelineHealth {
  constructor(
    private readonly runner: RelayRunner,
    private readonly audit: Pick<AuditRunner, 'errors'>,
    private readonly startedAt: Date,
    private readonly sweepMs: number,
  ) {}

  async alarms(figures: StatusFigures): Promise<Record<string, AlarmState>> {
    return evaluateAlarms({
      ...figures,
      relayErrors: this.runner.errors,
      auditErrors: this.audit.errors,
      relayLastRunAt: this.runner.lastRunAt,
      now: new Date(),
      startedAt: this.startedAt,
      sweepMs: this.sweepMs,
    });
  }

  async relay(): Promise<RelayHealth> {
    return { lastRunAt: this.runner.lastRunAt?.toISOString() ?? null, errors: this.runner.errors };
  }
}
