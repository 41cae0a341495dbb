/**
 * A local RDS Data API endpoint over the embedded PostgreSQL, for DataApiSqlClient tests with
 * the real `RDSDataClient`. It copies AWS where local emulators are kinder than AWS, because a
 * kinder endpoint hides bugs until deploy: a bare stringValue binds as `character varying`,
 * TIMESTAMP hints need `YYYY-MM-DD HH:MM:SS`, one statement per call, one call at a time per
 * transaction, SQL errors carry their SQLState, results over 1 MiB or rows over 64 KB fail.
 * Marked (I) in `data-api/`: behaviour inferred from pgjdbc (which the Data API runs on), not
 * observed.
 *
 * `data-api/server.ts` serves the calls; `statement.ts` runs one; `sql-scan.ts`,
 * `parameters.ts`, `results.ts` and `errors.ts` hold what it reads, binds, returns and answers.
 */
export { startDataApiServer } from './data-api/server';
export type {
  DataApiOperation,
  DataApiServer,
  DataApiServerOptions,
  FailureDecider,
  InjectedAnswer,
  InjectedFailure,
  SecretLogin,
} from './data-api/types';
