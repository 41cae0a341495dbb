import { readdir } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import {
  DescribeTableCommand,
  type DynamoDBClient,
  ListTablesCommand,
  paginateScan,
} from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { archiveKey } from '../../functions/consumers/archive/effect';
import { index } from '../../functions/consumers/index/consumer';
import { consumerNames, topology } from '../../functions/topology';
import { FilePublisher } from '../../infra/local/consumer-resources/file-publisher';
import type { SqlClient } from '../../shared/db/sql-client';
import { matchesPattern } from '../../shared/events/event-pattern';
import { inboxTableSchema } from '../../shared/inbox/dynamo-inbox-table';
import type { InboxStatus } from '../../shared/inbox/inbox-store';
import type { TaskStatus } from '../../shared/tasks/task-store';
import { type ConsumerName, eventTypes, type Topology } from '../../shared/topology';

/**
 * The pipeline's promises, checked once over everything a run left behind. Every guarantee
 * scenario ends here, whatever fault it injected:
 * - every approved task has exactly one `content.approved` outbox row, and it is delivered;
 * - no outbox row is pending or dead;
 * - every consumer a topology rule routes an event to has it `PROCESSED` in its inbox, and no
 *   inbox record is left `PROCESSING`, `FAILED` or `DEAD`;
 * - the content index holds each task's latest version (approved content or a withdrawn tombstone);
 * - one archive object per `content.approved` event, under that event's key, and no other;
 * - at least one notification per `content.approved` event; repeats are counted, and only the
 *   ones the design allows (a notify attempt that sent and then did not record completion) pass.
 * Duplicates everywhere else (re-publishes, re-deliveries) are what at-least-once means: they are
 * counted per kind and returned as figures, never hidden.
 */

/** A task as the tasks table holds it. */
export interface TaskFact {
  readonly taskId: string;
  readonly status: TaskStatus;
  readonly version: number;
  /** The task was approved at some point (it may have been withdrawn since). */
  readonly approved: boolean;
}

/** An outbox row. */
export interface OutboxFact {
  readonly eventId: string;
  readonly eventType: string;
  readonly aggregateId: string;
  readonly aggregateVersion: number;
  readonly status: 'pending' | 'delivered' | 'dead';
  readonly attempts: number;
}

/** An inbox record's key and status. */
export interface InboxFact {
  readonly consumer: string;
  readonly eventId: string;
  readonly status: InboxStatus;
  /** Attempts the inbox counted (claims), when known. */
  readonly attempts?: number;
}

/** A content index entry. */
export interface IndexFact {
  readonly taskId: string;
  readonly version: number;
  readonly status: 'approved' | 'withdrawn';
}

/** One delivery a consumer received (an invocation), as the bus made it. */
export interface DeliveryFact {
  readonly consumer: ConsumerName;
  /** The CloudEvent id (the outbox event id). */
  readonly eventId: string;
  /** The bus's own event id: a new one per accepted publish. */
  readonly busEventId: string;
}

/** Everything the checker reads, gathered from the stores after a run. */
export interface GuaranteeFacts {
  readonly tasks: readonly TaskFact[];
  readonly outbox: readonly OutboxFact[];
  readonly inbox: readonly InboxFact[];
  readonly index: readonly IndexFact[];
  /** Keys of the archived snapshots. */
  readonly archiveKeys: readonly string[];
  /** The event id of every notification the channel received, repeats included. */
  readonly notifications: readonly string[];
  /** Bus event ids per outbox event id, one per publish the bus accepted, when the run knows them. */
  readonly publishes?: ReadonlyMap<string, readonly string[]>;
  /** Every delivery consumers received, when the run observed them. */
  readonly deliveries?: readonly DeliveryFact[];
  /** Dead letters of the bus (rule DLQs and on-failure destinations on AWS), when the run has a bus. */
  readonly busDeadLetters?: number;
}

/** What a run knows happened, which explains repeats the stores show. */
export interface Explanations {
  /**
   * Notify attempts that ran the effect and then did not record completion (a crash, a failure
   * after the send, a lost lease): each may repeat one notification, by design.
   */
  readonly notifyAttemptsThatActedWithoutCompleting?: number;
}

/** The kinds of repeat a run can show. */
export type DuplicateKind = 'publish' | 'delivery' | 'notification';

/** The figures of a run, for the report line. */
export interface GuaranteeFigures {
  readonly approvedTasks: number;
  readonly withdrawnTasks: number;
  readonly events: Readonly<Record<string, number>>;
  readonly processed: Readonly<Record<ConsumerName, number>>;
  readonly archiveObjects: number;
  readonly notifications: number;
  /** Repeats per kind: extra publishes the bus accepted, extra deliveries, repeated notifications. */
  readonly duplicates: Readonly<Record<DuplicateKind, number>>;
  /** The most publish attempts (claims) any outbox row needed. */
  readonly maxPublishAttempts: number;
  /** The most attempts any inbox record needed, per consumer. */
  readonly maxConsumerAttempts: Readonly<Record<ConsumerName, number>>;
}

/** The checker's answer: every broken promise, and the figures either way. */
export interface GuaranteeReport {
  readonly violations: readonly string[];
  readonly figures: GuaranteeFigures;
  /** Why each kind of repeat is allowed, for the kinds that occurred. */
  readonly explained: Readonly<Partial<Record<DuplicateKind, string>>>;
}

/** The consumers the topology's rules route an event type to (each rule's pattern, as the bus matches it). */
export function routedConsumers(
  eventType: string,
  t: Pick<Topology, 'source' | 'rules'> = topology,
): ConsumerName[] {
  const probe = { source: t.source, 'detail-type': eventType, detail: {} };
  return [...new Set(t.rules.filter((r) => matchesPattern(r.pattern, probe)).flatMap((r) => r.targets))];
}

/** Violations are listed one per line; long lists are cut so a failure message stays readable. */
const maxListed = 20;

/** Checks every promise over `facts`; pure, so the checker itself is tested on facts made by hand. */
export function checkGuarantees(facts: GuaranteeFacts, explanations: Explanations = {}): GuaranteeReport {
  const violations: string[] = [];
  const add = (message: string) => violations.push(message);

  const tasks = new Map(facts.tasks.map((t) => [t.taskId, t]));
  const rowsByTask = new Map<string, OutboxFact[]>();
  for (const row of facts.outbox) {
    const rows = rowsByTask.get(row.aggregateId) ?? [];
    rows.push(row);
    rowsByTask.set(row.aggregateId, rows);
  }

  // Outbox: exactly one approved event per approved task, each delivered; nothing pending or dead.
  for (const task of facts.tasks) {
    const approvals = (rowsByTask.get(task.taskId) ?? []).filter((r) => r.eventType === eventTypes.approved);
    if (task.approved && approvals.length !== 1)
      add(`task ${task.taskId} was approved but has ${approvals.length} content.approved outbox rows`);
    if (!task.approved && approvals.length > 0)
      add(`task ${task.taskId} was never approved but has a content.approved outbox row`);
  }
  for (const row of facts.outbox) {
    if (row.status !== 'delivered')
      add(`outbox event ${row.eventId} (${row.eventType}) is ${row.status} after ${row.attempts} attempts`);
    if (!tasks.has(row.aggregateId)) add(`outbox event ${row.eventId} belongs to no task`);
  }

  // Inbox: every routed consumer processed every event; nothing open, nothing dead, nothing unknown.
  const inbox = new Map(facts.inbox.map((r) => [`${r.consumer}/${r.eventId}`, r]));
  const expectedRecords = new Set<string>();
  for (const row of facts.outbox) {
    for (const consumer of routedConsumers(row.eventType)) {
      const key = `${consumer}/${row.eventId}`;
      expectedRecords.add(key);
      const record = inbox.get(key);
      if (!record) add(`${consumer} has no inbox record of ${row.eventType} ${row.eventId}`);
      else if (record.status !== 'PROCESSED')
        add(`${consumer} left ${row.eventType} ${row.eventId} ${record.status}`);
    }
  }
  for (const record of facts.inbox) {
    if (expectedRecords.has(`${record.consumer}/${record.eventId}`)) continue;
    add(`${record.consumer} has an inbox record ${record.eventId} (${record.status}) for no routed event`);
  }

  // Index: each task that reached approved or withdrawn is there at its latest version.
  const index = new Map(facts.index.map((e) => [e.taskId, e]));
  for (const task of facts.tasks) {
    const entry = index.get(task.taskId);
    const indexed = task.status === 'approved' || task.status === 'withdrawn';
    if (!indexed) {
      if (entry) add(`task ${task.taskId} is ${task.status} but the index holds v${entry.version}`);
      continue;
    }
    if (!entry) add(`task ${task.taskId} (${task.status} v${task.version}) is not in the index`);
    else if (entry.version !== task.version || entry.status !== task.status)
      add(
        `the index holds task ${task.taskId} as ${entry.status} v${entry.version}, the task is ${task.status} v${task.version}`,
      );
  }
  for (const entry of facts.index) {
    if (!tasks.has(entry.taskId)) add(`the index holds ${entry.taskId}, which is no task`);
  }

  // Archive: one object per approved event, at its key, and nothing else.
  const approvedRows = facts.outbox.filter((r) => r.eventType === eventTypes.approved);
  const expectedKeys = new Set(
    approvedRows.map((r) => archiveKey(r.aggregateId, r.aggregateVersion, r.eventId)),
  );
  const keyCounts = countBy(facts.archiveKeys, (k) => k);
  for (const key of expectedKeys) {
    const n = keyCounts.get(key) ?? 0;
    if (n !== 1) add(`archive holds ${n} objects at ${key}`);
  }
  for (const key of keyCounts.keys()) {
    if (!expectedKeys.has(key)) add(`archive holds ${key}, which belongs to no approved event`);
  }

  // Notifications: at least one per approved event; repeats only as the design explains them.
  const notified = countBy(facts.notifications, (id) => id);
  const approvedIds = new Set(approvedRows.map((r) => r.eventId));
  for (const id of approvedIds) {
    if (!notified.has(id)) add(`approved event ${id} was never notified`);
  }
  for (const id of notified.keys()) {
    if (!approvedIds.has(id)) add(`a notification names ${id}, which is no approved event`);
  }
  const notificationRepeats = [...notified.values()].reduce((n, c) => n + c - 1, 0);
  const explainedRepeats = explanations.notifyAttemptsThatActedWithoutCompleting ?? 0;
  if (notificationRepeats > explainedRepeats)
    add(
      `${notificationRepeats} repeated notifications, but only ${explainedRepeats} notify attempts acted without completing`,
    );

  const publishRepeats = facts.publishes
    ? [...facts.publishes.values()].reduce((n, ids) => n + Math.max(0, new Set(ids).size - 1), 0)
    : 0;
  const deliveryRepeats = facts.deliveries
    ? facts.deliveries.length - new Set(facts.deliveries.map((d) => `${d.consumer}/${d.eventId}`)).size
    : 0;
  if ((facts.busDeadLetters ?? 0) > 0) add(`the bus holds ${facts.busDeadLetters} dead letters`);

  const processed = Object.fromEntries(consumerNames.map((c) => [c, 0])) as Record<ConsumerName, number>;
  const maxConsumerAttempts = { ...processed };
  for (const record of facts.inbox) {
    if (!(record.consumer in processed)) continue;
    const consumer = record.consumer as ConsumerName;
    if (record.status === 'PROCESSED') processed[consumer] = (processed[consumer] ?? 0) + 1;
    maxConsumerAttempts[consumer] = Math.max(maxConsumerAttempts[consumer] ?? 0, record.attempts ?? 0);
  }
  const explained: Partial<Record<DuplicateKind, string>> = {};
  if (publishRepeats > 0)
    explained.publish = 'the relay published again after a publish it could not record (at least once)';
  if (deliveryRepeats > 0)
    explained.delivery = 'the bus delivered again (at least once); the inboxes acknowledged the repeats';
  if (notificationRepeats > 0)
    explained.notification = `${explainedRepeats} notify attempts sent and then did not record completion`;

  return {
    violations:
      violations.length > maxListed
        ? [...violations.slice(0, maxListed), `... and ${violations.length - maxListed} more`]
        : violations,
    explained,
    figures: {
      approvedTasks: facts.tasks.filter((t) => t.approved).length,
      withdrawnTasks: facts.tasks.filter((t) => t.status === 'withdrawn').length,
      events: Object.fromEntries(countBy(facts.outbox, (r) => r.eventType)),
      processed,
      archiveObjects: facts.archiveKeys.length,
      notifications: facts.notifications.length,
      duplicates: { publish: publishRepeats, delivery: deliveryRepeats, notification: notificationRepeats },
      maxPublishAttempts: facts.outbox.reduce((m, r) => Math.max(m, r.attempts), 0),
      maxConsumerAttempts,
    },
  };
}

function countBy<T>(items: readonly T[], key: (item: T) => string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1);
  return counts;
}

// --- reading the facts from the real stores ----------------------------------------------

/** Where a run's state lives. */
export interface GuaranteeSources {
  /** The schema owner's client: tasks and outbox. */
  readonly db: SqlClient;
  /** A client on the DynamoDB engine, without injected faults, and the two tables. */
  readonly dynamo: {
    readonly client: DynamoDBClient;
    readonly inboxTable: string;
    readonly indexTable: string;
  };
  /** The directory the archive's bucket is in (FileWriteOnceStore's root, `<effects dir>/archive`). */
  readonly archiveRoot: string;
  /** The event id of every notification the channel received. */
  readonly notifications: () => Promise<readonly string[]>;
  readonly publishes?: () => Promise<ReadonlyMap<string, readonly string[]>>;
  readonly deliveries?: () => readonly DeliveryFact[];
  readonly busDeadLetters?: () => number;
}

/** Reads every fact the checker needs from the stores. */
export async function readFacts(sources: GuaranteeSources): Promise<GuaranteeFacts> {
  const [tasks, outbox, inbox, index, archiveKeys, notifications, publishes] = await Promise.all([
    readTasks(sources.db),
    readOutbox(sources.db),
    scanTable(sources.dynamo.client, sources.dynamo.inboxTable, (item) => ({
      consumer: String(item.consumer),
      eventId: String(item.eventId),
      status: (item.state as { status: InboxStatus }).status,
      attempts: Number((item.state as { attempts?: number }).attempts ?? 0),
    })),
    scanTable(sources.dynamo.client, sources.dynamo.indexTable, (item) => ({
      taskId: String(item.taskId),
      version: Number(item.version),
      status: item.status as IndexFact['status'],
    })),
    listArchiveKeys(sources.archiveRoot),
    sources.notifications(),
    sources.publishes?.(),
  ]);
  return {
    tasks,
    outbox,
    inbox,
    index,
    archiveKeys,
    notifications,
    ...(publishes ? { publishes } : {}),
    ...(sources.deliveries ? { deliveries: sources.deliveries() } : {}),
    ...(sources.busDeadLetters ? { busDeadLetters: sources.busDeadLetters() } : {}),
  };
}

/** Reads the facts and checks them: what every scenario ends in. */
export async function checkRun(
  sources: GuaranteeSources,
  explanations?: Explanations,
): Promise<GuaranteeReport> {
  return checkGuarantees(await readFacts(sources), explanations);
}

async function readTasks(db: SqlClient): Promise<TaskFact[]> {
  const { rows } = await db.query<{
    task_id: string;
    status: TaskStatus;
    version: number;
    approved: boolean;
  }>('SELECT task_id, status, version, approved_at IS NOT NULL AS approved FROM tasks');
  return rows.map((r) => ({ taskId: r.task_id, status: r.status, version: r.version, approved: r.approved }));
}

async function readOutbox(db: SqlClient): Promise<OutboxFact[]> {
  const { rows } = await db.query<{
    event_id: string;
    event_type: string;
    aggregate_id: string;
    aggregate_version: number;
    status: OutboxFact['status'];
    attempts: number;
  }>('SELECT event_id, event_type, aggregate_id, aggregate_version, status, attempts FROM outbox');
  return rows.map((r) => ({
    eventId: r.event_id,
    eventType: r.event_type,
    aggregateId: r.aggregate_id,
    aggregateVersion: r.aggregate_version,
    status: r.status,
    attempts: r.attempts,
  }));
}

/** A full, consistent scan: the checker runs once the pipeline is quiet, on small local tables. */
async function scanTable<T>(
  client: DynamoDBClient,
  table: string,
  map: (item: Record<string, unknown>) => T,
): Promise<T[]> {
  const out: T[] = [];
  for await (const page of paginateScan({ client }, { TableName: table, ConsistentRead: true })) {
    for (const item of page.Items ?? []) out.push(map(unmarshall(item)));
  }
  return out;
}

async function listArchiveKeys(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true }).catch(
    (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [];
      throw err;
    },
  );
  return entries
    .filter((e) => e.isFile() && !e.name.endsWith('.tmp'))
    .map((e) => relative(root, join(e.parentPath, e.name)).split(sep).join('/'));
}

/**
 * The event ids of a notifications file (FilePublisher's JSON lines: a message's id is its
 * notification's event id), repeats included; a line torn by a crash mid-append is no message.
 */
export async function notificationsInFile(path: string): Promise<string[]> {
  return (await new FilePublisher(path).read()).map((m) => m.id);
}

/**
 * Finds the inbox and index tables on an engine by their key schemas (the shapes ensureTables
 * creates), for a runtime whose table names are its own business.
 */
export async function findPipelineTables(
  client: DynamoDBClient,
): Promise<{ readonly inboxTable: string; readonly indexTable: string }> {
  const { TableNames = [] } = await client.send(new ListTablesCommand({}));
  let inboxTable: string | undefined;
  let indexTable: string | undefined;
  for (const name of TableNames) {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: name }));
    const keys = (Table?.KeySchema ?? []).map((k) => k.AttributeName).join(',');
    if (keys === inboxTableSchema.partitionKey) inboxTable = name;
    if (keys === index.resources.contentIndex.partitionKey) indexTable = name;
  }
  if (!inboxTable || !indexTable) throw new Error(`no inbox and index tables among ${TableNames.join(', ')}`);
  return { inboxTable, indexTable };
}
