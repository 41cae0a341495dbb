import type { FunctionRole } from './roles';

/**
 * How long a node-postgres pool and the PostgreSQL server wait, in one place. Without them a
 * server that stops answering (a stopped postmaster, a stopped or partitioned backend) holds
 * every caller for as long as it is stopped, and a statement sent before it stopped commits
 * when it goes on, long after its caller was told it failed. With them a hang becomes an error
 * within seconds, classified by what it proves (see `pg-client.ts`):
 *
 * - a connect that timed out sent no statement: nothing happened, the request may be sent again
 *   (503 with Retry-After);
 * - a statement the server cancelled (its `statement_timeout`, `lock_timeout`) did not take
 *   effect (SQLSTATE 57014, 55P03);
 * - a statement the server never answered (the client's `query_timeout`) may still run and
 *   commit: its outcome is unknown, and it is never reported as "nothing happened".
 *
 * Each figure is milliseconds; 0 turns a timeout off.
 */
export interface PgTimeouts {
  /**
   * node-postgres `connectionTimeoutMillis`: the longest wait for a connection, a new one (TCP,
   * startup, SCRAM, a backend forked) or a pooled one (pg-pool applies it to a wait for a free
   * client too). Loopback and in-VPC connects take milliseconds; 5 s stays far above that on a
   * machine loaded to ten times its cores, and leaves room for a statement within API Gateway's
   * 29 s. A stopped postmaster takes the TCP connection into its listen backlog and never
   * answers the startup message: this is what ends that wait.
   */
  readonly connectMs: number;
  /**
   * PostgreSQL `statement_timeout`, sent at connect: the server cancels a statement running this
   * long (SQLSTATE 57014), rolled back. The pipeline's statements touch one row or a bounded
   * batch (a claim of at most `claimBatchSize` rows and 1 MiB, a purge of `purge.batchSize`)
   * through indexes, in milliseconds.
   * https://www.postgresql.org/docs/current/runtime-config-client.html#GUC-STATEMENT-TIMEOUT
   */
  readonly statementMs: number;
  /**
   * node-postgres `query_timeout`: the client stops waiting for an answer after this long and
   * drops the connection (pg-pool removes a client whose query failed; ending a client with a
   * query in flight destroys its socket). Longer than `statementMs` by the time the server's own
   * cancellation takes to arrive, so it fires only when the server cannot answer at all. The
   * statement may still run, and commit, once the server goes on: DB_OUTCOME_UNKNOWN.
   */
  readonly queryMs: number;
  /**
   * PostgreSQL `lock_timeout`: the longest wait for a lock (a row, a table, an advisory lock),
   * below `statementMs` so that a wait behind a hung holder ends as a refusal (SQLSTATE 55P03,
   * nothing done) rather than as a statement timeout. The pipeline's locks are held for one
   * statement, or one migration's transaction.
   * https://www.postgresql.org/docs/current/runtime-config-client.html#GUC-LOCK-TIMEOUT
   */
  readonly lockMs: number;
  /**
   * PostgreSQL `idle_in_transaction_session_timeout`: the server ends a session idle inside a
   * transaction this long, rolling it back and freeing its locks. The pipeline's transactions
   * (migrations, role passwords) send their statements back to back, so such a session belongs
   * to a client that hung or died holding locks everyone else waits for.
   * https://www.postgresql.org/docs/current/runtime-config-client.html#GUC-IDLE-IN-TRANSACTION-SESSION-TIMEOUT
   */
  readonly idleInTransactionMs: number;
}

/** The timeouts of every function's pool (the tasks API, the relay, ops, the audit, consumers). */
export const pgTimeouts: PgTimeouts = {
  connectMs: 5_000,
  statementMs: 10_000,
  queryMs: 12_000,
  lockMs: 5_000,
  idleInTransactionMs: 10_000,
};

/**
 * The schema owner's: migrations may build an index over every row of a table, and a migration
 * waits for the one before it on an advisory lock (`migrate.ts`), so statements and lock waits
 * get minutes; connects and idle transactions are bounded as everyone's.
 */
export const schemaOwnerTimeouts: PgTimeouts = {
  ...pgTimeouts,
  statementMs: 600_000,
  queryMs: 602_000,
  lockMs: 120_000,
};

/**
 * The local runtime's health probe of PostgreSQL (`infra/local/postgres-probe.ts`): `SELECT 1`
 * on a new connection, one probe after another.
 */
export const probeSettings = {
  /**
   * One probe's deadline: a loopback connect (a backend forked, SCRAM) and a trivial statement
   * take milliseconds, so 2 s is a hang, and an operator reading /ops/status learns of it
   * within seconds.
   */
  timeoutMs: 2_000,
  /** The pause between two probes: a new connection a second costs PostgreSQL one fork. */
  periodMs: 1_000,
  /**
   * Misses in a row before PostgreSQL counts as down: one answer slower than the deadline on a
   * machine busy with other work is not an outage; two are, about 4 to 6 s after it began.
   */
  missesToDown: 2,
} as const;

/**
 * Who holds a connection: a function's role, the schema owner (the local runtime's own client,
 * the migrate function), or the local runtime's health probe.
 */
export type ConnectionHolder = FunctionRole | 'owner' | 'probe';

/** The timeouts of a holder's pool: the schema owner's for migrations, everyone else's otherwise. */
export const timeoutsOf = (holder: ConnectionHolder): PgTimeouts =>
  holder === 'owner' ? schemaOwnerTimeouts : pgTimeouts;

/**
 * The `application_name` of a pool's connections, so an operator (and a test) tells pools apart
 * in `pg_stat_activity`: `pipeline:relay`, `pipeline:tasksApi`, ... At most 63 ASCII
 * characters, as PostgreSQL keeps it.
 * https://www.postgresql.org/docs/current/runtime-config-logging.html#GUC-APPLICATION-NAME
 */
export const applicationName = (holder: ConnectionHolder): string => `pipeline:${holder}`;
