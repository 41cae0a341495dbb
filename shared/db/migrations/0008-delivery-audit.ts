import type { Migration } from '../migration';
import { functionRoles } from '../roles';

const audit = functionRoles.audit;

/**
 * The delivery audit: it walks the delivered outbox rows behind a cursor it keeps and records
 * every (event, consumer) whose inbox has no record of an event the rules route there.
 *
 * - `outbox_delivered_idx` becomes `(delivered_at, event_id)`: the audit's walk reads its next
 *   page as a range of it (a mark sets one `delivered_at` for a whole batch, so the event id
 *   orders the ties), and the purge still reads its oldest rows from it. Built in the
 *   migration's transaction, as 0007's index was.
 * - `delivery_audit`: one row: the cursor (the last audited row's `delivered_at` and event id),
 *   the run lease (one run at a time, however the schedule and the retries overlap) and the last
 *   run's figures.
 * - `delivery_audit_findings`: what is missing, until a later run finds the record there (after
 *   a redrive, or a delivery that was only late). Counted per consumer in `pipeline_counters`
 *   (`audit.undelivered.<consumer>`) by statement triggers, so the status reads counters.
 * - The audit role reads the outbox's event columns only and writes nothing but its own tables;
 *   the ops role reads them and notes a redrive on a finding.
 */
export const migration0008: Migration = {
  version: 8,
  name: 'delivery-audit',
  statements: [
    `DO $$ BEGIN
       CREATE ROLE ${audit} NOLOGIN;
     EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
     END $$`,
    `CREATE INDEX outbox_delivered_walk_idx ON outbox (delivered_at, event_id) WHERE status = 'delivered'`,
    'DROP INDEX outbox_delivered_idx',
    `CREATE TABLE delivery_audit (
       id                  boolean PRIMARY KEY DEFAULT true CHECK (id),
       cursor_delivered_at timestamptz,
       cursor_event_id     uuid,
       lease_owner         text,
       lease_until         timestamptz,
       last_run_at         timestamptz,
       last_run_audited    integer NOT NULL DEFAULT 0,
       audited             bigint NOT NULL DEFAULT 0
     )`,
    'INSERT INTO delivery_audit DEFAULT VALUES',
    `CREATE TABLE delivery_audit_findings (
       event_id     uuid NOT NULL,
       consumer     text NOT NULL,
       delivered_at timestamptz NOT NULL,
       found_at     timestamptz NOT NULL DEFAULT now(),
       checked_at   timestamptz NOT NULL DEFAULT now(),
       redriven_at  timestamptz,
       redrives     integer NOT NULL DEFAULT 0,
       PRIMARY KEY (event_id, consumer)
     )`,
    // The recheck takes the findings checked longest ago; the list shows the oldest delivered first.
    'CREATE INDEX delivery_audit_findings_checked_idx ON delivery_audit_findings (checked_at, event_id, consumer)',
    'CREATE INDEX delivery_audit_findings_delivered_idx ON delivery_audit_findings (delivered_at, event_id, consumer)',
    `CREATE FUNCTION pipeline_count_findings() RETURNS trigger
       LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
     BEGIN
       IF TG_OP = 'INSERT' THEN
         PERFORM pipeline_count((SELECT jsonb_object_agg('audit.undelivered.' || consumer, n)
                                   FROM (SELECT consumer, count(*) AS n FROM added GROUP BY consumer) AS x));
       ELSE
         PERFORM pipeline_count((SELECT jsonb_object_agg('audit.undelivered.' || consumer, -n)
                                   FROM (SELECT consumer, count(*) AS n FROM gone GROUP BY consumer) AS x));
       END IF;
       RETURN NULL;
     END $$`,
    `CREATE TRIGGER findings_count_inserts AFTER INSERT ON delivery_audit_findings REFERENCING NEW TABLE AS added
       FOR EACH STATEMENT EXECUTE FUNCTION pipeline_count_findings()`,
    `CREATE TRIGGER findings_count_deletes AFTER DELETE ON delivery_audit_findings REFERENCING OLD TABLE AS gone
       FOR EACH STATEMENT EXECUTE FUNCTION pipeline_count_findings()`,
    'REVOKE EXECUTE ON FUNCTION pipeline_count_findings() FROM PUBLIC',
    `GRANT SELECT (event_id, event_type, aggregate_id, aggregate_version, payload, created_at, status,
                   delivered_at, bus_event_id) ON outbox TO ${audit}`,
    `GRANT SELECT, UPDATE ON delivery_audit TO ${audit}`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON delivery_audit_findings TO ${audit}`,
    `GRANT SELECT ON pipeline_counters TO ${audit}`,
    `GRANT SELECT ON delivery_audit TO ${functionRoles.ops}`,
    `GRANT SELECT, UPDATE (redriven_at, redrives) ON delivery_audit_findings TO ${functionRoles.ops}`,
  ],
};
