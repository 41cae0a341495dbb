import { randomUUID } from 'node:crypto';
import {
  decodeCursor,
  encodeCursor,
  type OpenStatus,
  openSinceTime,
  recordKey,
} from '../../shared/inbox/dynamo-inbox-table';
import { InboxNotDeadError, InboxRecordNotFoundError } from '../../shared/inbox/errors';
import type {
  InboxOps,
  InboxPage,
  InboxPresence,
  OpenFigure,
  OpenFigures,
} from '../../shared/inbox/inbox-ops';
import type { InboxKey, InboxRecord } from '../../shared/inbox/inbox-store';
import {
  byteOrder,
  decode,
  indexKeys,
  type MemoryInboxStore,
  type MemoryInboxTable,
  type MemoryItem,
} from './memory-inbox-store';

/**
 * The operator's inbox port in memory, over the table of a `MemoryInboxStore`, as
 * `DynamoInboxOps` reads the table the consumers' `DynamoInboxStore` writes. Only the contract
 * suite (test/integration/inbox-store-contract.test.ts) uses it: it holds the in-memory store's
 * index and redrive to what the DynamoDB engines do, with the same ordering and cursors.
 */
export class MemoryInboxOps implements InboxOps, InboxPresence {
  private readonly table: MemoryInboxTable;

  constructor(private readonly store: MemoryInboxStore) {
    this.table = store.table;
  }

  async get(k: InboxKey): Promise<InboxRecord | undefined> {
    return this.store.get(k);
  }

  async openFigures(consumer: string): Promise<OpenFigures> {
    const figure = (status: OpenStatus): OpenFigure => {
      const entries = this.table.indexed(consumer, status);
      const oldest = entries[0]?.index?.openSince;
      return { count: entries.length, oldestSince: oldest === undefined ? null : openSinceTime(oldest) };
    };
    return { PROCESSING: figure('PROCESSING'), FAILED: figure('FAILED'), DEAD: figure('DEAD') };
  }

  async present(keys: readonly InboxKey[]): Promise<ReadonlySet<string>> {
    return new Set(keys.filter((k) => this.table.has(k)).map(recordKey));
  }

  async listDead(consumer: string, page: { limit?: number; cursor?: string } = {}): Promise<InboxPage> {
    const limit = Math.max(1, page.limit ?? 50);
    const after = page.cursor === undefined ? undefined : decodeCursor(page.cursor, consumer);
    const dead = this.table
      .indexed(consumer, 'DEAD')
      .filter((item) => after === undefined || byteOrder(item.index?.openSince ?? '', after) > 0);
    const shown = dead.slice(0, limit);
    const last = shown.at(-1)?.index?.openSince;
    const records = shown.map(decode);
    return dead.length > limit && last ? { records, cursor: encodeCursor(consumer, last) } : { records };
  }

  async redrive(k: InboxKey, now: number): Promise<InboxRecord> {
    const item = this.table.item(k);
    if (!item) throw new InboxRecordNotFoundError(k);
    if (item.record.status !== 'DEAD') throw new InboxNotDeadError(k, item.record.status);
    Object.assign(item.record, {
      status: 'FAILED',
      attempts: 0,
      nextAttemptAt: 0,
      firstAttemptAt: now,
      permanentFailures: 0,
      leaseOwner: `redrive/${randomUUID()}`,
      leaseUntil: 0,
      updatedAt: now,
      lastError: `redriven at ${new Date(now).toISOString()}`,
    } satisfies Partial<MemoryItem['record']>);
    delete item.record.expiresAt;
    delete item.record.lastFailure;
    item.index = indexKeys(k, 'FAILED', now);
    return decode(item);
  }
}
