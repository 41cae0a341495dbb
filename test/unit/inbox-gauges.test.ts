import { describe, expect, it } from 'vitest';
import { inboxGaugeMetricNames } from '../../shared/consumers/contract';
import { emitInboxGauges } from '../../shared/inbox/inbox-gauges';
import type { OpenFigure, OpenFigures } from '../../shared/inbox/inbox-store';
import { alarmIds } from '../../shared/ops/alarm-ids';
import type { ConsumerName } from '../../shared/topology';

const consumers: ConsumerName[] = ['index', 'notify', 'archive'];
const now = Date.parse('2026-11-30T12:00:00.000Z');

/** A Metrics stand-in that keeps each published document: its consumer and its metrics. */
function recordingMetrics() {
  const sent: { consumer: string; metrics: Record<string, number> }[] = [];
  let consumer = '';
  let metrics: Record<string, number> = {};
  return {
    sent,
    metrics: {
      addDimension: (_name: string, v: string) => {
        consumer = v;
      },
      addMetric: (name: string, _unit: unknown, v: number) => {
        metrics[name] = v;
      },
      publishStoredMetrics: () => {
        sent.push({ consumer, metrics });
        metrics = {};
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
const everyAlarmOk = new Set(
  consumers.flatMap((c) => [alarmIds.inboxDead(c), alarmIds.inboxOldestLease(c), alarmIds.inboxRetryAge(c)]),
);
const allOkBut = (...ids: string[]) => new Set([...everyAlarmOk].filter((id) => !ids.includes(id)));

describe('inbox gauges', () => {
  it('send each consumer’s figures that are above zero: DEAD count, oldest lease, retry age with the FAILED count', async () => {
    const m = recordingMetrics();
    const report = await emitInboxGauges({
      inbox: figures({
        notify: { DEAD: { count: 2, oldestSince: now - 50_000 } },
        archive: {
          PROCESSING: { count: 3, oldestSince: now - 200_500 },
          FAILED: { count: 4, oldestSince: now - 7_200_000 },
        },
      }),
      metrics: m.metrics as never,
      consumers,
      okAlarms: async () => everyAlarmOk,
      clock: () => now,
    });
    expect(m.sent).toEqual([
      { consumer: 'notify', metrics: { [inboxGaugeMetricNames.dead]: 2 } },
      {
        consumer: 'archive',
        metrics: {
          [inboxGaugeMetricNames.oldestLease]: 200,
          [inboxGaugeMetricNames.retryAge]: 7_200,
          [inboxGaugeMetricNames.failed]: 4,
        },
      },
    ]);
    expect(report.archive).toEqual({
      inProgress: 3,
      failed: 4,
      dead: 0,
      oldestLeaseSeconds: 200,
      oldestRetryAgeSeconds: 7_200,
      sent: ['lease', 'retry'],
    });
    expect(report.index).toEqual({
      inProgress: 0,
      failed: 0,
      dead: 0,
      oldestLeaseSeconds: null,
      oldestRetryAgeSeconds: null,
      sent: [],
    });
  });

  it('send a zero only for a figure whose alarm is not OK yet (its records were just redriven)', async () => {
    const m = recordingMetrics();
    await emitInboxGauges({
      inbox: figures({}),
      metrics: m.metrics as never,
      consumers,
      okAlarms: async () => allOkBut(alarmIds.inboxDead('archive'), alarmIds.inboxOldestLease('index')),
      clock: () => now,
    });
    expect(m.sent).toEqual([
      { consumer: 'index', metrics: { [inboxGaugeMetricNames.oldestLease]: 0 } },
      { consumer: 'archive', metrics: { [inboxGaugeMetricNames.dead]: 0 } },
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
    expect(m.sent.map((d) => d.consumer)).toEqual(consumers);
    for (const d of m.sent)
      expect(Object.keys(d.metrics).sort()).toEqual(Object.values(inboxGaugeMetricNames).sort());
  });
});
