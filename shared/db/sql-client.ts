/**
 * The SqlClient port: the only way the pipeline talks to PostgreSQL. Two adapters implement
 * it, node-postgres (`pg-client.ts`) and the RDS Data API (`data-api-client.ts`); one contract
 * suite holds both to the same behaviour.
 *
 * The port is shaped by the narrower of the two, the Data API:
 * - named parameters `:name` only, one statement per call;
 * - no array parameters: pass `sqlParam.json([...])` and unnest in SQL;
 * - values that PostgreSQL must not guess are wrapped (`uuid`, `timestamp`, `json`), because
 *   the Data API binds a bare string as `character varying`.
 * Rows come back decoded the same way from both: integers as numbers, timestamps as `Date`,
 * json/jsonb parsed, everything else as string/boolean/null.
 */

/** A parameter value that needs a type the SQL text does not give. */
export type TypedParam =
  | { readonly kind: 'uuid'; readonly value: string }
  | { readonly kind: 'timestamp'; readonly value: Date }
  | { readonly kind: 'json'; readonly value: unknown };

export type SqlValue = string | number | boolean | null | TypedParam;
export type SqlParams = Readonly<Record<string, SqlValue>>;
export type Row = Record<string, unknown>;

export interface QueryResult<R extends Row = Row> {
  readonly rows: R[];
  /** Rows the statement inserted, updated or deleted (or returned, for a SELECT). */
  readonly rowCount: number;
}

/** Runs statements; inside `transaction` it runs them in that transaction. */
export interface SqlExecutor {
  query<R extends Row = Row>(sql: string, params?: SqlParams): Promise<QueryResult<R>>;
}

export interface SqlClient extends SqlExecutor {
  /**
   * Runs `work` in one transaction: commit when it resolves, rollback when it throws (and
   * rethrow). Statements outside `work`'s executor are not part of the transaction.
   */
  transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /** Releases connections. */
  close(): Promise<void>;
}

/** Builders for typed parameters. */
export const sqlParam = {
  uuid: (value: string): TypedParam => ({ kind: 'uuid', value }),
  timestamp: (value: Date): TypedParam => ({ kind: 'timestamp', value }),
  json: (value: unknown): TypedParam => ({ kind: 'json', value }),
};

const namedParam = /(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)/g;

/**
 * Rewrites `:name` placeholders for a positional driver. `::type` casts are left alone.
 * Statements must not contain `:word` inside string literals (none of ours do): this is a
 * placeholder scanner, not a SQL parser, which is what the Data API itself accepts too.
 */
export function toPositional(sql: string, params: SqlParams = {}): { text: string; names: string[] } {
  const names: string[] = [];
  const text = sql.replace(namedParam, (_m, name: string) => {
    if (!(name in params)) throw new Error(`SQL parameter :${name} has no value`);
    let index = names.indexOf(name);
    if (index < 0) index = names.push(name) - 1;
    return `$${index + 1}`;
  });
  return { text, names };
}

/** Rejects what the Data API rejects, so code written against the pg adapter cannot rely on it. */
export function assertPortableParams(params: SqlParams = {}): void {
  for (const [name, value] of Object.entries(params)) {
    if (Array.isArray(value)) {
      throw new TypeError(`SQL parameter :${name} is an array: pass sqlParam.json([...]) and unnest in SQL`);
    }
    if (value !== null && typeof value === 'object' && !('kind' in value)) {
      throw new TypeError(`SQL parameter :${name} is an object: wrap it with sqlParam.json`);
    }
    if (typeof value === 'number' && !Number.isFinite(value)) {
      throw new TypeError(`SQL parameter :${name} is not a finite number`);
    }
  }
}
