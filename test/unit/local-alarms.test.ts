import { describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { type AlarmInputs, evaluateAlarms } from '../../infra/local/local-alarms';
import { inboxHealthThresholds } from '../../shared/inbox/settings';
import { alarmIds } from '../../shared/ops/alarm-ids';
import type { InboxStatusCounts } from '../../shared/ops/ops-ports';
import type { OutboxStats } from '../../shared/outbox/outbox-store';
import { type ConsumerName, consumerPolicyOf } from '../../shared/topology';

const t = topology.alarms;
const now = new Date('2026-11-30T12:00:00Z');
const periodMs = topology.relay.sweepSeconds * 1_000;
const silentSweeps = t.relaySilentSweeps;
const consumerNames = Object.keys(topology.consumers) as ConsumerName[];

const healthyInbox: InboxStatusCounts = {
  processed: 10,
  inProgress: 0,
  failed: 0,
  dead: 0,
  oldestLeaseSeconds: null,
  oldestRetryAgeSeconds: null,
};

/** Alarm inputs with every figure read. */
type ReadInputs = AlarmInputs & {
  readonly outbox: OutboxStats;
  readonly consumers: Readonly<Record<ConsumerName, InboxStatusCounts>>;
  readonly undelivered: Readonly<Record<ConsumerName, number>>;
};

/** Figures of a healthy pipeline whose relay just ran; each test breaks one of them. */
function healthy(overrides: Partial<AlarmInputs> = {}): ReadInputs {
  return {
    outbox: { pending: 0, dead: 0, oldestPendingAgeSeconds: 0, nextDueInMs: null },
    consumers: Object.fromEntries(consumerNames.map((c) => [c, healthyInbox])) as Record<
      ConsumerName,
      InboxStatusCounts
    >,
    deadLetters: 0,
    undelivered: { index: 0, notify: 0, archive: 0 },
    auditErrors: 0,
    relayErrors: 0,
    relayLastRunAt: new Date(now.getTime() - 1_000),
    now,
    startedAt: new Date(now.getTime() - 10 * periodMs),
    sweepMs: periodMs,
    ...overrides,
  } as ReadInputs;
}

const alarmsIn = (state: Record<string, string>) =>
  Object.entries(state)
    .filter(([, s]) => s === 'ALARM')
    .map(([name]) => name);

describe('evaluateAlarms', () => {
  it('reports every alarm OK for a healthy pipeline, each inbox alarm one for every consumer (as on AWS), and the local foreign-effects alarm', () => {
    const state = evaluateAlarms(healthy());
    expect(alarmsIn(state)).toEqual([]);
    expect(Object.keys(state).sort()).toEqual(
      [
        alarmIds.oldestPendingAge,
        alarmIds.outboxDead,
        alarmIds.relayErrors,
        alarmIds.relaySilent,
        alarmIds.deadLetters,
        alarmIds.auditErrors,
        alarmIds.inboxDead,
        alarmIds.undelivered,
        alarmIds.inboxOldestLease,
        alarmIds.inboxRetryAge,
        alarmIds.foreignEffects,
      ].sort(),
    );
  });

  it('foreignEffects alarms on the first effect of an event without an outbox row, and cannot tell when its figure is unread', () => {
    expect(evaluateAlarms(healthy({ foreignEffects: 0 }))[alarmIds.foreignEffects]).toBe('OK');
    expect(alarmsIn(evaluateAlarms(healthy({ foreignEffects: 1 })))).toEqual([alarmIds.foreignEffects]);
    expect(evaluateAlarms(healthy({ foreignEffects: null }))[alarmIds.foreignEffects]).toBe(
      'INSUFFICIENT_DATA',
    );
  });

  it('oldestPendingAge alarms only once the oldest pending event is older than the threshold', () => {
    const at = (seconds: number) =>
      evaluateAlarms(
        healthy({ outbox: { ...healthy().outbox, pending: 1, oldestPendingAgeSeconds: seconds } }),
      );
    expect(at(t.oldestPendingAgeSeconds)[alarmIds.oldestPendingAge]).toBe('OK');
    expect(at(t.oldestPendingAgeSeconds + 1)[alarmIds.oldestPendingAge]).toBe('ALARM');
    expect(alarmsIn(at(t.oldestPendingAgeSeconds + 1))).toEqual([alarmIds.oldestPendingAge]);
  });

  it('outboxDead alarms from the dead-event threshold on', () => {
    const at = (dead: number) => evaluateAlarms(healthy({ outbox: { ...healthy().outbox, dead } }));
    expect(at(t.deadEvents - 1)[alarmIds.outboxDead]).toBe('OK');
    expect(at(t.deadEvents)[alarmIds.outboxDead]).toBe('ALARM');
    expect(alarmsIn(at(t.deadEvents))).toEqual([alarmIds.outboxDead]);
  });

  it('relayErrors alarms from the relay-error threshold on', () => {
    expect(evaluateAlarms(healthy({ relayErrors: t.relayErrors - 1 }))[alarmIds.relayErrors]).toBe('OK');
    expect(evaluateAlarms(healthy({ relayErrors: t.relayErrors }))[alarmIds.relayErrors]).toBe('ALARM');
    expect(alarmsIn(evaluateAlarms(healthy({ relayErrors: t.relayErrors })))).toEqual([alarmIds.relayErrors]);
  });

  it('deadLetters alarms from the DLQ-message threshold on', () => {
    expect(evaluateAlarms(healthy({ deadLetters: t.dlqMessages - 1 }))[alarmIds.deadLetters]).toBe('OK');
    expect(evaluateAlarms(healthy({ deadLetters: t.dlqMessages }))[alarmIds.deadLetters]).toBe('ALARM');
    expect(alarmsIn(evaluateAlarms(healthy({ deadLetters: t.dlqMessages })))).toEqual([alarmIds.deadLetters]);
  });

  it.each(consumerNames)(
    'inbox-dead alarms once %s has DEAD records, from the dead-record threshold on',
    (name) => {
      const withDead = (dead: number) =>
        evaluateAlarms(healthy({ consumers: { ...healthy().consumers, [name]: { ...healthyInbox, dead } } }));
      expect(withDead(t.inboxDeadRecords - 1)[alarmIds.inboxDead]).toBe('OK');
      expect(alarmsIn(withDead(t.inboxDeadRecords))).toEqual([alarmIds.inboxDead]);
    },
  );

  it('inbox-dead counts the DEAD records of every consumer together, as the AWS alarm watches their sum', () => {
    const [first, second] = consumerNames as [ConsumerName, ConsumerName];
    const oneEach = healthy({
      consumers: {
        ...healthy().consumers,
        [first]: { ...healthyInbox, dead: 1 },
        [second]: { ...healthyInbox, dead: 1 },
      },
    });
    expect(evaluateAlarms(oneEach, { ...t, inboxDeadRecords: 2 })[alarmIds.inboxDead]).toBe('ALARM');
    expect(evaluateAlarms(oneEach, { ...t, inboxDeadRecords: 3 })[alarmIds.inboxDead]).toBe('OK');
  });

  it.each(consumerNames)(
    'inbox-oldest-lease alarms once the oldest lease of %s is past five lease periods',
    (name) => {
      const held = (seconds: number) =>
        evaluateAlarms(
          healthy({
            consumers: {
              ...healthy().consumers,
              [name]: { ...healthyInbox, inProgress: 1, oldestLeaseSeconds: seconds },
            },
          }),
        );
      const limit = inboxHealthThresholds(topology).oldestLeaseSeconds;
      expect(limit).toBe(t.oldestLeasePeriods * 30);
      expect(held(limit)[alarmIds.inboxOldestLease]).toBe('OK');
      expect(alarmsIn(held(limit + 1))).toEqual([alarmIds.inboxOldestLease]);
    },
  );

  it.each(consumerNames)(
    'inbox-retry-age alarms once the oldest FAILED record of %s is past a quarter of its event age',
    (name) => {
      const waited = (seconds: number) =>
        evaluateAlarms(
          healthy({
            consumers: {
              ...healthy().consumers,
              [name]: { ...healthyInbox, failed: 1, oldestRetryAgeSeconds: seconds },
            },
          }),
        );
      const limit = inboxHealthThresholds(topology).retryAgeSeconds;
      expect(limit).toBe(consumerPolicyOf(topology, name).maxEventAgeSeconds * t.retryAgeShare);
      expect(waited(limit)[alarmIds.inboxRetryAge]).toBe('OK');
      expect(alarmsIn(waited(limit + 1))).toEqual([alarmIds.inboxRetryAge]);
    },
  );

  it('an inbox with failed or in-progress records but none dead, none stuck, does not alarm', () => {
    const busy = {
      processed: 0,
      inProgress: 5,
      failed: 5,
      dead: 0,
      oldestLeaseSeconds: 3,
      oldestRetryAgeSeconds: 60,
    };
    const consumers = Object.fromEntries(consumerNames.map((c) => [c, busy])) as Record<
      ConsumerName,
      InboxStatusCounts
    >;
    expect(alarmsIn(evaluateAlarms(healthy({ consumers })))).toEqual([]);
  });

  it.each(consumerNames)(
    'undelivered alarms from the first delivered event the audit found missing from %s',
    (name) => {
      const missing = (n: number) =>
        evaluateAlarms(healthy({ undelivered: { ...healthy().undelivered, [name]: n } }));
      expect(t.undeliveredEvents).toBe(1);
      expect(missing(0)[alarmIds.undelivered]).toBe('OK');
      expect(alarmsIn(missing(1))).toEqual([alarmIds.undelivered]);
    },
  );

  it('delivery-audit-errors alarms once an audit run failed', () => {
    expect(alarmsIn(evaluateAlarms(healthy({ auditErrors: 1 })))).toEqual([alarmIds.auditErrors]);
  });

  it('relaySilent alarms after relaySilentSweeps sweep periods without a run, not at exactly that', () => {
    const lastRun = (msAgo: number) =>
      evaluateAlarms(healthy({ relayLastRunAt: new Date(now.getTime() - msAgo) }))[alarmIds.relaySilent];
    expect(lastRun(periodMs)).toBe('OK');
    expect(lastRun(silentSweeps * periodMs)).toBe('OK');
    expect(lastRun(silentSweeps * periodMs + 1)).toBe('ALARM');
  });

  it('relaySilent counts from the start when the relay has not run yet', () => {
    const sinceStart = (msAgo: number) =>
      evaluateAlarms(healthy({ relayLastRunAt: undefined, startedAt: new Date(now.getTime() - msAgo) }))[
        alarmIds.relaySilent
      ];
    expect(sinceStart(periodMs)).toBe('OK');
    expect(sinceStart(silentSweeps * periodMs)).toBe('OK');
    expect(sinceStart(silentSweeps * periodMs + 1)).toBe('ALARM');
  });

  it('relaySilent goes by the last run, not the start, once the relay has run', () => {
    const state = evaluateAlarms(
      healthy({
        startedAt: new Date(now.getTime() - 10 * periodMs),
        relayLastRunAt: new Date(now.getTime() - 1),
      }),
    );
    expect(state[alarmIds.relaySilent]).toBe('OK');
  });

  it('says INSUFFICIENT_DATA, never OK, for the alarms whose figures could not be read', () => {
    const state = evaluateAlarms(healthy({ consumers: null, deadLetters: null }));
    const insufficient = Object.keys(state).filter((n) => state[n] === 'INSUFFICIENT_DATA');
    expect(insufficient.sort()).toEqual(
      [alarmIds.deadLetters, alarmIds.inboxDead, alarmIds.inboxOldestLease, alarmIds.inboxRetryAge].sort(),
    );
    expect(evaluateAlarms(healthy({ outbox: null }))[alarmIds.oldestPendingAge]).toBe('INSUFFICIENT_DATA');
    expect(evaluateAlarms(healthy({ undelivered: null }))[alarmIds.undelivered]).toBe('INSUFFICIENT_DATA');
  });

  it('takes its thresholds from the argument when given one', () => {
    const strict = { ...t, oldestPendingAgeSeconds: 10 };
    const input = healthy({ outbox: { ...healthy().outbox, pending: 1, oldestPendingAgeSeconds: 11 } });
    expect(evaluateAlarms(input)[alarmIds.oldestPendingAge]).toBe('OK');
    expect(evaluateAlarms(input, strict)[alarmIds.oldestPendingAge]).toBe('ALARM');
  });
});
