import { createSqlClient, parseConfig } from '../../../config';
import type { FunctionRole } from '../../../db/roles';
import type { SqlClient } from '../../../db/sql-client';

/**
 * A database resource on AWS: the function's database settings, logged in as the resource's
 * role (the Data API on Aurora; on a postgres:// URL a pool named and bounded for that role).
 */
export const functionDatabase = (role: FunctionRole): SqlClient => createSqlClient(parseConfig(), role);
