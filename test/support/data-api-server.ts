import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';

/**
 * A local RDS Data API endpoint over the embedded PostgreSQL, for DataApiSqlClient tests with
 * the real `RDSDataClient`. It copies AWS where local emulators are kinder than AWS (see
 * shared/reference/data-api.md §7), because a kinder endpoint hides bugs until deploy:
 * a bare stringValue binds as `character varying`, TIMESTAMP hints need `YYYY-MM-DD HH:MM:SS`,
 * one statement per call, one call at a time per transaction, SQL errors carry their SQLState.
 * Marked (I) below: behaviour inferred from pgjdbc (which the Data API runs on), not observed.
 */

/** The operations served: the SDK POSTs each to `/<name>`. */
export type DataApiOperation =
  | 'Execute'
  | 'BatchExecute'
  | 'BeginTransaction'
  | 'CommitTransaction'
  | 'RollbackTransaction';

/** An AWS error to answer instead of serving a call, e.g. a resuming cluster. */
export interface InjectedFailure {
  readonly name: string;
  readonly message?: string;
  /** Defaults to the status AWS uses for `name` (400 when unknown). */
  readonly status?: number;
  /** Only calls to this operation fail; any operation when absent. */
  readonly operation?: DataApiOperation;
  /**
   * Serve the call first, then answer the failure instead of its result: the statement ran (and,
   * outside a transaction, committed) but the caller never hears so, as when the response is
   * lost after the database did the work. @default false
   */
  readonly afterRunning?: boolean;
}

/** Decides per call whether to answer an injected failure instead (undefined: serve it). */
export type FailureDecider = (
  operation: DataApiOperation,
  request: Readonly<Record<string, unknown>>,
) => InjectedFailure | undefined;

/** One injected failure the endpoint answered. */
export interface InjectedAnswer {
  readonly operation: DataApiOperation;
  readonly name: string;
  /** The call was served before the failure was answered (see `InjectedFailure.afterRunning`). */
  readonly afterRunning: boolean;
}

/** A database login a Secrets Manager secret holds (`username` and `password`, as the Data API reads it). */
export interface SecretLogin {
  readonly username: string;
  readonly password: string;
}

/** AWS's time limits, shortened in tests that exercise them, and the secrets it can read. */
export interface DataApiServerOptions {
  /**
   * Looks a secret up as the Data API does on each call: the login is the secret's, so each
   * function reaches PostgreSQL as its own role. `secretArn` (the URL's own login) is always known.
   */
  readonly secrets?: (secretArn: string) => SecretLogin | undefined;
  /** The cluster ARN calls must name. @default a made-up ARN of a new local cluster */
  readonly resourceArn?: string;
  /** The Data API cancels a statement after 45 s (StatementTimeoutException). */
  readonly statementTimeoutMs?: number;
  /** The Data API rolls a transaction back after 3 minutes without a call. */
  readonly transactionIdleMs?: number;
}

/** A running endpoint; point `RDSDataClient` at `endpoint` with any credentials. */
export interface DataApiServer {
  readonly endpoint: string;
  readonly resourceArn: string;
  readonly secretArn: string;
  readonly database: string;
  /** Registers a secret holding `login` and returns its ARN (the secret a function's DB_SECRET_ARN names). */
  addSecret(login: SecretLogin): string;
  /** Operations served (or failed by injection), in arrival order: lets tests count retries. */
  readonly calls: readonly DataApiOperation[];
  /** The next `times` matching calls answer `failure` (after serving them, with `afterRunning`). */
  failNext(times: number, failure: InjectedFailure): void;
  /** Asks `decide` about every call `failNext` does not fail, from now on; undefined stops asking. */
  failWhen(decide: FailureDecider | undefined): void;
  /** Every injected failure answered so far, in order: lets tests prove a fault really happened. */
  readonly injected: readonly InjectedAnswer[];
  close(): Promise<void>;
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly errorType: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

const statusByName: Record<string, number> = {
  AccessDeniedException: 403,
  ForbiddenException: 403,
  NotFoundException: 404,
  DatabaseNotFoundException: 404,
  TransactionNotFoundException: 404,
  InternalServerErrorException: 500,
  ServiceUnavailableError: 503,
  DatabaseUnavailableException: 504,
};

const validation = (message: string) => new ApiError(400, 'ValidationException', message);

// pgjdbc's java.sql.Types codes, which is what `columnMetadata.type` carries (I).
const jdbcTypes: Record<string, number> = {
  int2: 5,
  int4: 4,
  int8: -5,
  oid: -5,
  numeric: 2,
  float4: 7,
  float8: 8,
  money: 8,
  bool: -7,
  bit: -7,
  bpchar: 1,
  char: 1,
  varchar: 12,
  text: 12,
  name: 12,
  bytea: -2,
  date: 91,
  time: 92,
  timetz: 92,
  timestamp: 93,
  timestamptz: 93,
  xml: 2009,
};
const jdbcArray = 2003;
const jdbcOther = 1111;

const integerTypes = new Set(['int2', 'int4', 'int8', 'oid']);
const floatTypes = new Set(['float4', 'float8']);
// Aurora PostgreSQL v2 refuses these in results: "cast to ::text" (reference §2).
const unsupportedTypes = new Set([
  'money',
  'macaddr',
  'macaddr8',
  'point',
  'line',
  'lseg',
  'box',
  'path',
  'polygon',
  'circle',
]);

// Parameter bindings, as pgjdbc sends them (I): setString binds varchar, which is the whole point;
// dates and times go unspecified so PostgreSQL fits them to the column (timestamp or timestamptz).
const oid = {
  unspecified: 0,
  bool: 16,
  bytea: 17,
  int8: 20,
  json: 114,
  float8: 701,
  varchar: 1043,
  uuid: 2950,
};
const numericOid = 1700;
const timestampHint = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,9})?$/;
const dateHint = /^\d{4}-\d{2}-\d{2}$/;
const timeHint = /^\d{2}:\d{2}:\d{2}(\.\d{1,9})?$/;

/** The Data API's response limit; bigger results fail rather than truncate. */
const maxResponseBytes = 1024 * 1024;
/**
 * "The Data API size limit is 64 KB per row in the result set returned by the database"
 * (docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/data-api.limitations.html), counted
 * here on the row's values as PostgreSQL sends them (text).
 */
const maxRowBytes = 64 * 1024;

interface TypeInfo {
  readonly typname: string;
  readonly category: string;
  readonly elem: number;
}

interface ColumnInfo {
  readonly tableName: string;
  readonly nullable: number;
  readonly autoIncrement: boolean;
}

interface OpenTransaction {
  readonly client: pg.PoolClient;
  readonly database: string;
  busy: boolean;
  idleTimer?: NodeJS.Timeout;
}

interface WireParameter {
  name?: string;
  typeHint?: string;
  value?: Record<string, unknown>;
}

type Body = Record<string, unknown>;

/**
 * Rewrites `:name` to `$n` outside literals, quoted identifiers and comments, skipping `::` casts.
 * Repeated names share one `$n`.
 */
function toPositional(sql: string): { text: string; names: string[] } {
  const names: string[] = [];
  let text = '';
  let i = 0;
  const copyUntil = (end: number) => {
    text += sql.slice(i, end);
    i = end;
  };
  while (i < sql.length) {
    const c = sql[i];
    const next = sql[i + 1];
    if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < sql.length) {
        if (sql[j] === c && sql[j + 1] === c) j += 2;
        else if (sql[j] === c) break;
        else if (sql[j] === '\\' && c === "'" && /[eE]/.test(sql[i - 1] ?? '')) j += 2;
        else j++;
      }
      copyUntil(j + 1);
    } else if (c === '-' && next === '-') {
      const end = sql.indexOf('\n', i);
      copyUntil(end < 0 ? sql.length : end);
    } else if (c === '/' && next === '*') {
      let depth = 0;
      let j = i;
      do {
        if (sql.startsWith('/*', j)) {
          depth++;
          j += 2;
        } else if (sql.startsWith('*/', j)) {
          depth--;
          j += 2;
        } else j++;
      } while (depth > 0 && j < sql.length);
      copyUntil(j);
    } else if (c === '$' && /^\$[A-Za-z_]?\w*\$/.test(sql.slice(i)) && !/\w/.test(sql[i - 1] ?? '')) {
      const tag = /^\$[A-Za-z_]?\w*\$/.exec(sql.slice(i))?.[0] ?? '$$';
      const end = sql.indexOf(tag, i + tag.length);
      copyUntil(end < 0 ? sql.length : end + tag.length);
    } else if (c === ':' && next === ':') {
      copyUntil(i + 2);
    } else if (c === ':' && /[A-Za-z_]/.test(next ?? '') && !/\w/.test(sql[i - 1] ?? '')) {
      const name = /^[A-Za-z_]\w*/.exec(sql.slice(i + 1))?.[0] ?? '';
      let index = names.indexOf(name);
      if (index < 0) index = names.push(name) - 1;
      text += `$${index + 1}`;
      i += 1 + name.length;
    } else {
      copyUntil(i + 1);
    }
  }
  return { text, names };
}

/** One bound value and the type PostgreSQL must see it as. */
function bindParameter(p: WireParameter): { oid: number; value: unknown } {
  const field = p.value ?? {};
  const kinds = Object.keys(field).filter((k) => field[k] !== undefined);
  if (kinds.length !== 1)
    throw new ApiError(400, 'BadRequestException', `Parameter "${p.name}" has value with no field set`);
  const kind = kinds[0] as string;
  const v = field[kind];
  if (kind === 'arrayValue') throw validation('Array parameters are not supported');
  if (p.typeHint && kind !== 'stringValue')
    throw validation(`The ${p.typeHint} type hint requires a stringValue`); // (I)
  switch (kind) {
    case 'isNull':
      return { oid: oid.unspecified, value: null };
    case 'booleanValue':
      return { oid: oid.bool, value: String(v) };
    case 'longValue':
      return { oid: oid.int8, value: String(v) };
    case 'doubleValue':
      return { oid: oid.float8, value: String(v) };
    case 'blobValue':
      return { oid: oid.bytea, value: Buffer.from(String(v), 'base64') };
    case 'stringValue':
      break;
    default:
      throw validation(`Unsupported parameter value ${kind}`);
  }
  const s = String(v);
  switch (p.typeHint) {
    case undefined:
      return { oid: oid.varchar, value: s };
    case 'UUID':
      return { oid: oid.uuid, value: s };
    case 'JSON':
      return { oid: oid.json, value: s };
    case 'DECIMAL':
      return { oid: numericOid, value: s };
    case 'TIMESTAMP':
      if (!timestampHint.test(s)) throw validation('Parse Error for TimeStamp'); // (I) exception name
      return { oid: oid.unspecified, value: s };
    case 'DATE':
      if (!dateHint.test(s)) throw validation('Parse Error for Date'); // (I)
      return { oid: oid.unspecified, value: s };
    case 'TIME':
      if (!timeHint.test(s)) throw validation('Parse Error for Time'); // (I)
      return { oid: oid.unspecified, value: s };
    default:
      throw validation(`Invalid typeHint ${p.typeHint}`);
  }
}

/** Splits a one-dimensional PostgreSQL array literal into element texts (null for NULL). */
function parseArrayLiteral(literal: string): (string | null)[] {
  const out: (string | null)[] = [];
  const body = literal.slice(literal.indexOf('{') + 1, literal.lastIndexOf('}'));
  let i = 0;
  while (i < body.length) {
    if (body[i] === '"') {
      let value = '';
      i++;
      while (i < body.length && body[i] !== '"') {
        if (body[i] === '\\') i++;
        value += body[i];
        i++;
      }
      out.push(value);
      i += 2; // closing quote and comma
    } else {
      const end = body.indexOf(',', i);
      const raw = body.slice(i, end < 0 ? body.length : end);
      out.push(raw === 'NULL' ? null : raw);
      i = end < 0 ? body.length : end + 1;
    }
  }
  return out;
}

// With TimeZone=UTC PostgreSQL prints `+00`; AWS prints the bare UTC time (reference §2).
const stripUtcOffset = (text: string) => text.replace(/\+00(:00)?$/, '');

interface Formatting {
  readonly longAsString: boolean;
  readonly decimalAsNumber: boolean;
}

/** A cell as an ExecuteStatement `Field`, from PostgreSQL's text output. */
function toField(text: string | null, type: TypeInfo, elem: TypeInfo | undefined, f: Formatting): object {
  if (text === null) return { isNull: true };
  const t = type.typname;
  if (type.category === 'A' && elem) {
    if (text.startsWith('{{') || text.startsWith('[')) {
      throw new ApiError(
        400,
        'UnsupportedResultException',
        `The result contains the unsupported data type ${t}.`,
      );
    }
    const items = parseArrayLiteral(text);
    const e = elem.typname;
    if (integerTypes.has(e))
      return { arrayValue: { longValues: items.map((x) => (x === null ? null : Number(x))) } };
    if (floatTypes.has(e))
      return { arrayValue: { doubleValues: items.map((x) => (x === null ? null : Number(x))) } };
    if (e === 'bool')
      return { arrayValue: { booleanValues: items.map((x) => (x === null ? null : x === 't')) } };
    const strip = e === 'timestamptz' ? stripUtcOffset : (x: string) => x;
    return { arrayValue: { stringValues: items.map((x) => (x === null ? null : strip(x))) } };
  }
  if (unsupportedTypes.has(t)) {
    throw new ApiError(
      400,
      'UnsupportedResultException',
      `The result contains the unsupported data type ${t}.`,
    );
  }
  if (integerTypes.has(t)) return f.longAsString ? { stringValue: text } : { longValue: Number(text) };
  if (floatTypes.has(t)) return { doubleValue: Number(text) };
  if (t === 'numeric' && f.decimalAsNumber) {
    return /^-?\d+$/.test(text) ? { longValue: Number(text) } : { doubleValue: Number(text) };
  }
  if (t === 'bool') return { booleanValue: text === 't' };
  if (t === 'bytea') return { blobValue: Buffer.from(text.slice(2), 'hex').toString('base64') };
  if (t === 'timestamptz') return { stringValue: stripUtcOffset(text) };
  return { stringValue: text };
}

/** The same cell for `formatRecordsAs: JSON` (reference §2, JSON mode). */
function toJsonValue(field: Record<string, unknown>): unknown {
  if (field.isNull) return null;
  const array = field.arrayValue as Record<string, unknown[]> | undefined;
  if (array) return Object.values(array)[0];
  return Object.values(field)[0];
}

function sqlErrorMessage(err: pg.DatabaseError): string {
  const parts = [`${err.severity ?? 'ERROR'}: ${err.message}`];
  if (err.detail) parts.push(`Detail: ${err.detail}`);
  if (err.hint) parts.push(`Hint: ${err.hint}`);
  if (err.position) parts.push(`Position: ${err.position}`);
  parts.push(`SQLState: ${err.code}`);
  return parts.join('; ');
}

/** A PostgreSQL error as the Data API reports it: the SQLState travels in the message text. */
function translateSqlError(err: unknown, connectionId: number): ApiError {
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

async function readJson(req: IncomingMessage): Promise<Body> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    const body: unknown = text ? JSON.parse(text) : {};
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new Error('not an object');
    return body as Body;
  } catch {
    throw new ApiError(400, 'SerializationException', 'The request body is not a JSON object');
  }
}

function send(res: ServerResponse, status: number, body: unknown, errorType?: string): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'x-amzn-requestid': randomUUID(),
    ...(errorType ? { 'x-amzn-errortype': errorType } : {}),
  });
  res.end(text);
}

const operations = new Set<string>([
  'Execute',
  'BatchExecute',
  'BeginTransaction',
  'CommitTransaction',
  'RollbackTransaction',
]);

/**
 * Starts the endpoint on 127.0.0.1 (a free port) in front of the database at `pgUrl`; calls may
 * name another database on the same server with `database`.
 */
export async function startDataApiServer(
  pgUrl: string,
  options: DataApiServerOptions = {},
): Promise<DataApiServer> {
  const url = new URL(pgUrl);
  const defaultDatabase = decodeURIComponent(url.pathname.slice(1)) || 'postgres';
  const cluster = `content-pipeline-local-${randomBytes(4).toString('hex')}`;
  const resourceArn = options.resourceArn ?? `arn:aws:rds:us-east-1:000000000000:cluster:${cluster}`;
  const secretArn = `arn:aws:secretsmanager:us-east-1:000000000000:secret:${cluster}-AbCdEf`;
  const statementTimeoutMs = options.statementTimeoutMs ?? 45_000;
  const transactionIdleMs = options.transactionIdleMs ?? 180_000;

  const ownLogin: SecretLogin = {
    username: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
  };
  const added = new Map<string, SecretLogin>([[secretArn, ownLogin]]);
  const loginOf = (arn: string) => added.get(arn) ?? options.secrets?.(arn);

  // One pool per (database, login): the login is the secret's, as on AWS.
  const pools = new Map<string, pg.Pool>();
  const poolFor = (database: string, login: SecretLogin) => {
    const key = `${login.username}\u0000${database}`;
    let pool = pools.get(key);
    if (!pool) {
      const dbUrl = new URL(pgUrl);
      dbUrl.pathname = `/${encodeURIComponent(database)}`;
      dbUrl.username = encodeURIComponent(login.username);
      dbUrl.password = encodeURIComponent(login.password);
      pool = new pg.Pool({
        connectionString: dbUrl.toString(),
        max: 20,
        // Results in UTC, as AWS returns them; the statement timeout AWS enforces.
        options: `-c TimeZone=UTC -c statement_timeout=${statementTimeoutMs}`,
      });
      pool.on('error', () => {}); // an idle connection dropped by the server; the next call reconnects
      pools.set(key, pool);
    }
    return pool;
  };
  const connect = async (database: string, login: SecretLogin) => {
    try {
      return await poolFor(database, login).connect();
    } catch (err) {
      throw translateSqlError(err, 0);
    }
  };

  // Per database: OIDs of user types differ between databases.
  const typeCache = new Map<string, Map<number, TypeInfo>>();
  const transactions = new Map<string, OpenTransaction>();
  const failures: { remaining: number; failure: InjectedFailure }[] = [];
  let decider: FailureDecider | undefined;
  const injected: InjectedAnswer[] = [];
  const calls: DataApiOperation[] = [];

  async function typesOf(
    client: pg.PoolClient,
    database: string,
    oids: number[],
  ): Promise<Map<number, TypeInfo>> {
    const cache = typeCache.get(database) ?? new Map<number, TypeInfo>();
    typeCache.set(database, cache);
    const missing = [...new Set(oids)].filter((o) => !cache.has(o));
    if (missing.length > 0) {
      const { rows } = await client.query<{
        oid: number;
        typname: string;
        typcategory: string;
        typelem: number;
      }>(
        `SELECT t.oid::int4 AS oid, t.typname, t.typcategory, t.typelem::int4 AS typelem
           FROM pg_type t WHERE t.oid = ANY($1::oid[])
         UNION
         SELECT e.oid::int4, e.typname, e.typcategory, e.typelem::int4
           FROM pg_type t JOIN pg_type e ON e.oid = t.typelem WHERE t.oid = ANY($1::oid[])`,
        [missing],
      );
      for (const r of rows)
        cache.set(r.oid, { typname: r.typname, category: r.typcategory, elem: r.typelem });
    }
    return cache;
  }

  /** Table name, nullability and pgjdbc's serial detection for columns that come from a table. */
  async function columnsOf(client: pg.PoolClient, fields: pg.FieldDef[]): Promise<Map<string, ColumnInfo>> {
    const fromTables = fields.filter((f) => f.tableID > 0);
    const info = new Map<string, ColumnInfo>();
    if (fromTables.length === 0) return info;
    const { rows } = await client.query<{
      key: string;
      relname: string;
      attnotnull: boolean;
      auto: boolean;
    }>(
      `SELECT a.attrelid::int8 || ':' || a.attnum AS key, c.relname, a.attnotnull,
              (a.attidentity <> '' OR coalesce(pg_get_expr(d.adbin, d.adrelid), '') LIKE '%nextval(%') AS auto
         FROM unnest($1::oid[], $2::int2[]) AS k(rel, num)
         JOIN pg_attribute a ON a.attrelid = k.rel AND a.attnum = k.num
         JOIN pg_class c ON c.oid = a.attrelid
         LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum`,
      [fromTables.map((f) => f.tableID), fromTables.map((f) => f.columnID)],
    );
    for (const r of rows) {
      info.set(r.key, { tableName: r.relname, nullable: r.attnotnull ? 0 : 1, autoIncrement: r.auto });
    }
    return info;
  }

  async function runStatement(client: pg.PoolClient, database: string, body: Body) {
    const sql = body.sql;
    if (typeof sql !== 'string' || sql.length === 0) throw validation('sql is required');
    if (sql.length > 65_536) throw validation('sql must be at most 65536 characters');
    if (body.schema !== undefined) throw validation("The schema parameter isn't supported");
    const given = new Map<string, WireParameter>();
    for (const p of (body.parameters ?? []) as WireParameter[]) given.set(p.name ?? '', p);
    const { text, names } = toPositional(sql);
    const bound = names.map((name, i) => {
      const p = given.get(name);
      // (I): pgjdbc's wording for an unset placeholder.
      if (!p) {
        throw new ApiError(
          400,
          'DatabaseErrorException',
          `No value specified for parameter ${i + 1}.; SQLState: 22023`,
        );
      }
      return bindParameter(p);
    });
    const connectionId = (client as unknown as { processID?: number }).processID ?? 0;
    // Parse takes the parameter OIDs from `types` as an array and Result asks it for parsers:
    // one object doing both binds our types and keeps every value as PostgreSQL's text.
    const types = Object.assign(
      bound.map((b) => b.oid),
      { getTypeParser: () => (value: string) => value },
    );
    let result: pg.QueryArrayResult<(string | null)[]>;
    try {
      result = await client.query({
        text,
        values: bound.map((b) => b.value),
        rowMode: 'array',
        queryMode: 'extended',
        types,
      } as pg.QueryArrayConfig);
    } catch (err) {
      throw translateSqlError(err, connectionId);
    }
    const fields = result.fields ?? [];
    if (fields.length === 0) {
      return { numberOfRecordsUpdated: result.rowCount ?? 0, generatedFields: [] };
    }
    const typeInfo = await typesOf(
      client,
      database,
      fields.map((f) => f.dataTypeID),
    );
    const resultSetOptions = (body.resultSetOptions ?? {}) as Record<string, string>;
    const formatting: Formatting = {
      longAsString: resultSetOptions.longReturnType === 'STRING',
      decimalAsNumber: resultSetOptions.decimalReturnType === 'DOUBLE_OR_LONG',
    };
    const columnTypes = fields.map((f) => {
      const type = typeInfo.get(f.dataTypeID) ?? { typname: 'unknown', category: 'X', elem: 0 };
      return { type, elem: type.elem ? typeInfo.get(type.elem) : undefined };
    });
    for (const row of result.rows) {
      const bytes = row.reduce((n, text) => n + (text === null ? 0 : Buffer.byteLength(String(text))), 0);
      if (bytes > maxRowBytes) {
        // (I) wording; the limit itself is documented.
        throw new ApiError(
          400,
          'DatabaseErrorException',
          `Row of ${bytes} bytes exceeds the 64 KB row size limit`,
        );
      }
    }
    const records = result.rows.map((row) =>
      row.map((text, i) => {
        const c = columnTypes[i] as (typeof columnTypes)[number];
        return toField(text, c.type, c.elem, formatting);
      }),
    );
    // JDBC's execute() reports no update count when the statement returned rows, RETURNING included (I).
    const response: Record<string, unknown> = { numberOfRecordsUpdated: 0 };
    if (body.formatRecordsAs === 'JSON') {
      const labels = fields.map((f) => f.name);
      const duplicate = labels.find((l, i) => labels.indexOf(l) !== i);
      if (duplicate !== undefined) {
        throw validation(`The result set contains the duplicate column name ${duplicate}.`); // (I) wording
      }
      const objects = records.map((r) =>
        Object.fromEntries(r.map((field, i) => [labels[i], toJsonValue(field as Record<string, unknown>)])),
      );
      response.formattedRecords = JSON.stringify(objects);
    } else {
      response.records = records;
      if (body.includeResultMetadata === true) {
        const columns = await columnsOf(client, fields);
        response.columnMetadata = fields.map((f, i) => {
          const { type } = columnTypes[i] as (typeof columnTypes)[number];
          const column = columns.get(`${f.tableID}:${f.columnID}`);
          const auto = column?.autoIncrement ?? false;
          // pgjdbc reports an auto-increment int column by its declared pseudo-type.
          const serial = auto
            ? { int2: 'smallserial', int4: 'serial', int8: 'bigserial' }[type.typname]
            : undefined;
          return {
            name: f.name,
            label: f.name,
            typeName: serial ?? type.typname,
            type: type.category === 'A' ? jdbcArray : (jdbcTypes[type.typname] ?? jdbcOther),
            schemaName: '',
            tableName: column?.tableName ?? '',
            nullable: column?.nullable ?? 2,
            isAutoIncrement: auto,
            isSigned:
              integerTypes.has(type.typname) || floatTypes.has(type.typname) || type.typname === 'numeric',
            isCurrency: type.typname === 'money',
            arrayBaseColumnType: 0,
          };
        });
      }
    }
    // (I) wording; the limit itself is documented.
    if (Buffer.byteLength(JSON.stringify(response)) > maxResponseBytes) {
      throw new ApiError(
        400,
        'DatabaseErrorException',
        'Database returned more than the allowed response size limit',
      );
    }
    return response;
  }

  /** Checks the cluster and reads the secret, as the Data API does on every call; returns its login. */
  const checkTarget = (body: Body): SecretLogin => {
    if (typeof body.resourceArn !== 'string' || typeof body.secretArn !== 'string') {
      throw validation('resourceArn and secretArn are required');
    }
    // (I): an unknown cluster or secret; the exact AWS exceptions vary by cause.
    if (body.resourceArn !== resourceArn) {
      throw new ApiError(
        400,
        'BadRequestException',
        `HttpEndpoint is not enabled for resource ${body.resourceArn}`,
      );
    }
    const login = loginOf(body.secretArn);
    if (!login) {
      throw new ApiError(
        400,
        'SecretsErrorException',
        `Secrets Manager cannot find the secret ${body.secretArn}`,
      );
    }
    return login;
  };

  const endTransaction = (id: string) => {
    const tx = transactions.get(id);
    if (!tx) return undefined;
    transactions.delete(id);
    clearTimeout(tx.idleTimer);
    return tx;
  };

  const armIdleTimer = (id: string, tx: OpenTransaction) => {
    clearTimeout(tx.idleTimer);
    tx.idleTimer = setTimeout(() => {
      if (tx.busy || !endTransaction(id)) return;
      tx.client.query('ROLLBACK').then(
        () => tx.client.release(),
        () => tx.client.release(true),
      );
    }, transactionIdleMs);
    tx.idleTimer.unref();
  };

  /** Runs `fn` holding the transaction; a second call meanwhile is refused, as AWS does. */
  async function withTransaction<T>(id: unknown, fn: (tx: OpenTransaction) => Promise<T>): Promise<T> {
    const tx = typeof id === 'string' ? transactions.get(id) : undefined;
    if (!tx)
      throw new ApiError(404, 'TransactionNotFoundException', `Transaction ${String(id)} is not found`);
    if (tx.busy) throw new ApiError(400, 'DatabaseErrorException', 'Transaction is still running a query');
    tx.busy = true;
    try {
      return await fn(tx);
    } finally {
      tx.busy = false;
      if (transactions.has(id as string)) armIdleTimer(id as string, tx);
    }
  }

  async function autoCommit<T>(
    database: string,
    login: SecretLogin,
    fn: (client: pg.PoolClient) => Promise<T>,
  ): Promise<T> {
    const client = await connect(database, login);
    let broken = false;
    try {
      return await fn(client);
    } catch (err) {
      broken = !(err instanceof ApiError);
      throw err;
    } finally {
      client.release(broken);
    }
  }

  const databaseOf = (body: Body) => (typeof body.database === 'string' ? body.database : defaultDatabase);

  async function handle(operation: DataApiOperation, body: Body): Promise<unknown> {
    const login = checkTarget(body);
    switch (operation) {
      case 'Execute':
        if (body.transactionId !== undefined) {
          return withTransaction(body.transactionId, (tx) => runStatement(tx.client, tx.database, body));
        }
        return autoCommit(databaseOf(body), login, (client) => runStatement(client, databaseOf(body), body));
      case 'BatchExecute': {
        const sets = (body.parameterSets ?? []) as WireParameter[][];
        const runAll = async (client: pg.PoolClient, database: string) => {
          for (const parameters of sets) await runStatement(client, database, { ...body, parameters });
          return { updateResults: sets.map(() => ({ generatedFields: [] })) };
        };
        if (body.transactionId !== undefined) {
          return withTransaction(body.transactionId, (tx) => runAll(tx.client, tx.database));
        }
        // pgjdbc sends an auto-commit batch as one implicit transaction: all sets or none (I).
        return autoCommit(databaseOf(body), login, async (client) => {
          await client.query('BEGIN');
          try {
            const out = await runAll(client, databaseOf(body));
            await client.query('COMMIT');
            return out;
          } catch (err) {
            await client.query('ROLLBACK');
            throw err;
          }
        });
      }
      case 'BeginTransaction': {
        if (body.schema !== undefined) throw validation("The schema parameter isn't supported");
        const database = databaseOf(body);
        const client = await connect(database, login);
        try {
          await client.query('BEGIN');
        } catch (err) {
          client.release(true);
          throw translateSqlError(err, 0);
        }
        // AWS ids are long opaque base64 strings; callers must not parse them.
        const id = randomBytes(96).toString('base64');
        const tx: OpenTransaction = { client, database, busy: false };
        transactions.set(id, tx);
        armIdleTimer(id, tx);
        return { transactionId: id };
      }
      case 'CommitTransaction':
        return withTransaction(body.transactionId, async (tx) => {
          endTransaction(body.transactionId as string);
          try {
            const result = await tx.client.query('COMMIT');
            tx.client.release();
            // COMMIT of a failed transaction rolls back quietly; pgjdbc turns that into an error (I).
            if (result.command === 'ROLLBACK') {
              throw new ApiError(
                400,
                'DatabaseErrorException',
                'The database returned ROLLBACK, so the transaction cannot be committed.; SQLState: 25P02',
              );
            }
            return { transactionStatus: 'Transaction Committed' };
          } catch (err) {
            if (!(err instanceof ApiError)) tx.client.release(true);
            throw translateSqlError(err, 0);
          }
        });
      case 'RollbackTransaction':
        return withTransaction(body.transactionId, async (tx) => {
          endTransaction(body.transactionId as string);
          try {
            await tx.client.query('ROLLBACK');
            tx.client.release();
          } catch (err) {
            tx.client.release(true);
            throw translateSqlError(err, 0);
          }
          return { transactionStatus: 'Rollback Complete' };
        });
    }
  }

  function takeFailure(operation: DataApiOperation): InjectedFailure | undefined {
    const entry = failures.find(
      (f) => f.remaining > 0 && (!f.failure.operation || f.failure.operation === operation),
    );
    if (!entry) return undefined;
    entry.remaining--;
    return entry.failure;
  }

  const server = createServer((req, res) => {
    const operation = (req.url ?? '').replace(/^\//, '').split('?')[0] ?? '';
    (async () => {
      if (req.method !== 'POST' || !operations.has(operation)) {
        throw new ApiError(404, 'UnknownOperationException', `Unknown operation ${req.method} ${req.url}`);
      }
      const op = operation as DataApiOperation;
      const body = await readJson(req);
      calls.push(op);
      const failure = takeFailure(op) ?? decider?.(op, body);
      if (failure) {
        // The work is done and kept; only its answer is lost (whatever that answer was).
        if (failure.afterRunning) await handle(op, body).catch(() => undefined);
        injected.push({ operation: op, name: failure.name, afterRunning: failure.afterRunning === true });
        const message =
          failure.message ??
          (failure.name === 'DatabaseResumingException'
            ? `The Aurora DB instance ${resourceArn} is resuming after being auto-paused. Please wait a few seconds and try again.`
            : failure.name);
        throw new ApiError(failure.status ?? statusByName[failure.name] ?? 400, failure.name, message);
      }
      return handle(op, body);
    })().then(
      (out) => send(res, 200, out),
      (err: unknown) => {
        const e =
          err instanceof ApiError ? err : new ApiError(500, 'InternalServerErrorException', String(err));
        send(res, e.status, { message: e.message, ...e.extra }, e.errorType);
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    endpoint: `http://127.0.0.1:${port}`,
    resourceArn,
    secretArn,
    database: defaultDatabase,
    addSecret(login) {
      const arn = `arn:aws:secretsmanager:us-east-1:000000000000:secret:${cluster}-${login.username}-${randomBytes(3).toString('hex')}`;
      added.set(arn, login);
      return arn;
    },
    calls,
    failNext(times, failure) {
      failures.push({ remaining: times, failure });
    },
    failWhen(decide) {
      decider = decide;
    },
    injected,
    async close() {
      for (const id of [...transactions.keys()]) {
        const tx = endTransaction(id);
        await tx?.client.query('ROLLBACK').catch(() => {});
        tx?.client.release(true);
      }
      // The SDK keeps connections alive; without this, close() waits for them to time out.
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all([...pools.values()].map((p) => p.end()));
    },
  };
}
