import type { Migration } from '../migration';

/**
 * Finding tasks and rejecting them.
 *
 * - `tasks_created_idx` on `(created_at, task_id)` and `tasks_status_created_idx` on
 *   `(status, created_at, task_id)`: `GET /tasks` pages newest first by the key
 *   `(created_at, task_id)` (the id orders tasks created in the same microsecond), all tasks or
 *   one status's. Each page is a range of one of them read backwards, `limit + 1` entries, so a
 *   page costs the same on the millionth task as on the first. Built in the migration's
 *   transaction, as 0007's index was.
 * - `rejected_at` and `reject_reason`: a reviewer's refusal of a pending task
 *   (`POST /tasks/{id}/reject`); the rejecter is recorded in `reviewer`, as the approver is. The
 *   tasks API's role already updates every column of `tasks` (0002's grant is table-wide).
 */
export const migration0009: Migration = {
  version: 9,
  name: 'task-listing-and-rejection',
  statements: [
    'CREATE INDEX tasks_created_idx ON tasks (created_at, task_id)',
    'CREATE INDEX tasks_status_created_idx ON tasks (status, created_at, task_id)',
    'ALTER TABLE tasks ADD COLUMN rejected_at timestamptz, ADD COLUMN reject_reason text',
  ],
};
