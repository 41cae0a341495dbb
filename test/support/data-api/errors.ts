import type pg from 'pg';

/** An error the endpoint answers: its HTTP status, its type (`x-amzn-errortype`) and members beside `message`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly errorType: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** The status AWS answers each error with, for an injected failure that names none. */
export const statusByName: Record<string, number> = {
  AccessDeniedException: 403,
  ForbiddenException: 403,
  NotFoundException: 404,
  DatabaseNotFoundException: 404,
  TransactionNotFoundException: 404,
  InternalServerErrorException: 500,
  ServiceUnavailableError: 503,
  DatabaseUnavailableException: 504,
};

/** The Data API's refusal of a request it will not run (400 ValidationException). */
export const validation = (message: string) => new ApiError(400, 'ValidationException', message);

function sqlErrorMessage(err: pg.DatabaseError): string {
  const parts = [`${err.severity ?? 'ERROR'}: ${err.message}`];
  if (err.detail) parts.push(`Detail: ${err.detail}`);
  if (err.hint) parts.push(`Hint: ${err.hint}`);
  if (err.position) parts.push(`Position: ${err.position}`);
  parts.push(`SQLState: ${err.code}`);
  return parts.join('; ');
}

/** A PostgreSQL error as the Data API reports it: the SQLState travels in the message text. */
export function translateSqlError(err: unknown, connectionId: number): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as pg.DatabaseError;
  if (typeof e.code !== 'string' || e.code.length !== 5) {
    return new ApiError(500, 'InternalServerErrorException', String((err as Error).message ?? err));
  }
  // Extended-protocol PostgreSQL refuses several commands in one Parse; AWS checks first.
  if (e.code === '42601' && /multiple commands/.test(e.message)) {
    return validation("Multistatements aren't supported.");
  }
  if (e.code === '57014' && /statement timeout/.test(e.message)) {
    return new ApiError(400, 'StatementTimeoutException', 'Request timed out', {
      dbConnectionId: connectionId,
    });
  }
  return new ApiError(400, 'DatabaseErrorException', sqlErrorMessage(e));
}
