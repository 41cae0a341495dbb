import { defineEffect } from '#shared/consumers/define-consumer';
import type { ConsumerEffect } from '#shared/consumers/effect';
import type { WriteOnceStore } from '#shared/consumers/resources';
import type { SqlClient } from '#shared/db/sql-client';
import type { PipelineCloudEvent } from '#shared/events/schemas';
import { getTask } from '#shared/tasks/commands';
import { type TaskJson, toTaskJson } from '#shared/tasks/task-store';
import { archive } from './consumer';

/** The archived document: the task as read at archive time, and the event that asked for it. */
export interface TaskSnapshot {
  readonly eventId: string;
  readonly eventType: string;
  /** The version the event announced; `task.version` can be later if the task moved on since. */
  readonly eventVersion: number;
  readonly archivedAt: string;
  readonly task: TaskJson;
}

/**
 * The key of one snapshot: task id, event version and event id. Deterministic, so a retried or
 * duplicated event writes the same key, and the write-once put turns it into a no-op.
 */
export function archiveKey(taskId: string, version: number, eventId: string): string {
  return `tasks/${taskId}/v${version}/${eventId}.json`;
}

/** Dependencies of the archive effect: where snapshots go, and the tasks database they are read from. */
export interface ArchiveEffectDeps {
  readonly archive: WriteOnceStore;
  readonly db: SqlClient;
  readonly clock?: () => Date;
}

/**
 * The archive consumer's effect: read the task through the tasks repository and store its
 * snapshot at the event's key. Only `content.approved` is routed here (topology).
 */
export function archiveEffect(deps: ArchiveEffectDeps): ConsumerEffect {
  const clock = deps.clock ?? (() => new Date());
  return async (event: PipelineCloudEvent) => {
    const task = await getTask(event.data.taskId, { db: deps.db });
    const key = archiveKey(event.data.taskId, event.data.version, event.id);
    const snapshot: TaskSnapshot = {
      eventId: event.id,
      eventType: event.type,
      eventVersion: event.data.version,
      archivedAt: clock().toISOString(),
      task: toTaskJson(task),
    };
    const outcome = await deps.archive.put(key, `${JSON.stringify(snapshot, null, 2)}\n`);
    return { outcome, key, taskVersion: task.version };
  };
}

/** The archive consumer's effect over its bucket (S3 on AWS, files locally) and the tasks it reads. */
export const effect = defineEffect(archive, (ports) =>
  archiveEffect({ archive: ports.archive, db: ports.tasks }),
);
