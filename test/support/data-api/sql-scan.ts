// Reading PostgreSQL text without a parser: the Data API's named parameters in SQL, and the
// array literals PostgreSQL prints in results.

/**
 * Rewrites `:name` to `$n` outside literals, quoted identifiers and comments, skipping `::` casts.
 * Repeated names share one `$n`.
 */
export function toPositional(sql: string): { text: string; names: string[] } {
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

/** Splits a one-dimensional PostgreSQL array literal into element texts (null for NULL). */
export function parseArrayLiteral(literal: string): (string | null)[] {
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
