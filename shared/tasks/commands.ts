import { createHash, randomUUID } from 'node:crypto';
import type { SqlClient } from '../db/sql-client';
import { PipelineError } from '../errors';
import {
  approveAndAppend,
  type CommittedChange,
  findTask,
  insertTask,
  insertTaskOnce,
  rejectAndAppend,
  type Task,
  taskAndEvent,
  withdrawAndAppend,
} from './task-store';

/** Makes ids (task ids, event ids); injectable so tests can pin them. Defaults to random UUIDs. */
export type IdGenerator = () => string;
/** The time a change happens at; injectable so tests can pin it. */
export type Clock = () => Date;

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

/** Input of {@link rejectTask}: who rejects (the caller) and why (required: the assignee is told). */
export interface RejectTaskCommand {
  readonly taskId: string;
  readonly rejectedBy: string;
  readonly reason: string;
}

/** Dependencies of the commands that change state and emit an event. */
export interface TaskChangeDeps {
  readonly db: SqlClient;
  /** Event ids; defaults to `crypto.randomUUID`. */
  readonly ids?: IdGenerator;
  readonly clock?: Clock;
}

/** What a committed state change produced: the new task row and the id of the event it emitted. */
export interface TaskChange {
  readonly task: Task;
  readonly eventId: string;
  /** No relay run was draining when it committed: nudge one (see {@link CommittedChange}). */
  readonly relayIdle: boolean;
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

/** What a create under an idempotency key answers: the task, and whether an earlier create under the key made it. */
export interface KeyedCreate {
  readonly task: Task;
  /** The key already named this task, made by an earlier create of the same request: nothing new was made. */
  readonly replayed: boolean;
}

/**
 * The hash a create request is known by under its key: what the task would be made of (the
 * command as validated), so a retry of the same request matches however its JSON was spelt.
 */
export function createRequestHash(cmd: CreateTaskCommand): string {
  const canonical = JSON.stringify([cmd.title, cmd.body ?? null, cmd.assignee ?? null]);
  return createHash('sha256').update(canonical).digest('hex');
}

/**
 * Creates a task under an idempotency key, once: the first create of a key makes the task and
 * keeps the key with it; the same key with the same request answers that task (`replayed`),
 * whatever happened to the first answer (a 503, a timeout, a lost connection); the same key with
 * another request is IDEMPOTENCY_KEY_REUSED and changes nothing. One statement (one Data API
 * call), two only when a create of the same key was in flight beside it.
 */
export async function createTaskOnce(
  cmd: CreateTaskCommand,
  idempotencyKey: string,
  deps: { readonly db: SqlClient; readonly ids?: IdGenerator },
): Promise<KeyedCreate> {
  const ids = deps.ids ?? randomUUID;
  const found = await insertTaskOnce(
    deps.db,
    { taskId: ids(), title: cmd.title, body: cmd.body ?? null, assignee: cmd.assignee ?? null },
    { key: idempotencyKey, requestHash: createRequestHash(cmd) },
  );
  if (found.outcome === 'key-reused') {
    throw new PipelineError(
      'IDEMPOTENCY_KEY_REUSED',
      'this Idempotency-Key was already used with another request; nothing was created: send a new key for a new task',
    );
  }
  return { task: found.task, replayed: found.outcome === 'replayed' };
}

/** Reads a task; throws NOT_FOUND so every caller maps absence the same way (404). */
export async function getTask(taskId: string, deps: { readonly db: SqlClient }): Promise<Task> {
  const task = await findTask(deps.db, taskId);
  if (!task) throw notFound(taskId);
  return task;
}

/**
 * Approves a `pending_review` task and appends its `content.approved` event in ONE statement
 * (one Data API call). Invariant: after commit the task is `approved` at version v AND exactly
 * one outbox row (aggregate version v, event id chosen here) exists, or neither change does. Of
 * concurrent approvals exactly one succeeds; the others get CONFLICT. Throws NOT_FOUND for an
 * unknown task, CONFLICT with `details.currentStatus` otherwise.
 */
export async function approveTask(cmd: ApproveTaskCommand, deps: TaskChangeDeps): Promise<TaskChange> {
  const { db, ids = randomUUID, clock = () => new Date() } = deps;
  const eventId = ids();
  return changeOnce(db, cmd.taskId, eventId, 'approve', 'it is not pending review', () =>
    approveAndAppend(db, { taskId: cmd.taskId, reviewer: cmd.approvedBy, at: clock(), eventId }),
  );
}

/**
 * Withdraws a `pending_review` or `approved` task and appends its `content.withdrawn` event in
 * ONE statement, with the same all-or-nothing invariant as {@link approveTask}. Throws
 * NOT_FOUND for an unknown task, CONFLICT with `details.currentStatus` from any other state.
 */
export async function withdrawTask(cmd: WithdrawTaskCommand, deps: TaskChangeDeps): Promise<TaskChange> {
  const { db, ids = randomUUID, clock = () => new Date() } = deps;
  const eventId = ids();
  return changeOnce(db, cmd.taskId, eventId, 'withdraw', 'it is neither pending review nor approved', () =>
    withdrawAndAppend(db, {
      taskId: cmd.taskId,
      withdrawnBy: cmd.withdrawnBy,
      reason: cmd.reason ?? null,
      at: clock(),
      eventId,
    }),
  );
}

/**
 * Rejects a `pending_review` task and appends its `content.rejected` event in ONE statement,
 * with the same all-or-nothing invariant as {@link approveTask}; of a concurrent approve and
 * reject exactly one succeeds. Throws NOT_FOUND for an unknown task, CONFLICT with
 * `details.currentStatus` from any other state.
 */
export async function rejectTask(cmd: RejectTaskCommand, deps: TaskChangeDeps): Promise<TaskChange> {
  const { db, ids = randomUUID, clock = () => new Date() } = deps;
  const eventId = ids();
  return changeOnce(db, cmd.taskId, eventId, 'reject', 'it is not pending review', () =>
    rejectAndAppend(db, {
      taskId: cmd.taskId,
      reviewer: cmd.rejectedBy,
      reason: cmd.reason,
      at: clock(),
      eventId,
    }),
  );
}

/**
 * Runs a task change's statement and settles what it did. The event id is chosen before the
 * statement, so the outbox row with that id is the proof that this change committed:
 * - the statement answered with the new row: done;
 * - it matched nothing: a fresh read tells NOT_FOUND from CONFLICT, unless the row it finds is
 *   this change's own (the SDK resent a statement whose answer was lost after it ran);
 * - it failed with no answer from the database (a lost answer, a cut connection: it may have
 *   run): the change committed if its event is there, else the error stands.
 * A SQL error (one with a SQLSTATE) means PostgreSQL refused the statement: nothing committed.
 */
async function changeOnce(
  db: SqlClient,
  taskId: string,
  eventId: string,
  verb: string,
  why: string,
  statement: () => Promise<CommittedChange | null>,
): Promise<TaskChange> {
  let committed: CommittedChange | null;
  try {
    committed = await statement();
  } catch (err) {
    if (!mayHaveRun(err)) throw err;
    const known = await taskAndEvent(db, taskId, eventId).catch(() => undefined);
    // A relay run may not know of it: nudge, as after any change of ours.
    if (known?.eventExists && known.task) return { task: known.task, eventId, relayIdle: true };
    throw err;
  }
  if (committed) return { task: committed.task, eventId, relayIdle: committed.relayIdle };
  const { task, eventExists } = await taskAndEvent(db, taskId, eventId);
  if (!task) throw notFound(taskId);
  if (eventExists) return { task, eventId, relayIdle: true };
  throw new PipelineError('CONFLICT', `cannot ${verb} task ${taskId}: ${why}`, {
    currentStatus: task.status,
  });
}

/** A failure after which the statement may have run: the database gave no refusal of its own. */
const mayHaveRun = (err: unknown) =>
  err instanceof PipelineError &&
  (err.code === 'DB_TRANSIENT' || err.code === 'DB_ERROR') &&
  err.details.sqlState === undefined;

function notFound(taskId: string): PipelineError {
  return new PipelineError('NOT_FOUND', `task ${taskId} not found`, { taskId });
}
