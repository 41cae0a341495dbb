import type { Migration } from '../migration';

/**
 * A create sent again is the same create: `POST /tasks` takes an `Idempotency-Key` header (as
 * Stripe's API does, and AWS's client tokens), kept with the task it made.
 *
 * - `idempotency_key`: the key, unique among the tasks that have one (a partial unique index:
 *   tasks created without a key hold no entry). The create's INSERT lets the index refuse a
 *   second task under the same key (`ON CONFLICT DO NOTHING`) and answers the first.
 * - `request_hash`: the SHA-256 (hex) of the create request the key came with, so the same key
 *   sent with another request is told apart from a retry (422) rather than answered with a task
 *   it did not ask for.
 *
 * Both columns are written once, by the create, and never changed. The tasks API's role already
 * reads and writes every column of `tasks` (0002's grant is table-wide). The index is built in
 * the migration's transaction, over the tasks already there (none has a key), as 0009's were.
 */
export const migration0011: Migration = {
  version: 11,
  name: 'task-idempotency-keys',
  statements: [
    'ALTER TABLE tasks ADD COLUMN idempotency_key text, ADD COLUMN request_hash text',
    'CREATE UNIQUE INDEX tasks_idempotency_key_idx ON tasks (idempotency_key) WHERE idempotency_key IS NOT NULL',
  ],
};
