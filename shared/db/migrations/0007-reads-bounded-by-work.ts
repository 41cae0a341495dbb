import type { Migration } from '../migration';
import { functionRoles } from '../roles';

/** Counter shards per counter: each statement adds to its backend's, so no row is hot. */
const counterShards = 16;

/**
 * Reads whose cost does not grow with history, and the relay's run lease.
 *
 * - `outbox_created_idx`: the ops API's latest events (`ORDER BY created_at DESC LIMIT n`) read
 *   n index entries instead of sorting the whole table. Built in the migration's transaction:
 *   a deploy onto a large outbox blocks approvals while it builds (CONCURRENTLY cannot run in a
 *   transaction).
 * - `pipeline_counters`: task counts by status and the outbox's appended and deleted rows,
 *   maintained by statement-level triggers on the writes that change them (the tasks API's,
 *   the purge's), in 16 shards per counter so concurrent approvals do not queue on one row. The ops status sums
 *   48 rows; the relay's statements never touch them. Delivered rows are derived from them
 *   (appended - deleted - pending - dead) instead of counted.
 *   https://www.postgresql.org/docs/current/plpgsql-trigger.html
 * - `relay_lease`: a run of the relay holds slot 0 while it drains, so a nudge that finds a
 *   run in progress starts no other (slots 1.. are helpers a run starts on a backlog); the
 *   tasks API reads slot 0 to decide whether to nudge at all.
 * - `relay_writers_in_flight`: after releasing its slot, a run waits until no tasks-API
 *   transaction that started before the release is still open (it may have read the lease as
 *   held and skipped the nudge), then looks for due rows once more: a lost wake-up has no window.
 *   SECURITY DEFINER because only a privileged role sees other roles' `xact_start`:
 *   https://www.postgresql.org/docs/current/monitoring-stats.html#MONITORING-PG-STAT-ACTIVITY-VIEW
 */
export const migration0007: Migration = {
  version: 7,
  name: 'reads-bounded-by-work',
  statements: [
    'CREATE INDEX outbox_created_idx ON outbox (created_at)',
    `CREATE TABLE pipeline_counters (
       name  text NOT NULL,
       shard smallint NOT NULL,
       n     bigint NOT NULL DEFAULT 0,
       PRIMARY KEY (name, shard)
     )`,
    // Statement-level triggers with transition tables: one counter write per statement, however
    // many rows it changed (row-level ones made a bulk insert rewrite the same counter row once
    // per row, a chain of versions each later write walks: quadratic). The shard is the
    // backend's, so concurrent statements (one backend each) spread over the shards; each
    // statement touches its counter rows in name order, so two never wait on each other in a
    // cycle. https://www.postgresql.org/docs/current/sql-createtrigger.html
    `CREATE FUNCTION pipeline_count(deltas jsonb) RETURNS void
       LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
       INSERT INTO pipeline_counters AS c (name, shard, n)
       SELECT d.key, (pg_backend_pid() % ${counterShards})::smallint, d.value::bigint
         FROM jsonb_each_text(deltas) AS d
        WHERE d.value::bigint <> 0
        ORDER BY d.key
       ON CONFLICT (name, shard) DO UPDATE SET n = c.n + EXCLUDED.n
     $$`,
    `CREATE FUNCTION pipeline_count_tasks() RETURNS trigger
       LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
     BEGIN
       IF TG_OP = 'INSERT' THEN
         PERFORM pipeline_count((SELECT jsonb_object_agg('tasks.' || status, n)
                                   FROM (SELECT status, count(*) AS n FROM added GROUP BY status) AS x));
       ELSIF TG_OP = 'DELETE' THEN
         PERFORM pipeline_count((SELECT jsonb_object_agg('tasks.' || status, -n)
                                   FROM (SELECT status, count(*) AS n FROM gone GROUP BY status) AS x));
       ELSE
         PERFORM pipeline_count((SELECT jsonb_object_agg('tasks.' || status, n)
                                   FROM (SELECT status, sum(delta) AS n
                                           FROM (SELECT b.status, -1 AS delta FROM gone b JOIN added a USING (task_id)
                                                  WHERE a.status IS DISTINCT FROM b.status
                                                 UNION ALL
                                                 SELECT a.status, 1 FROM gone b JOIN added a USING (task_id)
                                                  WHERE a.status IS DISTINCT FROM b.status) AS moves
                                          GROUP BY status) AS x));
       END IF;
       RETURN NULL;
     END $$`,
    `CREATE TRIGGER tasks_count_inserts AFTER INSERT ON tasks REFERENCING NEW TABLE AS added
       FOR EACH STATEMENT EXECUTE FUNCTION pipeline_count_tasks()`,
    `CREATE TRIGGER tasks_count_updates AFTER UPDATE ON tasks REFERENCING OLD TABLE AS gone NEW TABLE AS added
       FOR EACH STATEMENT EXECUTE FUNCTION pipeline_count_tasks()`,
    `CREATE TRIGGER tasks_count_deletes AFTER DELETE ON tasks REFERENCING OLD TABLE AS gone
       FOR EACH STATEMENT EXECUTE FUNCTION pipeline_count_tasks()`,
    `CREATE FUNCTION pipeline_count_outbox() RETURNS trigger
       LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
     BEGIN
       IF TG_OP = 'INSERT' THEN
         PERFORM pipeline_count(jsonb_build_object('outbox.appended', (SELECT count(*) FROM added)));
       ELSE
         PERFORM pipeline_count(jsonb_build_object('outbox.deleted', (SELECT count(*) FROM gone)));
       END IF;
       RETURN NULL;
     END $$`,
    `CREATE TRIGGER outbox_count_inserts AFTER INSERT ON outbox REFERENCING NEW TABLE AS added
       FOR EACH STATEMENT EXECUTE FUNCTION pipeline_count_outbox()`,
    // Once per DELETE statement (a purge batch), whatever its size.
    `CREATE TRIGGER outbox_count_deletes AFTER DELETE ON outbox REFERENCING OLD TABLE AS gone
       FOR EACH STATEMENT EXECUTE FUNCTION pipeline_count_outbox()`,
    // What was there before the counters: counted once, here.
    `INSERT INTO pipeline_counters (name, shard, n)
       SELECT 'tasks.' || status, 0, count(*) FROM tasks GROUP BY status`,
    `INSERT INTO pipeline_counters (name, shard, n)
       SELECT 'outbox.appended', 0, count(*) FROM outbox HAVING count(*) > 0`,
    'REVOKE EXECUTE ON FUNCTION pipeline_count(jsonb) FROM PUBLIC',
    'REVOKE EXECUTE ON FUNCTION pipeline_count_tasks() FROM PUBLIC',
    'REVOKE EXECUTE ON FUNCTION pipeline_count_outbox() FROM PUBLIC',
    `GRANT SELECT ON pipeline_counters TO ${functionRoles.ops}`,

    `CREATE TABLE relay_lease (
       slot        smallint PRIMARY KEY CHECK (slot >= 0),
       owner       text,
       lease_until timestamptz
     )`,
    'INSERT INTO relay_lease (slot) SELECT generate_series(0, 15)',
    `GRANT SELECT, UPDATE (owner, lease_until) ON relay_lease TO ${functionRoles.relay}`,
    `GRANT SELECT (slot, owner, lease_until) ON relay_lease TO ${functionRoles.tasksApi}, ${functionRoles.ops}`,
    `CREATE FUNCTION relay_writers_in_flight(since timestamptz) RETURNS integer
       LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
       SELECT count(*)::integer FROM pg_stat_activity
        WHERE datname = current_database() AND usename = '${functionRoles.tasksApi}'
          AND xact_start < since
     $$`,
    'REVOKE EXECUTE ON FUNCTION relay_writers_in_flight(timestamptz) FROM PUBLIC',
    `GRANT EXECUTE ON FUNCTION relay_writers_in_flight(timestamptz) TO ${functionRoles.relay}`,
  ],
};
