import { createSqlClient, parseConfig } from '../../../config';
import type { SqlClient } from '../../../db/sql-client';

/** A database resource on AWS: the function's database settings, logged in as its role (the Data API on Aurora). */
export const functionDatabase = (): SqlClient => createSqlClient(parseConfig(), 'taskReader');
