import { describe, expect, it } from 'vitest';
import { consumerDimension, inboxGaugeMetricNames } from '../../shared/consumers/contract';
import { emitInboxGauges, inboxGaugeAlarmIds } from '../../shared/inbox/inbox-gauges';
import type { OpenFigure, OpenFigures } from '../../shared/inbox/inbox-ops';
import { alarmIds } from '../../shared/ops/alarm-ids';
import type { ConsumerName } from '../../shared/topology';

const consumers: ConsumerName[] = ['index', 'notify', 'archive'];
const now = Date.parse('2026-11-30T12:00:00.000Z');
const { dead, failed, oldestLease, retryAge } = inboxGaugeMetricNames;

/** A Metrics stand-in that keeps each published document: its consumer (or `all`) and its metrics. */
function recordingMetrics() {
  const sent: { consumer: string; metrics: Record<string, number> }[] = [];
  let consumer = 'all';
  let metrics: Record<string, number> = {};
  return {
    sent,
    metrics: {
      addDimension: (name: string, v: string) => {
        if (name === consumerDimension) consumer = v;
      },
      addMetric: (name: string, _unit: unknown, v: number) => {
        metrics[name] = v;
      },
      // Powertools clears the dimensions added since the last publish.
      publishStoredMetrics: () => {
        sent.push({ consumer, metrics });
        metrics = {};
        consumer = 'all';
      },
    },
  };
}

const none: OpenFigure = { count: 0, oldestSince: null };
const figures = (open: Partial<Record<ConsumerName, Partial<OpenFigures>>>) => ({
  openFigures: async (c: string): Promise<OpenFigures> => ({
    PROCESSING: none,
    FAILED: none,
    DEAD: none,
    ...open[c as ConsumerName],
  }),
});
const everyAlarmOk = new Set(inboxGaugeAlarmIds());
const allOkBut = (...ids: string[]) => new Set([...everyAlarmOk].filter((id) => !ids.includes(id)));

describe('inbox gauges', () => {
  it('send every consumer’s figures and, for the alarms, the DEAD sum and the largest ages of all of them, when one is above zero', async () => {
    const m = recordingMetrics();
    const report = await emitInboxGauges({
      inbox: figures({
        notify: { DEAD: { count: 2, oldestSince: now - 50_000 } },
        archive: {
          PROCESSING: { count: 3, oldestSince: now - 200_500 },
          FAILED: { count: 4, oldestSince: now - 7_200_000 },
          DEAD: { count: 1, oldestSince: now - 10_000 },
        },
        index: { FAILED: { count: 1, oldestSince: now - 60_000 } },
      }),
      metrics: m.metrics as never,
      consumers,
      okAlarms: async () => everyAlarmOk,
      clock: () => now,
    });
    expect(m.sent).toEqual([
      { consumer: 'index', metrics: { [dead]: 0, [oldestLease]: 0, [retryAge]: 60, [failed]: 1 } },
      { consumer: 'notify', metrics: { [dead]: 2, [oldestLease]: 0, [retryAge]: 0, [failed]: 0 } },
      { consumer: 'archive', metrics: { [dead]: 1, [oldestLease]: 200, [retryAge]: 7_200, [failed]: 4 } },
      // What the inbox-dead, inbox-oldest-lease and inbox-retry-age alarms watch: the DEAD sum,
      // the largest ages (the FAILED sum rides along).
      { consumer: 'all', metrics: { [dead]: 3, [oldestLease]: 200, [retryAge]: 7_200, [failed]: 5 } },
    ]);
    expect(report.sent).toEqual(['dead', 'lease', 'retry']);
    expect(report.consumers.archive).toEqual({
      inProgress: 3,
      failed: 4,
      dead: 1,
      oldestLeaseSeconds: 200,
      oldestRetryAgeSeconds: 7_200,
    });
    expect(report.consumers.index?.oldestLeaseSeconds).toBeNull();
  });

  it('send one consumer’s DEAD records as that consumer’s count and, for the one inbox-dead alarm, the sum without the Consumer dimension', async () => {
    const m = recordingMetrics();
    const report = await emitInboxGauges({
      inbox: figures({ notify: { DEAD: { count: 2, oldestSince: now - 50_000 } } }),
      metrics: m.metrics as never,
      consumers,
      okAlarms: async () => everyAlarmOk,
      clock: () => now,
    });
    expect(m.sent).toEqual([
      { consumer: 'index', metrics: { [dead]: 0 } },
      { consumer: 'notify', metrics: { [dead]: 2 } },
      { consumer: 'archive', metrics: { [dead]: 0 } },
      { consumer: 'all', metrics: { [dead]: 2 } },
    ]);
    expect(report.sent).toEqual(['dead']);
  });

  it('send a zero only for a figure whose alarm is not OK yet (its records were just redriven or taken over)', async () => {
    const m = recordingMetrics();
    await emitInboxGauges({
      inbox: figures({}),
      metrics: m.metrics as never,
      consumers,
      okAlarms: async () => allOkBut(alarmIds.inboxDead, alarmIds.inboxOldestLease),
      clock: () => now,
    });
    expect(m.sent).toEqual([
      { consumer: 'index', metrics: { [dead]: 0, [oldestLease]: 0 } },
      { consumer: 'notify', metrics: { [dead]: 0, [oldestLease]: 0 } },
      { consumer: 'archive', metrics: { [dead]: 0, [oldestLease]: 0 } },
      { consumer: 'all', metrics: { [dead]: 0, [oldestLease]: 0 } },
    ]);
  });

  it('send nothing for an idle, healthy pipeline, nor for an attempt in flight less than a second', async () => {
    const m = recordingMetrics();
    await emitInboxGauges({
      inbox: figures({ index: { PROCESSING: { count: 1, oldestSince: now - 400 } } }),
      metrics: m.metrics as never,
      consumers,
      okAlarms: async () => everyAlarmOk,
      clock: () => now,
    });
    expect(m.sent).toEqual([]);
  });

  it('send every gauge when the alarm states cannot be read', async () => {
    const m = recordingMetrics();
    await emitInboxGauges({
      inbox: figures({}),
      metrics: m.metrics as never,
      consumers,
      okAlarms: async () => {
        throw new Error('ThrottlingException');
      },
      clock: () => now,
    });
    expect(m.sent.map((d) => d.consumer)).toEqual([...consumers, 'all']);
    for (const d of m.sent) {
      expect(Object.keys(d.metrics).sort()).toEqual(Object.values(inboxGaugeMetricNames).sort());
    }
  });
});
