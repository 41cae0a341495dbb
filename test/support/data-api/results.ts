import { ApiError } from './errors';
import { parseArrayLiteral } from './sql-scan';

/** A PostgreSQL type as the catalog describes it (`pg_type`). */
export interface TypeInfo {
  readonly typname: string;
  readonly category: string;
  readonly elem: number;
}

/** What the catalog says of a column that comes from a table. */
export interface ColumnInfo {
  readonly tableName: string;
  readonly nullable: number;
  readonly autoIncrement: boolean;
}

// pgjdbc's java.sql.Types codes, which is what `columnMetadata.type` carries (I).
export const jdbcTypes: Record<string, number> = {
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
export const jdbcArray = 2003;
export const jdbcOther = 1111;

export const integerTypes = new Set(['int2', 'int4', 'int8', 'oid']);
export const floatTypes = new Set(['float4', 'float8']);
// Types the Data API does not return for Aurora PostgreSQL: a result holding one fails with
// UnsupportedResultException, and the query must cast the column to text. The types it does
// return are listed at https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/data-api-operations.html
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

/**
 * The Data API's 1 MiB response limit; bigger results fail rather than truncate
 * (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/data-api.limitations.html).
 */
export const maxResponseBytes = 1024 * 1024;
/**
 * "The Data API size limit is 64 KB per row in the result set returned by the database"
 * (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/data-api.limitations.html), counted
 * here on the row's values as PostgreSQL sends them (text).
 */
export const maxRowBytes = 64 * 1024;

// With TimeZone=UTC PostgreSQL prints a timestamptz with `+00`; the Data API returns the UTC
// time without any offset (`2024-05-01 12:00:00.123`).
const stripUtcOffset = (text: string) => text.replace(/\+00(:00)?$/, '');

/** The `resultSetOptions` that change how cells are returned. */
export interface Formatting {
  readonly longAsString: boolean;
  readonly decimalAsNumber: boolean;
}

/** A cell as an ExecuteStatement `Field`, from PostgreSQL's text output. */
export function toField(
  text: string | null,
  type: TypeInfo,
  elem: TypeInfo | undefined,
  f: Formatting,
): object {
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

/**
 * The same cell for `formatRecordsAs: JSON`: the bare value (an array's elements, null for
 * NULL) under the column's label
 * (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/data-api-json.html).
 */
export function toJsonValue(field: Record<string, unknown>): unknown {
  if (field.isNull) return null;
  const array = field.arrayValue as Record<string, unknown[]> | undefined;
  if (array) return Object.values(array)[0];
  return Object.values(field)[0];
}
