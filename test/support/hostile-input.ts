import fc from 'fast-check';

/**
 * Generators of what a hostile or careless client sends, shared by the property tests of the
 * pipeline's HTTP surfaces (tasks API, local bus): strings with control characters, broken
 * UTF-16 and SQL, arbitrary JSON, header names in any casing and content types right and wrong.
 */

/** One unit of a nasty string: controls, NUL, line breaks, bidi marks, lone surrogates, emoji. */
export const nastyUnit: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('\n', '\r', '\r\n', '\t', '\v', '\f', ' ', '\u0000', '\u0007', '\u001b', '\u007f'),
  fc.constantFrom('\u0085', '\u009b', '\u2028', '\u2029', '\u00a0', '\u3000', '\ufeff', '\ufffe', '\uffff'),
  // Bidi controls (RLM, LRM, RLO, PDF, isolates) and zero-width characters.
  fc.constantFrom('\u200f', '\u200e', '\u202e', '\u202c', '\u2066', '\u2069', '\u200b', '\u200d', '\u2060'),
  fc.integer({ min: 0xd800, max: 0xdfff }).map((unit) => String.fromCharCode(unit)),
  fc.constantFrom('😀', '👩‍💻', '🇫🇷', '𝔸', '\u{10ffff}', 'é', 'e\u0301', 'ß', 'İ'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 4 }),
);

/** Strings that would do damage if anything pasted them into SQL, a LIKE, a path or a format. */
export const sqlLooking: fc.Arbitrary<string> = fc.constantFrom(
  "'; DROP TABLE tasks; --",
  "' OR '1'='1",
  "Robert'); DELETE FROM outbox; --",
  '"; SELECT pg_sleep(10); --',
  '$1',
  ':title',
  ':taskId::uuid',
  '::jsonb',
  '%',
  '_%\\',
  "E'\\x00'",
  '\\u0000',
  '\\ud800',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a template placeholder is the point
  '${title}',
  '{{title}}',
  '../../etc/passwd',
  '<script>alert(1)</script>',
  'null',
  'undefined',
  '{"title":"x"}',
);

/** Any string a JSON body can carry, weighted towards the nasty ones. */
export const nastyString: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.string({ unit: nastyUnit, maxLength: 40 }), weight: 4 },
  { arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }), weight: 2 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 40 }), weight: 2 },
  { arbitrary: sqlLooking, weight: 2 },
  {
    arbitrary: fc
      .tuple(
        fc.string({ unit: nastyUnit, maxLength: 4 }),
        sqlLooking,
        fc.string({ unit: nastyUnit, maxLength: 4 }),
      )
      .map((parts) => parts.join('')),
    weight: 1,
  },
  // Around the length limits: titles 500 code points, people 200, reasons 2,000.
  {
    arbitrary: fc
      .tuple(
        fc.constantFrom(199, 200, 201, 499, 500, 501, 1999, 2000, 2001),
        fc.constantFrom('x', 'é', '😀', ' '),
      )
      .map(([n, unit]) => unit.repeat(n)),
    weight: 1,
  },
);

/** Any JSON value, nasty strings included; small, so hundreds of runs stay fast. */
export const anyJson: fc.Arbitrary<unknown> = fc.jsonValue({ maxDepth: 3, depthSize: 'small' });

/** A value for a string field: usually a string, sometimes any other JSON value. */
export const fieldValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: nastyString, weight: 10 },
  { arbitrary: anyJson, weight: 1 },
  { arbitrary: fc.constant(null), weight: 1 },
);

/** A header name in a random casing, as clients and proxies send them. */
export function anyCasing(name: string): fc.Arbitrary<string> {
  return fc
    .array(fc.boolean(), { minLength: name.length, maxLength: name.length })
    .map((upper) => [...name].map((c, i) => (upper[i] ? c.toUpperCase() : c.toLowerCase())).join(''));
}

/** A JSON content type the way clients send it: any casing, maybe a charset, maybe a suffix type. */
export const jsonContentType: fc.Arbitrary<string> = fc
  .tuple(
    fc.constantFrom('application/json', 'application/merge-patch+json', 'application/vnd.api+json'),
    fc.constantFrom(
      '',
      '; charset=utf-8',
      ';charset=UTF-8',
      ' ; charset="utf-8"',
      '; charset=latin1',
      '; q=1',
    ),
  )
  .chain(([type, params]) => anyCasing(type).map((t) => `${t}${params}`));

/** A content type that is not JSON, or not a content type at all. */
export const wrongContentType: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    'text/plain',
    'text/json',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/jsonx',
    'application/json-seq',
    'application/xml',
    'application/x-amz-json-1.1',
    'json',
    '',
    ';',
    '*/*',
  ),
  fc.string({ unit: 'grapheme-ascii', maxLength: 30 }),
);
