import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { DataApiSqlClient } from '../../shared/db/data-api-client';
import { PgSqlClient } from '../../shared/db/pg-client';
import { applicationName, type ConnectionHolder, timeoutsOf } from '../../shared/db/pg-settings';
import type { FunctionRole } from '../../shared/db/roles';
import type { SqlClient } from '../../shared/db/sql-client';
import { startDataApiServer } from './data-api-server';
import { createTestDatabase } from './database';

/**
 * Every SqlClient adapter, for contract suites: `describe.each(sqlAdapters)` runs the same
 * repository tests on each against the same embedded PostgreSQL.
 */
export interface SqlAdapterFactory {
  readonly name: string;
  /**
   * Opens a client on the database at `url` (a postgres:// URL of the embedded server) for
   * `holder`: on the pg adapter its pool's timeouts and application_name, as the function's own
   * (the schema owner's by default: fixtures seed and index whole tables).
   */
  open(url: string, holder?: ConnectionHolder): Promise<{ db: SqlClient; close: () => Promise<void> }>;
}

export const pgAdapter: SqlAdapterFactory = {
  name: 'pg',
  async open(url, holder = 'owner') {
    const db = new PgSqlClient({
      connectionString: url,
      applicationName: applicationName(holder),
      timeouts: timeoutsOf(holder),
    });
    return { db, close: () => db.close() };
  },
};

/**
 * The Data API adapter through the real SDK and a local Data API endpoint (one per open), so
 * the suite also covers the wire format: field types, error names, SQLStates in messages.
 */
export const dataApiAdapter: SqlAdapterFactory = {
  name: 'data-api',
  async open(url) {
    const server = await startDataApiServer(url);
    const client = new RDSDataClient({
      endpoint: server.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    const db = new DataApiSqlClient({
      client,
      resourceArn: server.resourceArn,
      secretArn: server.secretArn,
      database: server.database,
      // Against a local endpoint a resume never happens; a short policy keeps a real failure fast.
      retry: { attempts: 3, baseMs: 10, maxMs: 50 },
    });
    return {
      db,
      async close() {
        await db.close();
        client.destroy();
        await server.close();
      },
    };
  },
};

/** What contract suites iterate over: every adapter the pipeline ships. */
export const sqlAdapters: readonly SqlAdapterFactory[] = [pgAdapter, dataApiAdapter];

/**
 * A fresh migrated database opened through `adapter`, as the schema owner or, with `role`, as
 * that function's own role (so a missing grant fails the test); `close` closes the client and
 * drops the database. `urlAs` gives any role's URL for clients the test opens itself.
 */
export async function openTestDatabase(
  adapter: SqlAdapterFactory = pgAdapter,
  role?: FunctionRole,
): Promise<{
  db: SqlClient;
  url: string;
  urlAs: (role: FunctionRole) => string;
  close: () => Promise<void>;
}> {
  const database = await createTestDatabase();
  const opened = await adapter.open(role ? database.urlAs(role) : database.url, role ?? 'owner');
  return {
    db: opened.db,
    url: database.url,
    urlAs: database.urlAs,
    close: async () => {
      await opened.close();
      await database.drop();
    },
  };
}

/**
 * A test database for the relay: the schema owner's client for fixtures and checks, and the
 * relay role's client (its grants only) for the relay under test, with the URL it logs in by.
 */
export async function openRelayTestDatabase(): Promise<{
  db: SqlClient;
  relayDb: SqlClient;
  relayUrl: string;
  /** The tasks API role's URL: a writer of outbox rows, as the relay's run lease sees them. */
  tasksUrl: string;
  close: () => Promise<void>;
}> {
  const opened = await openTestDatabase();
  const relayUrl = opened.urlAs('relay');
  const asRelay = await pgAdapter.open(relayUrl, 'relay');
  return {
    db: opened.db,
    relayDb: asRelay.db,
    relayUrl,
    tasksUrl: opened.urlAs('tasksApi'),
    close: async () => {
      await asRelay.close();
      await opened.close();
    },
  };
}
