import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Delivered } from '../../shared/outbox/outbox-store';
import { relayOnce } from '../../shared/outbox/relay';
import { engineEndpoint, type Harness, SimulatedCrashError, startHarness, withOverrides } from './harness';
import { scenarioTimeoutMs, sized } from './profile';

describe('guarantee: a relay that dies between PutEvents and the mark', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await startHarness({ dynamoEndpoint: engineEndpoint('dynalite').endpoint as string });
  });
  afterAll(() => harness?.stop());

  it(
    'leaves its rows to the next relay, which publishes them again; every effect still happens once',
    async () => {
      const tasks = sized(24, 300);
      await harness.approveTasks(tasks);
      const crashedBatch = Math.ceil(tasks / 2);
      const lostMarks: Delivered[] = [];
      // PutEvents was answered (the bus has the events), then the process died before any mark.
      const crashing = harness.relayDeps({
        settings: { claimBatchSize: crashedBatch },
        outbox: (outbox) =>
          withOverrides(outbox, {
            markDelivered: async (items: readonly Delivered[]) => {
              lostMarks.push(...items);
              throw new SimulatedCrashError('relay killed after PutEvents answered, before the mark');
            },
          }),
      });
      await expect(relayOnce(crashing)).rejects.toBeInstanceOf(SimulatedCrashError);

      const settled = await harness.settle();
      const report = await harness.check();

      // The fault happened: a whole batch was on the bus when the relay died, and went out again.
      expect(lostMarks).toHaveLength(crashedBatch);
      const crashed = new Set(lostMarks.map((m) => m.eventId));
      const publishes = await harness.sources().publishes?.();
      for (const id of crashed) expect(publishes?.get(id)).toHaveLength(2);
      expect(report.figures.duplicates.publish).toBe(crashedBatch);
      // The promises hold, and the inboxes absorbed every re-publish: no notification repeated.
      expect(report.violations).toEqual([]);
      expect(settled.quiet).toBe(true);
      expect(report.figures.approvedTasks).toBe(tasks);
      expect(report.figures.duplicates.notification).toBe(0);
    },
    scenarioTimeoutMs,
  );
});
