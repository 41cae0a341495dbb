import { functionRoles } from './0002-function-roles';
import type { Migration } from './index';

/** Counter shards per counter: each task or event adds to one, chosen from its id, so no row is hot. */
const counterShards = 16;

/** The shard of a uuid: its last byte, modulo the shard count (uniform for random uuids). */
const shardOf = (uuid: string) => `(get_byte(uuid_send(${uuid}), 15) % ${counterShards})`;

/**
 * Reads whose cost does not grow with history, and the relay's run lease.
 *
 * - `outbox_created_idx`: the ops API's latest events (`ORDER BY created_at DESC LIMIT n`) read
 *   n index entries instead of sorting the whole table. Built in the migration's transaction:
 *   a deploy onto a large outbox blocks approvals while it builds (CONCURRENTLY cannot run in a
 *   transaction).
 * - `pipeline_counters`: task counts by status and the outbox's appended and deleted rows,
 *   maintained by triggers on the writes that change them (the tasks API's, the purge's), in
 *   16 shards per counter so concurrent approvals do not queue on one row. The ops status sums
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
    // Counter rows are touched in name order (sorted in each statement) so that two
    // transactions never lock two of them in opposite orders.
    `CREATE FUNCTION pipeline_count_task_status() RETURNS trigger
       LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
     DECLARE
       s smallint;
     BEGIN
       IF TG_OP = 'DELETE' THEN
         s := ${shardOf('OLD.task_id')};
         INSERT INTO pipeline_counters AS c (name, shard, n) VALUES ('tasks.' || OLD.status, s, -1)
           ON CONFLICT (name, shard) DO UPDATE SET n = c.n + EXCLUDED.n;
         RETURN NULL;
       END IF;
       s := ${shardOf('NEW.task_id')};
       IF TG_OP = 'INSERT' THEN
         INSERT INTO pipeline_counters AS c (name, shard, n) VALUES ('tasks.' || NEW.status, s, 1)
           ON CONFLICT (name, shard) DO UPDATE SET n = c.n + EXCLUDED.n;
       ELSIF OLD.status IS DISTINCT FROM NEW.status THEN
         INSERT INTO pipeline_counters AS c (name, shard, n)
           SELECT name, s, delta FROM (VALUES ('tasks.' || OLD.status, -1), ('tasks.' || NEW.status, 1)) AS d (name, delta)
            ORDER BY name
           ON CONFLICT (name, shard) DO UPDATE SET n = c.n + EXCLUDED.n;
       END IF;
       RETURN NULL;
     END $$`,
    `CREATE TRIGGER tasks_count_status AFTER INSERT OR DELETE OR UPDATE OF status ON tasks
       FOR EACH ROW EXECUTE FUNCTION pipeline_count_task_status()`,
    `CREATE FUNCTION pipeline_count_outbox_append() RETURNS trigger
       LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
     BEGIN
       INSERT INTO pipeline_counters AS c (name, shard, n) VALUES ('outbox.appended', ${shardOf('NEW.event_id')}, 1)
         ON CONFLICT (name, shard) DO UPDATE SET n = c.n + 1;
       RETURN NULL;
     END $$`,
    `CREATE TRIGGER outbox_count_append AFTER INSERT ON outbox
       FOR EACH ROW EXECUTE FUNCTION pipeline_count_outbox_append()`,
    // Once per DELETE statement (a purge batch), whatever its size.
    `CREATE FUNCTION pipeline_count_outbox_delete() RETURNS trigger
       LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
     DECLARE
       deleted bigint;
     BEGIN
       SELECT count(*) INTO deleted FROM gone;
       IF deleted > 0 THEN
         INSERT INTO pipeline_counters AS c (name, shard, n)
           VALUES ('outbox.deleted', (pg_backend_pid() % ${counterShards})::smallint, deleted)
           ON CONFLICT (name, shard) DO UPDATE SET n = c.n + EXCLUDED.n;
       END IF;
       RETURN NULL;
     END $$`,
    `CREATE TRIGGER outbox_count_delete AFTER DELETE ON outbox REFERENCING OLD TABLE AS gone
       FOR EACH STATEMENT EXECUTE FUNCTION pipeline_count_outbox_delete()`,
    // What was there before the counters: counted once, here.
    `INSERT INTO pipeline_counters (name, shard, n)
       SELECT 'tasks.' || status, 0, count(*) FROM tasks GROUP BY status`,
    `INSERT INTO pipeline_counters (name, shard, n)
       SELECT 'outbox.appended', 0, count(*) FROM outbox HAVING count(*) > 0`,
    ...['pipeline_count_task_status', 'pipeline_count_outbox_append', 'pipeline_count_outbox_delete'].map(
      (fn) => `REVOKE EXECUTE ON FUNCTION ${fn}() FROM PUBLIC`,
    ),
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
