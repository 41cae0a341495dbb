import { describe, expect, it } from 'vitest';
import { inboxGaugeMetricNames } from '../../shared/consumers/contract';
import { emitInboxGauges } from '../../shared/inbox/inbox-gauges';
import type { OpenCounts } from '../../shared/inbox/inbox-store';
import type { ConsumerName } from '../../shared/topology';

const consumers: ConsumerName[] = ['index', 'notify', 'archive'];

/** A Metrics stand-in that keeps each published document's dimension and value. */
function recordingMetrics() {
  const sent: { consumer: string; value: number }[] = [];
  let consumer = '';
  let value = Number.NaN;
  return {
    sent,
    metrics: {
      addDimension: (_name: string, v: string) => {
        consumer = v;
      },
      addMetric: (name: string, _unit: unknown, v: number) => {
        if (name === inboxGaugeMetricNames.dead) value = v;
      },
      publishStoredMetrics: () => void sent.push({ consumer, value }),
    },
  };
}

const counts = (dead: Partial<Record<ConsumerName, number>>) => ({
  openCounts: async (c: string): Promise<OpenCounts> => ({
    PROCESSING: 0,
    FAILED: 0,
    DEAD: dead[c as ConsumerName] ?? 0,
  }),
});

describe('inbox gauges', () => {
  it('send a count for every consumer with DEAD records, and a zero only where the alarm is not OK yet', async () => {
    const m = recordingMetrics();
    const report = await emitInboxGauges({
      inbox: counts({ notify: 2 }),
      metrics: m.metrics as never,
      consumers,
      // index's alarm is OK, archive's still ALARM (its records were just redriven).
      okAlarms: async () => new Set<ConsumerName>(['index', 'notify']),
    });
    expect(m.sent).toEqual([
      { consumer: 'notify', value: 2 },
      { consumer: 'archive', value: 0 },
    ]);
    expect(report).toEqual({
      index: { dead: 0, sent: false },
      notify: { dead: 2, sent: true },
      archive: { dead: 0, sent: true },
    });
  });

  it('send nothing for an idle, healthy pipeline', async () => {
    const m = recordingMetrics();
    await emitInboxGauges({
      inbox: counts({}),
      metrics: m.metrics as never,
      consumers,
      okAlarms: async () => new Set(consumers),
    });
    expect(m.sent).toEqual([]);
  });

  it('send every gauge when the alarm states cannot be read', async () => {
    const m = recordingMetrics();
    await emitInboxGauges({
      inbox: counts({}),
      metrics: m.metrics as never,
      consumers,
      okAlarms: async () => {
        throw new Error('ThrottlingException');
      },
    });
    expect(m.sent.map((d) => d.consumer)).toEqual(consumers);
  });
});
