import { describe, expect, it } from 'vitest';
import { type LatencyModel, latencyModel } from '../../bench/support/latency-model';
import { simulateLatency } from '../../bench/support/latency-simulation';

/** A model where every hop takes exactly `ms` (one point at every fraction). */
const fixed = (ms: Partial<Record<keyof LatencyModel, number>>): LatencyModel =>
  Object.fromEntries(
    Object.entries(latencyModel).map(([hop, d]) => {
      const v = ms[hop as keyof LatencyModel] ?? 0;
      return [
        hop,
        {
          ...d,
          points: [
            [0, v],
            [1, v],
          ],
        },
      ];
    }),
  ) as unknown as LatencyModel;

describe('the latency simulation of the AWS path', () => {
  it('is the same for the same seed', () => {
    expect(simulateLatency({ approvals: 500, rate: 20, seed: 7 })).toEqual(
      simulateLatency({ approvals: 500, rate: 20, seed: 7 }),
    );
  });

  it('adds the hops of the caller path once each: gateway, invoke, a cold start, the one Data API call, the nudge', () => {
    const model = fixed({
      apiGateway: 20,
      lambdaInvoke: 2,
      coldStart: 300,
      dataApiCall: 100,
      lambdaInvokeApi: 8,
    });
    // One approval: a cold environment, no run holding the lease: it nudges.
    const one = simulateLatency({ approvals: 1, rate: 1, model });
    expect(one.approveP50Ms).toBe(20 + 2 + 300 + 100 + 8);
    expect(one.nudges).toBe(1);
    expect(one.coldStarts.tasksApi).toBe(1);
  });

  it('under a steady load, a relay run drains what commits while it holds the lease: few runs, few nudges', () => {
    const busy = simulateLatency({ approvals: 100 * 120, rate: 100 });
    expect(busy.relayRuns).toBeLessThan(20);
    expect(busy.nudges).toBeLessThan(busy.approvals / 10);
    // Every effect comes after the approve answered, at every quantile here.
    expect(busy.effectsP50Ms).toBeGreaterThan(busy.approveP50Ms);
  });

  it('an event waits for the relay round in flight: with 100 ms calls, request -> effects exceeds the sum of one pass', () => {
    const model = fixed({
      dataApiCall: 100,
      putEvents: 30,
      eventDelivery: 130,
      dynamoDbCall: 8,
      s3Put: 30,
      snsPublish: 8,
    });
    const sim = simulateLatency({ approvals: 2_000, rate: 100, model });
    // Commit (100) + claim (100) + PutEvents (30) + delivery (130) + archive (8 + 100 + 30 + 8) at the least.
    expect(sim.effectsP50Ms).toBeGreaterThanOrEqual(100 + 100 + 30 + 130 + 146);
    // ...and at most one more round (claim, PutEvents, mark: 230) plus the wait for it.
    expect(sim.effectsP99Ms).toBeLessThanOrEqual(100 + 2 * 230 + 100 + 130 + 146 + 100);
  });
});
