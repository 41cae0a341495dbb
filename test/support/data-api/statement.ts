import type pg from 'pg';
import { ApiError, translateSqlError, validation } from './errors';
import { bindParameter } from './parameters';
import {
  type ColumnInfo,
  type Formatting,
  floatTypes,
  integerTypes,
  jdbcArray,
  jdbcOther,
  jdbcTypes,
  maxResponseBytes,
  maxRowBytes,
  type TypeInfo,
  toField,
  toJsonValue,
} from './results';
import { toPositional } from './sql-scan';
import type { Body, WireParameter } from './types';

/** Runs one `sql` with its parameters on a connection and answers it as ExecuteStatement does. */
export type StatementRunner = (client: pg.PoolClient, database: string, body: Body) => Promise<unknown>;

/**
 * One ExecuteStatement, as the Data API runs it on Aurora PostgreSQL: named parameters bound
 * with pgjdbc's types, one statement per call, every value read as PostgreSQL's text and
 * returned as a `Field` (or JSON with `formatRecordsAs`), the row and response size limits
 * enforced. The catalog lookups it needs are cached per database.
 */
export function createStatementRunner(): StatementRunner {
  // Per database: OIDs of user types differ between databases.
  const typeCache = new Map<string, Map<number, TypeInfo>>();

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

  return runStatement;
}
