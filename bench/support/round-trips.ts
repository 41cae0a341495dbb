import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { DataApiSqlClient } from '../../shared/db/data-api-client';
import { migrate } from '../../shared/db/migrate';
import { PgSqlClient } from '../../shared/db/pg-client';
import { approveTask, createTask, withdrawTask } from '../../shared/tasks/commands';
import { startDataApiServer } from '../../test/support/data-api-server';
import { startEmbeddedPostgres } from '../../test/support/embedded-pg';

/** Data API calls on the caller's path of one approve and one withdraw. */
export interface ChangeRoundTrips {
  readonly approveRoundTrips: number;
  readonly withdrawRoundTrips: number;
}

/**
 * Counts the RDS Data API calls an approve and a withdraw make, through the real SDK and the
 * Data API endpoint the tests use (each call is one HTTPS round trip on AWS): the median over
 * `changes` tasks. A count, not a timing: the same on any machine.
 */
export async function measureChangeRoundTrips(changes = 20): Promise<ChangeRoundTrips> {
  const pgServer = await startEmbeddedPostgres();
  try {
    const owner = new PgSqlClient({ connectionString: pgServer.url });
    await migrate(owner);
    await owner.close();
    const server = await startDataApiServer(pgServer.url);
    const client = new RDSDataClient({
      endpoint: server.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    try {
      const db = new DataApiSqlClient({
        client,
        resourceArn: server.resourceArn,
        secretArn: server.secretArn,
        database: server.database,
      });
      const counts = { approve: [] as number[], withdraw: [] as number[] };
      for (let i = 0; i < changes; i++) {
        const task = await createTask({ title: `round trips ${i}` }, { db });
        let before = server.calls.length;
        await approveTask({ taskId: task.taskId, approvedBy: 'rita' }, { db });
        counts.approve.push(server.calls.length - before);
        before = server.calls.length;
        await withdrawTask({ taskId: task.taskId, withdrawnBy: 'rita' }, { db });
        counts.withdraw.push(server.calls.length - before);
      }
      const mid = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
      return { approveRoundTrips: mid(counts.approve), withdrawRoundTrips: mid(counts.withdraw) };
    } finally {
      client.destroy();
      await server.close();
    }
  } finally {
    await pgServer.stop();
  }
}
