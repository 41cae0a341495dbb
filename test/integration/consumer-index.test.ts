import { Metrics } from '@aws-lambda-powertools/metrics';
import { beforeEach, expect, it } from 'vitest';
import { type ContentIndex, DynamoContentIndex, indexEffect } from '../../functions/consumers/index/effect';
import { topology } from '../../functions/topology';
import { createConsumer } from '../../shared/consumers/consumer';
import { consumerMetricNames } from '../../shared/consumers/contract';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { InboxInProgressError } from '../../shared/inbox/errors';
import type { InboxStore } from '../../shared/inbox/inbox-store';
import { metricsNamespace } from '../../shared/outbox/relay-metrics';
import { describeEachEngine } from '../support/dynamo';
import {
  approvedRow,
  busEvent,
  deferred,
  lambdaContext,
  RecordingLogger,
  TestClock,
  takeMetrics,
  testInboxSettings,
  withdrawnRow,
} from '../support/dynamo-consumer-fixtures';

describeEachEngine('index consumer', (fixture) => {
  let inbox: DynamoInboxStore;
  let inboxOps: DynamoInboxOps;
  let index: DynamoContentIndex;
  let clock: TestClock;
  /** Index writes that changed the index: the effect as the outside world sees it. */
  let applied: number;

  beforeEach(() => {
    inbox = new DynamoInboxStore(fixture().client, fixture().inbox);
    inboxOps = new DynamoInboxOps(fixture().client, fixture().inbox);
    index = new DynamoContentIndex(fixture().client, fixture().table('contentIndex'));
    clock = new TestClock();
    applied = 0;
  });

  function build(overrides: { inbox?: InboxStore; index?: ContentIndex } = {}) {
    const target = overrides.index ?? index;
    const counting: ContentIndex = {
      apply: async (entry) => {
        const done = await target.apply(entry);
        if (done.outcome === 'applied') applied++;
        return done;
      },
      get: (taskId) => target.get(taskId),
    };
    const metrics = new Metrics({ namespace: metricsNamespace, serviceName: 'consumer-index' });
    const logger = new RecordingLogger();
    const run = createConsumer({
      routes: topology,
      name: 'index',
      effect: indexEffect(counting),
      inbox: overrides.inbox ?? inbox,
      logger,
      metrics,
      settings: testInboxSettings(),
      clock: clock.read,
      random: () => 0.999,
    });
    return { run, metrics, logger };
  }

  it('indexes an approval once; a duplicate delivery is acknowledged and counted', async () => {
    const { run, metrics } = build();
    const row = approvedRow();
    const first = await run(busEvent(row), lambdaContext());
    expect(first).toMatchObject({ consumer: 'index', status: 'processed', eventId: row.eventId, attempt: 1 });
    expect(takeMetrics(metrics).values).toEqual({
      [consumerMetricNames.processed]: 1,
      [consumerMetricNames.duplicate]: 0,
      [consumerMetricNames.failed]: 0,
      [consumerMetricNames.dead]: 0,
      [consumerMetricNames.poison]: 0,
    });
    // The relay published it again: a new EventBridge id, the same CloudEvent.
    expect(await run(busEvent(row), lambdaContext())).toMatchObject({ status: 'duplicate' });
    expect(takeMetrics(metrics).values).toMatchObject({
      [consumerMetricNames.processed]: 0,
      [consumerMetricNames.duplicate]: 1,
    });
    expect(applied).toBe(1);
    expect(await index.get(row.aggregateId)).toMatchObject({
      status: 'approved',
      version: 2,
      eventId: row.eventId,
    });
  });

  it('emits its metrics under the Consumer dimension', async () => {
    const { run, metrics } = build();
    await run(busEvent(approvedRow()), lambdaContext());
    const emitted = takeMetrics(metrics);
    expect(emitted.dimensionNames).toContain('Consumer');
    expect(emitted.dimensions.Consumer).toBe('index');
  });

  it('logs every line of an invocation with the event id and its subject (the task id)', async () => {
    const { run, logger } = build();
    const row = approvedRow();
    await run(busEvent(row), lambdaContext());
    await run(busEvent(row), lambdaContext());
    expect(logger.lines.map((l) => l.message)).toEqual([
      'event processed',
      'duplicate delivery acknowledged',
    ]);
    for (const line of logger.lines) {
      expect(line.attributes).toMatchObject({
        consumer: 'index',
        eventId: row.eventId,
        subject: row.aggregateId,
      });
    }
  });

  it('withdraw arriving before approve for the same task: the index ends withdrawn', async () => {
    const { run } = build();
    const approve = approvedRow({ version: 2 });
    const withdraw = withdrawnRow({ taskId: approve.aggregateId, version: 3 });
    await run(busEvent(withdraw), lambdaContext());
    const late = await run(busEvent(approve), lambdaContext());
    // The late approve is processed (its inbox record completes), but the index refuses it.
    expect(late).toMatchObject({ status: 'processed', effect: { outcome: 'stale', version: 2 } });
    expect(await index.get(approve.aggregateId)).toMatchObject({ status: 'withdrawn', version: 3 });
    expect(applied).toBe(1);
  });

  it('a crash after the index write but before completion is retried, and the index is written once', async () => {
    const crashing: InboxStore = Object.assign(Object.create(inbox) as InboxStore, {
      complete: async () => {
        throw new Error('container killed');
      },
    });
    const row = approvedRow();
    await expect(build({ inbox: crashing }).run(busEvent(row), lambdaContext())).rejects.toThrow(
      'container killed',
    );
    clock.advance(testInboxSettings().leaseMs + 1);
    const { run } = build();
    expect(await run(busEvent(row), lambdaContext())).toMatchObject({
      status: 'processed',
      attempt: 2,
      effect: { outcome: 'stale' },
    });
    expect(applied).toBe(1);
    expect(await inboxOps.get({ consumer: 'index', eventId: row.eventId })).toMatchObject({
      status: 'PROCESSED',
    });
  });

  it('two concurrent deliveries: one indexes, the other throws InboxInProgressError for a later retry', async () => {
    const gate = deferred();
    const started = deferred();
    const slowIndex: ContentIndex = {
      apply: async (entry) => {
        started.resolve();
        await gate.promise;
        return index.apply(entry);
      },
      get: (taskId) => index.get(taskId),
    };
    const row = approvedRow();
    const { run } = build({ index: slowIndex });
    const first = run(busEvent(row), lambdaContext());
    // The effect starts only once the first delivery's inbox record has landed.
    await started.promise;
    const { run: other, metrics } = build();
    await expect(other(busEvent(row), lambdaContext())).rejects.toBeInstanceOf(InboxInProgressError);
    // Not a failure of the event: nothing counted as failed.
    expect(takeMetrics(metrics).values[consumerMetricNames.failed]).toBe(0);
    gate.resolve();
    expect(await first).toMatchObject({ status: 'processed' });
    expect(applied).toBe(1);
  });

  it('an index failure is recorded FAILED and rethrown; the retry after the backoff indexes it', async () => {
    let down = true;
    const flaky: ContentIndex = {
      apply: async (entry) => {
        if (down)
          throw Object.assign(new Error('Rate exceeded'), { name: 'ProvisionedThroughputExceededException' });
        return index.apply(entry);
      },
      get: (taskId) => index.get(taskId),
    };
    const { run, metrics, logger } = build({ index: flaky });
    const row = approvedRow();
    await expect(run(busEvent(row), lambdaContext())).rejects.toThrow('Rate exceeded');
    expect(takeMetrics(metrics).values[consumerMetricNames.failed]).toBe(1);
    expect(logger.lines.at(-1)).toMatchObject({ level: 'error', message: 'attempt failed' });
    expect(await inboxOps.get({ consumer: 'index', eventId: row.eventId })).toMatchObject({
      status: 'FAILED',
    });
    down = false;
    clock.advance(1_000);
    expect(await run(busEvent(row), lambdaContext())).toMatchObject({ status: 'processed', attempt: 2 });
    expect(applied).toBe(1);
  });

  it('after the last allowed permanent failure the event is DEAD and acknowledged (no throw)', async () => {
    const broken: ContentIndex = {
      apply: async () => {
        throw Object.assign(new Error('not authorized to perform dynamodb:PutItem'), {
          name: 'AccessDeniedException',
          $metadata: { httpStatusCode: 400 },
        });
      },
      get: (taskId) => index.get(taskId),
    };
    const { run, metrics } = build({ index: broken });
    const row = approvedRow();
    for (let attempt = 1; attempt < testInboxSettings().maxPermanentAttempts; attempt++) {
      await expect(run(busEvent(row), lambdaContext())).rejects.toThrow('not authorized');
      clock.advance(10_000);
    }
    takeMetrics(metrics);
    const last = await run(busEvent(row), lambdaContext());
    expect(last).toMatchObject({ status: 'dead', attempt: 3 });
    expect(last.reason).toContain('AccessDeniedException');
    expect(takeMetrics(metrics).values).toMatchObject({
      [consumerMetricNames.failed]: 1,
      [consumerMetricNames.dead]: 1,
    });
    expect((await inboxOps.listDead('index', { limit: 1000 })).records.map((r) => r.eventId)).toContain(
      row.eventId,
    );
  });
});
