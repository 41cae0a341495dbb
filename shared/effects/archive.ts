import { randomUUID } from 'node:crypto';
import { link, mkdir, unlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { SqlClient } from '../db/sql-client';
import type { PipelineCloudEvent } from '../events/schemas';
import { getTask } from '../tasks/commands';
import { type TaskJson, toTaskJson } from '../tasks/task-store';
import type { ConsumerEffect } from './effect';

/** `written`: this call stored the snapshot; `exists`: one was already stored under the key. */
export type ArchiveOutcome = 'written' | 'exists';

/** The snapshot store port: write-once objects under deterministic keys. */
export interface SnapshotArchive {
  /** Stores `body` at `key` unless something is already there (idempotent; first write wins). */
  put(key: string, body: string): Promise<ArchiveOutcome>;
}

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

const isS3Error = (err: unknown, ...names: string[]) => {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } } | null;
  return (
    names.includes(e?.name ?? '') ||
    (names.includes('PreconditionFailed') && e?.$metadata?.httpStatusCode === 412)
  );
};

/** Snapshots in S3: PutObject with `If-None-Match: *`, so S3 itself refuses a second write. */
export class S3SnapshotArchive implements SnapshotArchive {
  constructor(
    private readonly s3: S3Client,
    private readonly bucket: string,
  ) {}

  async put(key: string, body: string): Promise<ArchiveOutcome> {
    try {
      await this.s3.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: body,
          ContentType: 'application/json',
          IfNoneMatch: '*',
        }),
      );
      return 'written';
    } catch (err) {
      if (isS3Error(err, 'PreconditionFailed')) return 'exists';
      // ConditionalRequestConflict (409): a concurrent write to the key is in flight; retrying decides.
      throw new Error(`archive put of s3://${this.bucket}/${key} failed`, { cause: err });
    }
  }
}

/**
 * Snapshots as files under `<dataDir>/archive/<key>` (the local runtime). Written to a temporary
 * file, then hard-linked into place: the link fails if the file exists, so the first complete
 * write wins and a crash never leaves a half-written snapshot under the real name; a write that
 * fails leaves no temporary file either.
 */
export class FileSnapshotArchive implements SnapshotArchive {
  readonly root: string;

  constructor(dataDir: string) {
    this.root = join(dataDir, 'archive');
  }

  async put(key: string, body: string): Promise<ArchiveOutcome> {
    if (key.split('/').some((part) => part === '..' || part === ''))
      throw new Error(`invalid archive key ${key}`);
    const path = join(this.root, key);
    await mkdir(dirname(path), { recursive: true });
    const temp = `${path}.${randomUUID()}.tmp`;
    try {
      // Inside the try: a write that fails part-way (a full disk) leaves no temporary file.
      await writeFile(temp, body);
      await link(temp, path);
      return 'written';
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return 'exists';
      throw err;
    } finally {
      await unlink(temp).catch(() => undefined);
    }
  }
}

/** Dependencies of the archive effect: where snapshots go, and the tasks database they are read from. */
export interface ArchiveEffectDeps {
  readonly archive: SnapshotArchive;
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
