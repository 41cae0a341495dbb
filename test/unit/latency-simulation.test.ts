import { describe, expect, it } from 'vitest';
import { type LatencyModel, latencyModel } from '../../bench/support/latency-model';
import { consumerCalls, simulateLatency } from '../../bench/support/latency-simulation';
import { topology } from '../../functions/topology';
import { defineConsumer } from '../../shared/consumers/define-consumer';
import { bucket, database, table, topic } from '../../shared/consumers/resources';

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
    // The slowest consumer's calls: with these figures, its inbox's (8 each) around its effect's.
    const slowest = Math.max(
      ...topology.registry.map((c) =>
        consumerCalls(c).reduce((ms, hop) => ms + (model[hop].points[0]?.[1] ?? 0), 0),
      ),
    );
    expect(slowest).toBeGreaterThan(2 * 8);
    // Commit (100) + claim (100) + PutEvents (30) + delivery (130) + the slowest consumer at the least.
    expect(sim.effectsP50Ms).toBeGreaterThanOrEqual(100 + 100 + 30 + 130 + slowest);
    // ...and at most one more round (claim, PutEvents, mark: 230) plus the wait for it.
    expect(sim.effectsP99Ms).toBeLessThanOrEqual(100 + 2 * 230 + 100 + 130 + slowest + 100);
  });

  it("a consumer's calls are its inbox's begin and complete around what its declared resources take, reads first", () => {
    const fixture = defineConsumer({
      name: 'fixture',
      description: 'A consumer only this test declares',
      subscribes: [topology.eventTypes.approved],
      folder: new URL('.', import.meta.url),
      resources: {
        news: topic({ description: 'x', displayName: 'x', perEvent: { publishes: 2 } }),
        items: table({ description: 'x', partitionKey: 'id', perEvent: { reads: 1, writes: 2, itemKb: 1 } }),
        objects: bucket({ description: 'x', perEvent: { puts: 1 } }),
        tasks: database({ description: 'x', role: 'taskReader', perEvent: { calls: 1 } }),
      },
    });

    expect(consumerCalls(fixture)).toEqual([
      'dynamoDbCall', // the inbox's begin
      'dynamoDbCall', // the table's get
      'dataApiCall',
      'snsPublish',
      'snsPublish',
      'dynamoDbCall', // the table's puts
      'dynamoDbCall',
      's3Put',
      'dynamoDbCall', // the inbox's complete
    ]);
  });

  it('runs every consumer of the registry that takes content.approved, each with its environments', () => {
    const fixture = defineConsumer({
      name: 'fixture',
      description: 'A consumer only this test declares',
      subscribes: [topology.eventTypes.approved],
      folder: new URL('.', import.meta.url),
      resources: { tasks: database({ description: 'x', role: 'taskReader', perEvent: { calls: 3 } }) },
    });
    const model = fixed({ dataApiCall: 100, coldStart: 300 });

    const base = simulateLatency({ approvals: 1, rate: 1, model });
    const withFixture = simulateLatency({
      approvals: 1,
      rate: 1,
      model,
      registry: [...topology.registry, fixture],
    });

    expect(Object.keys(withFixture.coldStarts)).toEqual([...Object.keys(base.coldStarts), 'fixture']);
    expect(withFixture.coldStarts.fixture).toBe(1);
    // Every consumer starts cold on the event at the same time: the last to finish is the one
    // with the most Data API calls, now the fixture's three.
    const mostCalls = Math.max(
      ...topology.registry.map((c) => consumerCalls(c).filter((hop) => hop === 'dataApiCall').length),
    );
    expect(mostCalls).toBeLessThan(3);
    expect(withFixture.effectsP50Ms - base.effectsP50Ms).toBe((3 - mostCalls) * 100);
  });
});
