import type { Migration } from '../migration';

/**
 * Leaves 30% of each outbox page free, so that a claim's update (owner, token, lease,
 * attempts: no indexed column) can be a heap-only tuple update: the new version stays on its
 * page and no index gets a new entry. Packed pages (the default fillfactor, 100) sent every
 * claimed row to another page and wrote it into the primary key, the pending and the
 * aggregate indexes. The mark cannot be heap-only (it changes `status` and `delivered_at`,
 * which indexes cover). Rows written before this migration keep their packed pages until
 * they are purged. https://www.postgresql.org/docs/current/storage-hot.html
 */
export const migration0006: Migration = {
  version: 6,
  name: 'outbox-room-for-hot-claims',
  statements: ['ALTER TABLE outbox SET (fillfactor = 70)'],
};
