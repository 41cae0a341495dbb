import { topology } from '../../functions/topology';
import { inboxHealthThresholds } from '../../shared/inbox/settings';
import { alarmIds } from '../../shared/ops/alarm-ids';
import type { AlarmState, InboxStatusCounts } from '../../shared/ops/ops-ports';
import type { OutboxStats } from '../../shared/outbox/outbox-store';
import type { AlarmThresholds, ConsumerName, Topology } from '../../shared/topology';

/**
 * What the local alarm evaluation reads: the live figures (null where their store could not be
 * read) and the runners' records.
 */
export interface AlarmInputs {
  readonly outbox: OutboxStats | null;
  readonly consumers: Readonly<Record<ConsumerName, InboxStatusCounts>> | null;
  readonly deadLetters: number | null;
  /** Delivered events the audit found missing, per consumer. */
  readonly undelivered: Readonly<Record<ConsumerName, number>> | null;
  /** Effects the audit found of events that have no outbox row (shared/audit/foreign-effects.ts). */
  readonly foreignEffects?: number | null;
  /** Failed runs of the local delivery audit within the alarm's period (`thresholds.periodSeconds`). */
  readonly auditErrors: number;
  /** Failed relay runs within the alarm's period, as CloudWatch sums the function's Errors per period. */
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
 * `relaySilentSweeps` sweep periods) alarms as missing data does on AWS, and an alarm whose
 * figure could not be read (its store is down) is INSUFFICIENT_DATA, as CloudWatch says of an
 * alarm without data points, never OK. The consumers' `policies` set the inbox thresholds.
 */
export function evaluateAlarms(
  input: AlarmInputs,
  thresholds: AlarmThresholds = topology.alarms,
  policies: Topology['consumers'] = topology.consumers,
): Record<string, AlarmState> {
  const state = (breaching: boolean): AlarmState => (breaching ? 'ALARM' : 'OK');
  const on = <T>(figure: T | null, breaching: (figure: T) => boolean): AlarmState =>
    figure === null ? 'INSUFFICIENT_DATA' : state(breaching(figure));
  const silentAfterMs = thresholds.relaySilentSweeps * input.sweepMs;
  const lastSign = input.relayLastRunAt ?? input.startedAt;
  const { outbox, consumers, undelivered } = input;
  const alarms: Record<string, AlarmState> = {
    [alarmIds.oldestPendingAge]: on(
      outbox,
      (o) => o.oldestPendingAgeSeconds > thresholds.oldestPendingAgeSeconds,
    ),
    [alarmIds.outboxDead]: on(outbox, (o) => o.dead >= thresholds.deadEvents),
    [alarmIds.relayErrors]: state(input.relayErrors >= thresholds.relayErrors),
    [alarmIds.relaySilent]: state(input.now.getTime() - lastSign.getTime() > silentAfterMs),
    [alarmIds.deadLetters]: on(input.deadLetters, (n) => n >= thresholds.dlqMessages),
    [alarmIds.auditErrors]: state(input.auditErrors >= 1),
    // One found is one too many: no event reaches a consumer but through the outbox.
    [alarmIds.foreignEffects]: on(
      input.foreignEffects === undefined ? 0 : input.foreignEffects,
      (n) => n >= 1,
    ),
  };
  const limits = inboxHealthThresholds({ alarms: thresholds, consumers: policies });
  // One alarm each for every consumer, as on AWS (the sum of DEAD records, the largest age
  // against the threshold); the status's per-consumer figures say whose.
  alarms[alarmIds.inboxDead] = on(
    consumers,
    (c) => Object.values(c).reduce((n, f) => n + f.dead, 0) >= thresholds.inboxDeadRecords,
  );
  alarms[alarmIds.inboxOldestLease] = on(consumers, (c) =>
    Object.values(c).some((f) => (f.oldestLeaseSeconds ?? 0) > limits.oldestLeaseSeconds),
  );
  alarms[alarmIds.inboxRetryAge] = on(consumers, (c) =>
    Object.values(c).some((f) => (f.oldestRetryAgeSeconds ?? 0) > limits.retryAgeSeconds),
  );
  alarms[alarmIds.undelivered] = on(
    undelivered,
    (u) => Object.values(u).reduce((n, v) => n + v, 0) >= thresholds.undeliveredEvents,
  );
  return alarms;
}
