import { inboxHealthThresholds } from '../../shared/inbox/settings';
import { alarmIds } from '../../shared/ops/alarm-ids';
import type { AlarmState, InboxStatusCounts } from '../../shared/ops/ops-ports';
import type { OutboxStats } from '../../shared/outbox/outbox-store';
import { type AlarmThresholds, type ConsumerName, topology } from '../../shared/topology';

/** What the local alarm evaluation reads: the live figures and the relay runner's record. */
export interface AlarmInputs {
  readonly outbox: OutboxStats;
  readonly consumers: Readonly<Record<ConsumerName, InboxStatusCounts>>;
  readonly deadLetters: number;
  /** Delivered events the audit found missing, per consumer. */
  readonly undelivered: Readonly<Record<ConsumerName, number>>;
  /** Failed runs of the local delivery audit since start. */
  readonly auditErrors: number;
  readonly relayErrors: number;
  readonly relayLastRunAt: Date | undefined;
  readonly now: Date;
  /** When the runtime started: a relay that has not run yet is not silent before one period. */
  readonly startedAt: Date;
  /** The relay's safety sweep period here (the topology's, or a test's shorter one). */
  readonly sweepMs: number;
}

/**
 * The topology's alarms evaluated on live figures, the local stand-in for the CloudWatch alarms
 * of `infra/aws/constructs/pipeline-alarms.ts`: a silent relay (no run for
 * `relaySilentSweeps` sweep periods) alarms as missing data does on AWS.
 */
export function evaluateAlarms(
  input: AlarmInputs,
  thresholds: AlarmThresholds = topology.alarms,
): Record<string, AlarmState> {
  const state = (breaching: boolean): AlarmState => (breaching ? 'ALARM' : 'OK');
  const silentAfterMs = thresholds.relaySilentSweeps * input.sweepMs;
  const lastSign = input.relayLastRunAt ?? input.startedAt;
  const alarms: Record<string, AlarmState> = {
    [alarmIds.oldestPendingAge]: state(
      input.outbox.oldestPendingAgeSeconds > thresholds.oldestPendingAgeSeconds,
    ),
    [alarmIds.outboxDead]: state(input.outbox.dead >= thresholds.deadEvents),
    [alarmIds.relayErrors]: state(input.relayErrors >= thresholds.relayErrors),
    [alarmIds.relaySilent]: state(input.now.getTime() - lastSign.getTime() > silentAfterMs),
    [alarmIds.deadLetters]: state(input.deadLetters >= thresholds.dlqMessages),
    [alarmIds.auditErrors]: state(input.auditErrors >= 1),
  };
  const figures = Object.values(input.consumers);
  const limits = inboxHealthThresholds({ alarms: thresholds, consumers: topology.consumers });
  // One alarm each for every consumer, as on AWS (the sum of DEAD records, the largest age
  // against the threshold); the status's per-consumer figures say whose.
  alarms[alarmIds.inboxDead] = state(figures.reduce((n, c) => n + c.dead, 0) >= thresholds.inboxDeadRecords);
  alarms[alarmIds.inboxOldestLease] = state(
    figures.some((c) => (c.oldestLeaseSeconds ?? 0) > limits.oldestLeaseSeconds),
  );
  alarms[alarmIds.inboxRetryAge] = state(
    figures.some((c) => (c.oldestRetryAgeSeconds ?? 0) > limits.retryAgeSeconds),
  );
  const undelivered = Object.values(input.undelivered).reduce((n, v) => n + v, 0);
  alarms[alarmIds.undelivered] = state(undelivered >= thresholds.undeliveredEvents);
  return alarms;
}
