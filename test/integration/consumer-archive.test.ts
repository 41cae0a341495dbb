import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { archiveEffect, archiveKey, type TaskSnapshot } from '../../functions/consumers/archive/effect';
import { topology } from '../../functions/topology';
import { FileWriteOnceStore } from '../../infra/local/consumer-resources/file-write-once-store';
import { createConsumer } from '../../shared/consumers/consumer';
import type { SqlClient } from '../../shared/db/sql-client';
import type { OutboundEvent } from '../../shared/events/cloud-event';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import type { InboxStore } from '../../shared/inbox/inbox-store';
import { metricsNamespace } from '../../shared/outbox/relay-metrics';
import { approveTask, createTask } from '../../shared/tasks/commands';
import { createTestDatabase } from '../support/database';
import { describeEachEngine } from '../support/dynamo';
import {
  approvedRow,
  busEvent,
  lambdaContext,
  RecordingLogger,
  TestClock,
  testInboxSettings,
} from '../support/dynamo-consumer-fixtures';
import { pgAdapter } from '../support/sql-adapters';

describeEachEngine('archive consumer', (fixture) => {
  let db: SqlClient;
  let owner: SqlClient;
  let closeDb: () => Promise<void>;
  let dataDir: string;
  let inbox: DynamoInboxStore;
  let inboxOps: DynamoInboxOps;
  let clock: TestClock;

  beforeAll(async () => {
    const database = await createTestDatabase();
    // The archive consumer reads tasks as its database resource's role, as on AWS.
    const opened = await pgAdapter.open(database.urlAs('taskReader'), 'taskReader');
    const asOwner = await pgAdapter.open(database.url);
    db = opened.db;
    owner = asOwner.db;
    closeDb = async () => {
      await opened.close();
      await asOwner.close();
      await database.drop();
    };
  });
  afterAll(() => closeDb());
  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'archive-consumer-'));
    inbox = new DynamoInboxStore(fixture().client, fixture().inbox);
    inboxOps = new DynamoInboxOps(fixture().client, fixture().inbox);
    clock = new TestClock();
    return () => rmSync(dataDir, { recursive: true, force: true });
  });

  function build(overrides: { inbox?: InboxStore } = {}) {
    return createConsumer({
      routes: topology,
      name: 'archive',
      effect: archiveEffect({ archive: new FileWriteOnceStore(join(dataDir, 'archive')), db }),
      inbox: overrides.inbox ?? inbox,
      logger: new RecordingLogger(),
      metrics: new Metrics({ namespace: metricsNamespace, serviceName: 'consumer-archive' }),
      settings: testInboxSettings(),
      clock: clock.read,
      random: () => 0.999,
    });
  }

  /** Approves a fresh task through the tasks commands and returns the outbox row it committed. */
  async function approvedTask(): Promise<OutboundEvent> {
    const task = await createTask(
      { title: 'Launch post', body: 'Full body text', assignee: 'ana' },
      { db: owner },
    );
    const { eventId } = await approveTask({ taskId: task.taskId, approvedBy: 'rita' }, { db: owner });
    const { rows } = await owner.query<{
      event_id: string;
      event_type: string;
      aggregate_id: string;
      aggregate_version: number;
      payload: unknown;
      created_at: Date;
    }>(
      'SELECT event_id, event_type, aggregate_id, aggregate_version, payload, created_at FROM outbox WHERE event_id = :id',
      {
        id: eventId,
      },
    );
    const row = rows[0];
    if (!row) throw new Error('approve wrote no outbox row');
    return {
      eventId: row.event_id,
      eventType: row.event_type,
      aggregateId: row.aggregate_id,
      aggregateVersion: row.aggregate_version,
      payload: row.payload,
      createdAt: row.created_at,
    };
  }

  const archivedFiles = (taskId: string) => {
    try {
      return readdirSync(join(dataDir, 'archive', 'tasks', taskId), { recursive: true, withFileTypes: true })
        .filter((e) => e.isFile())
        .map((e) => join(e.parentPath, e.name));
    } catch {
      return [];
    }
  };

  it('stores the task snapshot, read through the tasks repository, at the key of task, version and event', async () => {
    const row = await approvedTask();
    const result = await build()(busEvent(row), lambdaContext());
    const key = archiveKey(row.aggregateId, row.aggregateVersion, row.eventId);
    expect(result).toMatchObject({
      status: 'processed',
      effect: { outcome: 'written', key, taskVersion: 2 },
    });
    const snapshot = JSON.parse(readFileSync(join(dataDir, 'archive', key), 'utf8')) as TaskSnapshot;
    expect(snapshot).toMatchObject({
      eventId: row.eventId,
      eventVersion: 2,
      task: {
        taskId: row.aggregateId,
        status: 'approved',
        body: 'Full body text',
        reviewer: 'rita',
        version: 2,
      },
    });
  });

  it('a duplicate delivery leaves exactly one snapshot', async () => {
    const row = await approvedTask();
    const run = build();
    await run(busEvent(row), lambdaContext());
    expect(await run(busEvent(row), lambdaContext())).toMatchObject({ status: 'duplicate' });
    expect(archivedFiles(row.aggregateId)).toHaveLength(1);
  });

  it('a crash after the snapshot but before completion: the retry finds it stored, one snapshot', async () => {
    const row = await approvedTask();
    const crashing: InboxStore = Object.assign(Object.create(inbox) as InboxStore, {
      complete: async () => {
        throw new Error('killed');
      },
    });
    await expect(build({ inbox: crashing })(busEvent(row), lambdaContext())).rejects.toThrow('killed');
    const first = readFileSync(join(dataDir, 'archive', archiveKey(row.aggregateId, 2, row.eventId)), 'utf8');
    clock.advance(testInboxSettings().leaseMs + 1);
    expect(await build()(busEvent(row), lambdaContext())).toMatchObject({
      status: 'processed',
      attempt: 2,
      effect: { outcome: 'exists' },
    });
    expect(archivedFiles(row.aggregateId)).toHaveLength(1);
    // First write wins: the retry did not replace it.
    expect(readFileSync(join(dataDir, 'archive', archiveKey(row.aggregateId, 2, row.eventId)), 'utf8')).toBe(
      first,
    );
  });

  it('an event for a task the repository does not have fails (and is retried), it is not archived', async () => {
    const row = approvedRow({ taskId: randomUUID() });
    await expect(build()(busEvent(row), lambdaContext())).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await inboxOps.get({ consumer: 'archive', eventId: row.eventId })).toMatchObject({
      status: 'FAILED',
      lastError: expect.stringContaining('PipelineError'),
    });
    expect(archivedFiles(row.aggregateId)).toHaveLength(0);
  });
});
