import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { defineEffect } from '#shared/consumers/define-consumer';
import type { ConsumerEffect } from '#shared/consumers/effect';
import { eventTypes } from '#shared/events/event-types';
import type { PipelineCloudEvent } from '#shared/events/schemas';
import { index } from './consumer';

/**
 * One task's entry. A withdrawn task keeps a tombstone (status `withdrawn`, its version, no
 * content) instead of being deleted, so an older approve that arrives late finds a higher
 * version and cannot bring it back.
 */
export type IndexEntry =
  | {
      readonly taskId: string;
      readonly version: number;
      readonly status: 'approved';
      readonly title: string;
      readonly assignee: string | null;
      readonly reviewer: string;
      readonly approvedAt: string;
      readonly eventId: string;
    }
  | {
      readonly taskId: string;
      readonly version: number;
      readonly status: 'withdrawn';
      readonly withdrawnBy: string;
      readonly reason: string | null;
      readonly withdrawnAt: string;
      readonly eventId: string;
    };

/** `applied`: the entry is now this version; `stale`: the index already holds this version or a later one. */
export type IndexOutcome = 'applied' | 'stale';

/** What a write did, and the status of the entry it replaced (null: none, or a stale write). */
export interface IndexApplied {
  readonly outcome: IndexOutcome;
  readonly replaced: IndexEntry['status'] | null;
}

/** The content index port: versioned writes, so order of arrival never matters. */
export interface ContentIndex {
  /** Writes `entry` only over a lower version (or nothing): idempotent, and replays are no-ops. */
  apply(entry: IndexEntry): Promise<IndexApplied>;
  get(taskId: string): Promise<IndexEntry | undefined>;
}

/**
 * The content index on DynamoDB (AWS, and dynalite or DynamoDB Local for the local runtime):
 * one PutItem conditional on a lower stored version, so concurrent and out-of-order events
 * converge on the highest version.
 */
export class DynamoContentIndex implements ContentIndex {
  private readonly doc: DynamoDBDocumentClient;

  constructor(
    client: DynamoDBClient,
    private readonly tableName: string,
  ) {
    this.doc = DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
  }

  async apply(entry: IndexEntry): Promise<IndexApplied> {
    try {
      // ALL_OLD: the entry it replaced comes back with the answer (no read, no extra unit), so
      // a counter of approved entries can follow the writes.
      const { Attributes } = await this.doc.send(
        new PutCommand({
          TableName: this.tableName,
          Item: { ...entry, indexedAt: new Date().toISOString() },
          ConditionExpression: 'attribute_not_exists(#taskId) OR #version < :version',
          ExpressionAttributeNames: { '#taskId': 'taskId', '#version': 'version' },
          ExpressionAttributeValues: { ':version': entry.version },
          ReturnValues: 'ALL_OLD',
        }),
      );
      const replaced = Attributes?.status;
      return {
        outcome: 'applied',
        replaced: replaced === 'approved' || replaced === 'withdrawn' ? replaced : null,
      };
    } catch (err) {
      if ((err as { name?: string } | null)?.name === 'ConditionalCheckFailedException')
        return { outcome: 'stale', replaced: null };
      throw new Error(`content index write of task ${entry.taskId} v${entry.version} failed`, { cause: err });
    }
  }

  async get(taskId: string): Promise<IndexEntry | undefined> {
    const output = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: { taskId }, ConsistentRead: true }),
    );
    if (!output.Item) return undefined;
    const { indexedAt: _indexedAt, ...entry } = output.Item;
    return entry as IndexEntry;
  }
}

/**
 * The index entry an event asks for: approved content, or a withdrawn tombstone. A rejection
 * is not routed here (only a pending task, never indexed, can be rejected): it has no entry.
 */
export function indexEntryFor(event: PipelineCloudEvent): IndexEntry {
  if (event.type === eventTypes.approved) {
    const d = event.data;
    return {
      taskId: d.taskId,
      version: d.version,
      status: 'approved',
      title: d.title,
      assignee: d.assignee,
      reviewer: d.reviewer,
      approvedAt: d.approvedAt,
      eventId: event.id,
    };
  }
  if (event.type !== eventTypes.withdrawn) {
    throw new TypeError(`the index has no entry for ${event.type}`);
  }
  const d = event.data;
  return {
    taskId: d.taskId,
    version: d.version,
    status: 'withdrawn',
    withdrawnBy: d.withdrawnBy,
    reason: d.reason,
    withdrawnAt: d.withdrawnAt,
    eventId: event.id,
  };
}

/** The index consumer's effect: apply the event's entry; a stale version is a no-op, not an error. */
export function indexEffect(index: ContentIndex): ConsumerEffect {
  return async (event) => {
    const entry = indexEntryFor(event);
    const { outcome, replaced } = await index.apply(entry);
    return { outcome, status: entry.status, version: entry.version, replaced };
  };
}

/** The index consumer's effect over its content-index table (on AWS, or the local DynamoDB). */
export const effect = defineEffect(index, ({ contentIndex }) =>
  indexEffect(new DynamoContentIndex(contentIndex.client, contentIndex.tableName)),
);
