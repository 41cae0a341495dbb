import { randomUUID } from 'node:crypto';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { EventBridgeEvent } from 'aws-lambda';
import { beforeEach, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { createConsumer } from '../../shared/consumers/consumer';
import { consumerMetricNames, consumerServiceName } from '../../shared/consumers/contract';
import type { ConsumerEffect } from '../../shared/consumers/effect';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { maxErrorBytes } from '../../shared/inbox/dynamo-inbox-table';
import { payloadHash } from '../../shared/inbox/payload-hash';
import { poisonKey } from '../../shared/inbox/process-once';
import { metricsNamespace } from '../../shared/outbox/relay-metrics';
import type { ConsumerName } from '../../shared/topology';
import { describeEachEngine } from '../support/dynamo';
import {
  approvedRow,
  busEvent,
  lambdaContext,
  RecordingLogger,
  TestClock,
  takeMetrics,
  testInboxSettings,
  withdrawnRow,
} from '../support/dynamo-consumer-fixtures';

type AnyEvent = EventBridgeEvent<string, unknown>;

describeEachEngine('consumer poison handling', (fixture) => {
  let inbox: DynamoInboxStore;
  let inboxOps: DynamoInboxOps;
  let effectCalls: number;

  beforeEach(() => {
    inbox = new DynamoInboxStore(fixture().client, fixture().inbox);
    inboxOps = new DynamoInboxOps(fixture().client, fixture().inbox);
    effectCalls = 0;
  });

  function build(name: ConsumerName = 'index') {
    const effect: ConsumerEffect = async () => {
      effectCalls++;
      return {};
    };
    const metrics = new Metrics({ namespace: metricsNamespace, serviceName: consumerServiceName(name) });
    const logger = new RecordingLogger();
    // A consumer name of its own per test keeps the dead lists independent.
    const run = createConsumer({
      routes: topology,
      name,
      effect,
      inbox,
      logger,
      metrics,
      settings: testInboxSettings(),
      clock: new TestClock().read,
    });
    return { run, metrics, logger };
  }

  /** Delivers `event` twice and checks: poison once (DEAD with a reason containing `reason`), then a duplicate. */
  async function expectPoison(event: unknown, reason: string, name: ConsumerName = 'index') {
    const { run, metrics, logger } = build(name);
    const first = await run(event as AnyEvent, lambdaContext());
    expect(first).toMatchObject({ status: 'poison', consumer: name });
    expect(first.reason).toContain(reason);
    expect(takeMetrics(metrics).values).toMatchObject({
      [consumerMetricNames.poison]: 1,
      [consumerMetricNames.dead]: 1,
      [consumerMetricNames.processed]: 0,
      [consumerMetricNames.failed]: 0,
    });
    expect(logger.lines.at(-1)).toMatchObject({ level: 'error', message: 'poison event recorded dead' });

    const detail = (event as { detail?: unknown } | null)?.detail;
    const key = poisonKey(first.eventId, payloadHash(detail ?? event ?? null));
    const record = await inboxOps.get({ consumer: name, eventId: key });
    expect(record).toMatchObject({ status: 'DEAD', poison: true, attempts: 0 });
    expect(record?.lastError).toContain(reason);
    expect(record?.event).toEqual(event);

    // Never retried: the next delivery of the same poison is acknowledged as a duplicate.
    expect(await run(event as AnyEvent, lambdaContext())).toMatchObject({ status: 'duplicate' });
    expect(takeMetrics(metrics).values).toMatchObject({
      [consumerMetricNames.poison]: 0,
      [consumerMetricNames.duplicate]: 1,
    });
    expect(effectCalls).toBe(0);
    return { first, key };
  }

  it('a CloudEvent that breaks the schema is poison', async () => {
    const event = busEvent(approvedRow());
    const detail = event.detail as { data: Record<string, unknown> };
    delete detail.data.title;
    await expectPoison(event, 'detail is not a pipeline CloudEvent: data.title');
  });

  it('something that is not an EventBridge event at all is poison too', async () => {
    const { first } = await expectPoison({ hello: 'world' }, 'not an EventBridge event');
    expect(first.eventId).toBe('unknown');
  });

  it('an event from another source is poison', async () => {
    const event = { ...busEvent(approvedRow()), source: 'someone.else' };
    await expectPoison(event, 'source someone.else');
  });

  it('a subject that disagrees with data.taskId is poison', async () => {
    const event = busEvent(approvedRow());
    (event.detail as { subject: string }).subject = randomUUID();
    await expectPoison(event, 'disagrees with data.taskId');
  });

  it('an event id in data that disagrees with the CloudEvent id is poison', async () => {
    const event = busEvent(approvedRow());
    (event.detail as { data: Record<string, unknown> }).data.eventId = randomUUID();
    await expectPoison(event, 'disagrees with data.eventId');
  });

  it('a huge id, source or detail-type still records the poison: its reason is bounded to fit the item', async () => {
    // With the stored event (truncated to 64 KB) a reason this long would pass DynamoDB's
    // 400 KB item limit, and the poison write would fail as a store error, retried for ever.
    const huge = 'x'.repeat(380 * 1024);
    const spoil: Record<string, (event: Record<string, unknown>) => void> = {
      'an event id in data': (e) => {
        (e.detail as { data: Record<string, unknown> }).data.eventId = huge;
      },
      'a source': (e) => {
        e.source = huge;
      },
      // Two bytes a character: the cut must fall between characters, not inside one.
      'a detail-type': (e) => {
        e['detail-type'] = 'é'.repeat(huge.length / 2);
      },
    };
    for (const [what, mutate] of Object.entries(spoil)) {
      const event = busEvent(approvedRow()) as unknown as Record<string, unknown>;
      mutate(event);
      const { run } = build();
      const first = await run(event as unknown as AnyEvent, lambdaContext());
      expect(first, what).toMatchObject({ status: 'poison' });
      const record = await inboxOps.get({
        consumer: 'index',
        eventId: poisonKey(first.eventId, payloadHash(event.detail)),
      });
      expect(record, what).toMatchObject({ status: 'DEAD', poison: true });
      expect(Buffer.byteLength(record?.lastError ?? ''), what).toBeLessThanOrEqual(maxErrorBytes);
      expect(record?.lastError, what).toMatch(/…$/);
      expect(record?.lastError, what).not.toContain('\ufffd');
    }
    expect(effectCalls).toBe(0);
  });

  it('a detail-type that disagrees with the CloudEvent type is poison', async () => {
    const event = { ...busEvent(approvedRow()), 'detail-type': 'content.withdrawn' };
    await expectPoison(event, 'disagrees with CloudEvent type');
  });

  it('an event type no rule routes to this consumer is poison', async () => {
    await expectPoison(
      busEvent(withdrawnRow()),
      'no rule routes content.withdrawn to consumer notify',
      'notify',
    );
  });

  it('a changed payload under a processed event id is poison; the processed record stays', async () => {
    const { run, metrics } = build();
    const row = approvedRow();
    expect(await run(busEvent(row), lambdaContext())).toMatchObject({ status: 'processed' });
    takeMetrics(metrics);
    const changed = busEvent({ ...row, payload: { ...(row.payload as object), version: 7 } });
    const outcome = await run(changed, lambdaContext());
    expect(outcome).toMatchObject({ status: 'poison', eventId: row.eventId });
    expect(outcome.reason).toContain('payload differs');
    expect(takeMetrics(metrics).values).toMatchObject({
      [consumerMetricNames.poison]: 1,
      [consumerMetricNames.dead]: 1,
    });
    expect(await inboxOps.get({ consumer: 'index', eventId: row.eventId })).toMatchObject({
      status: 'PROCESSED',
    });
    expect(await run(changed, lambdaContext())).toMatchObject({ status: 'duplicate' });
    expect(effectCalls).toBe(1);
  });

  it('poison records are listed as dead with their reason, and a redrive just records them dead again', async () => {
    const event = busEvent(approvedRow());
    (event.detail as { subject: string }).subject = randomUUID();
    const { run } = build('archive');
    const first = await run(event, lambdaContext());
    const dead = (await inboxOps.listDead('archive', { limit: 1000 })).records.find(
      (r) => r.cloudEventId === first.eventId,
    );
    expect(dead?.lastError).toContain('disagrees with data.taskId');
    const redriven = await inboxOps.redrive(dead ?? { consumer: 'archive', eventId: 'missing' }, Date.now());
    expect(await run(redriven.event as AnyEvent, lambdaContext())).toMatchObject({ status: 'poison' });
    expect(await inboxOps.get(redriven)).toMatchObject({ status: 'DEAD' });
    expect(effectCalls).toBe(0);
  });
});
