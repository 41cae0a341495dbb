import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { beforeEach, expect, it } from 'vitest';
import { type Notification, notifyEffect } from '../../functions/consumers/notify/effect';
import { topology } from '../../functions/topology';
import { FilePublisher } from '../../infra/local/consumer-resources/file-publisher';
import { createConsumer } from '../../shared/consumers/consumer';
import type { Publisher, TopicMessage } from '../../shared/consumers/resources';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import type { InboxStore } from '../../shared/inbox/inbox-store';
import { metricsNamespace } from '../../shared/outbox/relay-metrics';
import { describeEachEngine } from '../support/dynamo';
import {
  approvedRow,
  busEvent,
  lambdaContext,
  RecordingLogger,
  TestClock,
  testInboxSettings,
} from '../support/dynamo-consumer-fixtures';

describeEachEngine('notify consumer', (fixture) => {
  let dataDir: string;
  let inbox: DynamoInboxStore;
  let clock: TestClock;

  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'notify-consumer-'));
    inbox = new DynamoInboxStore(fixture().client, fixture().inbox);
    clock = new TestClock();
    return () => rmSync(dataDir, { recursive: true, force: true });
  });

  function build(publisher: Publisher, overrides: { inbox?: InboxStore } = {}) {
    return createConsumer({
      routes: topology,
      name: 'notify',
      effect: notifyEffect(publisher),
      inbox: overrides.inbox ?? inbox,
      logger: new RecordingLogger(),
      metrics: new Metrics({ namespace: metricsNamespace, serviceName: 'consumer-notify' }),
      settings: testInboxSettings(),
      clock: clock.read,
    });
  }

  const crashingInbox = (): InboxStore =>
    Object.assign(Object.create(inbox) as InboxStore, {
      complete: async () => {
        throw new Error('killed between send and record');
      },
    });

  const file = () => new FilePublisher(join(dataDir, 'notifications.jsonl'));
  const lines = () =>
    readFileSync(join(dataDir, 'notifications.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as TopicMessage & { readonly body: Notification });

  it('appends one JSON line per approval, carrying the event id and the task id', async () => {
    const row = approvedRow({ title: 'Launch post', assignee: 'ana' });
    const result = await build(file())(busEvent(row), lambdaContext());
    expect(result).toMatchObject({ status: 'processed', effect: { outcome: 'sent' } });
    expect(lines()).toEqual([
      expect.objectContaining({
        id: row.eventId,
        body: expect.objectContaining({
          eventId: row.eventId,
          taskId: row.aggregateId,
          assignee: 'ana',
          message: '"Launch post" was approved by rita; assigned to ana',
        }),
      }),
    ]);
  });

  it('a duplicate delivery does not notify twice', async () => {
    const row = approvedRow();
    const run = build(file());
    await run(busEvent(row), lambdaContext());
    await run(busEvent(row), lambdaContext());
    expect(lines()).toHaveLength(1);
  });

  it('a crash between send and record: the retry sends again, and the local channel dedupes it', async () => {
    const row = approvedRow();
    await expect(build(file(), { inbox: crashingInbox() })(busEvent(row), lambdaContext())).rejects.toThrow(
      'killed',
    );
    clock.advance(testInboxSettings().leaseMs + 1);
    expect(await build(file())(busEvent(row), lambdaContext())).toMatchObject({
      status: 'processed',
      effect: { outcome: 'duplicate' },
    });
    expect(lines()).toHaveLength(1);
  });

  it('with a channel that cannot dedupe, that crash repeats the notification: at least once, never lost', async () => {
    const sent: string[] = [];
    const plain: Publisher = {
      publish: async (m) => {
        sent.push(m.id);
        return 'sent';
      },
    };
    const row = approvedRow();
    await expect(build(plain, { inbox: crashingInbox() })(busEvent(row), lambdaContext())).rejects.toThrow(
      'killed',
    );
    clock.advance(testInboxSettings().leaseMs + 1);
    await build(plain)(busEvent(row), lambdaContext());
    await build(plain)(busEvent(row), lambdaContext());
    expect(sent).toEqual([row.eventId, row.eventId]);
  });
});
