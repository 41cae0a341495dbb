import { randomUUID } from 'node:crypto';
import { type SqlClient, type SqlExecutor, sqlParam } from '../db/sql-client';
import { PipelineError } from '../errors';
import { contentApprovedData, contentWithdrawnData } from '../events/schemas';
import { OutboxStore } from '../outbox/outbox-store';
import { eventTypes } from '../topology';
import { approvePendingTask, findTask, insertTask, type Task, withdrawOpenTask } from './task-store';

/** Makes ids (task ids, event ids); injectable so tests can pin them. Defaults to random UUIDs. */
export type IdGenerator = () => string;
/** The time a change happens at; injectable so tests can pin it. */
export type Clock = () => Date;

/** The part of the outbox a command needs: appending inside the caller's transaction. */
export type OutboxAppender = Pick<OutboxStore, 'append'>;

/** Input of {@link createTask}, already validated by the caller (the API's zod schema). */
export interface CreateTaskCommand {
  readonly title: string;
  readonly body?: string | null;
  readonly assignee?: string | null;
}

/** Input of {@link approveTask}. */
export interface ApproveTaskCommand {
  readonly taskId: string;
  readonly approvedBy: string;
}

/** Input of {@link withdrawTask}. */
export interface WithdrawTaskCommand {
  readonly taskId: string;
  readonly withdrawnBy: string;
  readonly reason?: string | null;
}

/** Dependencies of the commands that change state and emit an event. */
export interface TaskChangeDeps {
  readonly db: SqlClient;
  /** Defaults to an OutboxStore on `db`. */
  readonly outbox?: OutboxAppender;
  /** Event ids; defaults to `crypto.randomUUID`. */
  readonly ids?: IdGenerator;
  readonly clock?: Clock;
}

/** What a committed state change produced: the new task row and the id of the event it emitted. */
export interface TaskChange {
  readonly task: Task;
  readonly eventId: string;
}

/** Creates a task in `pending_review` (version 1); no event, since nothing downstream cares yet. */
export async function createTask(
  cmd: CreateTaskCommand,
  deps: { readonly db: SqlClient; readonly ids?: IdGenerator },
): Promise<Task> {
  const ids = deps.ids ?? randomUUID;
  return insertTask(deps.db, {
    taskId: ids(),
    title: cmd.title,
    body: cmd.body ?? null,
    assignee: cmd.assignee ?? null,
  });
}

/** Reads a task; throws NOT_FOUND so every caller maps absence the same way (404). */
export async function getTask(taskId: string, deps: { readonly db: SqlClient }): Promise<Task> {
  const task = await findTask(deps.db, taskId);
  if (!task) throw notFound(taskId);
  return task;
}

/**
 * Approves a `pending_review` task and appends its `content.approved` event in ONE
 * transaction. Invariant: after commit the task is `approved` at version v AND exactly one
 * outbox row (aggregate version v) exists, or, on any failure, neither change does. Of
 * concurrent approvals exactly one succeeds; the others get CONFLICT (see approvePendingTask).
 * Throws NOT_FOUND for an unknown task, CONFLICT with `details.currentStatus` otherwise.
 */
export async function approveTask(cmd: ApproveTaskCommand, deps: TaskChangeDeps): Promise<TaskChange> {
  const { db, ids = randomUUID, clock = () => new Date() } = deps;
  const outbox = deps.outbox ?? new OutboxStore(db);
  const eventId = ids();
  return committedOrKnown(db, cmd.taskId, eventId, async (tx) => {
    const task = await approvePendingTask(tx, { taskId: cmd.taskId, reviewer: cmd.approvedBy, at: clock() });
    if (!task) throw await refusal(tx, cmd.taskId, 'approve', 'it is not pending review');
    // Parsed, not just typed: a payload that breaks the contract must fail here, rolled back,
    // rather than become a poison event every consumer rejects.
    const payload = contentApprovedData.parse({
      taskId: task.taskId,
      version: task.version,
      title: task.title,
      assignee: task.assignee,
      reviewer: task.reviewer,
      approvedAt: task.approvedAt?.toISOString(),
    });
    return appendTaskEvent(tx, outbox, eventId, task, eventTypes.approved, payload);
  });
}

/**
 * Withdraws a `pending_review` or `approved` task and appends its `content.withdrawn` event in
 * ONE transaction, with the same all-or-nothing invariant as {@link approveTask}. Throws
 * NOT_FOUND for an unknown task, CONFLICT with `details.currentStatus` from any other state.
 */
export async function withdrawTask(cmd: WithdrawTaskCommand, deps: TaskChangeDeps): Promise<TaskChange> {
  const { db, ids = randomUUID, clock = () => new Date() } = deps;
  const outbox = deps.outbox ?? new OutboxStore(db);
  const eventId = ids();
  return committedOrKnown(db, cmd.taskId, eventId, async (tx) => {
    const task = await withdrawOpenTask(tx, {
      taskId: cmd.taskId,
      withdrawnBy: cmd.withdrawnBy,
      reason: cmd.reason ?? null,
      at: clock(),
    });
    if (!task) throw await refusal(tx, cmd.taskId, 'withdraw', 'it is neither pending review nor approved');
    const payload = contentWithdrawnData.parse({
      taskId: task.taskId,
      version: task.version,
      title: task.title,
      withdrawnBy: task.withdrawnBy,
      reason: task.withdrawReason,
      withdrawnAt: task.withdrawnAt?.toISOString(),
    });
    return appendTaskEvent(tx, outbox, eventId, task, eventTypes.withdrawn, payload);
  });
}

/**
 * Runs a task change's transaction. When its commit's answer was lost (the Data API's
 * `commitOutcome: 'unknown'`), the change's own event tells what happened: the event id is
 * chosen before the transaction, so an outbox row with it means this change committed, and the
 * caller gets its result rather than a 500 (and, on retrying, a 409 for its own change).
 */
async function committedOrKnown(
  db: SqlClient,
  taskId: string,
  eventId: string,
  work: (tx: SqlExecutor) => Promise<TaskChange>,
): Promise<TaskChange> {
  try {
    return await db.transaction(work);
  } catch (err) {
    if (!(err instanceof PipelineError && err.details.commitOutcome === 'unknown')) throw err;
    const { rows } = await db.query('SELECT event_id FROM outbox WHERE event_id = :eventId', {
      eventId: sqlParam.uuid(eventId),
    });
    if (rows.length === 0) throw err;
    const task = await findTask(db, taskId);
    if (!task) throw err;
    return { task, eventId };
  }
}

/** Appends `task`'s event at its new version inside the command's transaction. */
async function appendTaskEvent(
  tx: SqlExecutor,
  outbox: OutboxAppender,
  eventId: string,
  task: Task,
  eventType: string,
  payload: unknown,
): Promise<TaskChange> {
  await outbox.append(tx, {
    eventId,
    eventType,
    aggregateId: task.taskId,
    aggregateVersion: task.version,
    payload,
  });
  return { task, eventId };
}

function notFound(taskId: string): PipelineError {
  return new PipelineError('NOT_FOUND', `task ${taskId} not found`, { taskId });
}

// Runs after a conditional UPDATE matched nothing, to tell "no such task" from "wrong state".
// A fresh read-committed snapshot, so it reports the committed state that refused the change.
async function refusal(tx: SqlExecutor, taskId: string, verb: string, why: string): Promise<PipelineError> {
  const current = await findTask(tx, taskId);
  if (!current) return notFound(taskId);
  return new PipelineError('CONFLICT', `cannot ${verb} task ${taskId}: ${why}`, {
    currentStatus: current.status,
  });
}
