import type { Migration } from '../migration';

/** Tasks and the transactional outbox (see ../shared/design.md, "Data model"). */
export const migration0001: Migration = {
  version: 1,
  name: 'tasks-and-outbox',
  statements: [
    `CREATE TABLE tasks (
       task_id          uuid PRIMARY KEY,
       title            text NOT NULL CHECK (length(title) BETWEEN 1 AND 500),
       body             text,
       assignee         text,
       status           text NOT NULL DEFAULT 'pending_review'
                        CHECK (status IN ('pending_review', 'approved', 'rejected', 'withdrawn')),
       version          integer NOT NULL DEFAULT 1 CHECK (version >= 1),
       reviewer         text,
       created_at       timestamptz NOT NULL DEFAULT now(),
       updated_at       timestamptz NOT NULL DEFAULT now(),
       approved_at      timestamptz,
       withdrawn_at     timestamptz,
       withdrawn_by     text,
       withdraw_reason  text
     )`,
    `CREATE TABLE outbox (
       event_id          uuid PRIMARY KEY,
       event_type        text NOT NULL,
       aggregate_id      uuid NOT NULL,
       aggregate_version integer NOT NULL,
       payload           jsonb NOT NULL,
       created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
       status            text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'dead')),
       attempts          integer NOT NULL DEFAULT 0,
       next_attempt_at   timestamptz NOT NULL DEFAULT now(),
       claim_owner       text,
       claim_token       bigint NOT NULL DEFAULT 0,
       lease_until       timestamptz,
       delivered_at      timestamptz,
       bus_event_id      text,
       last_error        text,
       UNIQUE (aggregate_id, aggregate_version, event_type)
     )`,
    // Serves the relay's claim: only pending rows, in commit-ish order.
    `CREATE INDEX outbox_pending_idx ON outbox (created_at) WHERE status = 'pending'`,
    // Serves the purge of delivered rows past retention.
    `CREATE INDEX outbox_delivered_idx ON outbox (delivered_at) WHERE status = 'delivered'`,
    `CREATE INDEX outbox_dead_idx ON outbox (created_at) WHERE status = 'dead'`,
    `CREATE INDEX outbox_aggregate_idx ON outbox (aggregate_id)`,
  ],
};
