/**
 * EventBridge event patterns, for the local bus and the delivery audit (which routes each
 * delivered event as the bus does): the patterns EventBridge accepts, refused with
 * EventBridge's own reasons, and matched as EventBridge matches them. Written against
 * AWS's open-source matcher, aws/event-ruler (the engine behind EventBridge rules), because no
 * maintained npm package implements its semantics and `TestEventPattern` needs the network.
 * https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html
 * https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html
 *
 * How EventBridge reads a pattern, kept here:
 * - Nested keys join into dotted paths (`{"a": {"b": [..]}}` and `{"a.b": [..]}` are one path);
 *   `$or` forks the pattern into sub-patterns, of which any one must match.
 * - An event is flattened the same way; an array, at any depth, contributes each element as a
 *   value of its path. Values of different elements of one array never combine: a sub-pattern
 *   matches only through one element of each array it crosses.
 * - A path's values match if any of them matches any condition listed for it; `exists: false`
 *   holds when no value of the path is left that agrees with the array elements already chosen.
 * - Numbers compare exactly to six decimals between -5e11 and 5e11; other numbers are only
 *   equal to the same literal.
 */

import type { RulePattern } from '../topology';

/** Operators EventBridge accepts in a pattern (`exact` for a literal value). */
export const supportedOperators = [
  'exact',
  'exactly',
  'prefix',
  'suffix',
  'equals-ignore-case',
  'anything-but',
  'exists',
  'numeric',
  'cidr',
  'wildcard',
  '$or',
] as const;
export type PatternOperator = (typeof supportedOperators)[number];

/**
 * A pattern EventBridge refuses: PutRule and TestEventPattern answer InvalidEventPatternException
 * with this message. `reason` is event-ruler's own text; EventBridge appends the position in
 * the pattern's JSON text, which a pattern given as an object does not have.
 */
export class InvalidEventPatternError extends Error {
  override readonly name = 'InvalidEventPatternError';
  /** The exception EventBridge answers with. */
  readonly code = 'InvalidEventPatternException';

  constructor(
    readonly reason: string,
    options?: ErrorOptions & { readonly rule?: string },
  ) {
    const where = options?.rule === undefined ? '' : ` (rule ${options.rule})`;
    super(`Event pattern is not valid. Reason: ${reason}${where}`, options);
  }
}

/** A pattern checked and prepared for matching. */
export interface CompiledEventPattern {
  /** Any one must match; each lists its paths in the order event-ruler visits them. */
  readonly subPatterns: readonly (readonly PathCondition[])[];
  readonly operators: ReadonlySet<PatternOperator>;
  /** Every path the pattern names, and every dotted prefix of one: the parts of an event worth reading. */
  readonly prefixes: ReadonlySet<string>;
}

interface PathCondition {
  readonly path: string;
  readonly tests: readonly ValueTest[];
  /** `exists: false` is listed for the path. */
  readonly absent: boolean;
}

/** A JSON leaf of an event, as event-ruler sees it. */
type Leaf =
  | { readonly kind: 'string'; readonly text: string }
  | { readonly kind: 'number'; readonly text: string; readonly scaled: bigint | undefined }
  | { readonly kind: 'literal'; readonly text: 'true' | 'false' | 'null' };

type ValueTest = (leaf: Leaf) => boolean;

const compiled = new WeakMap<object, CompiledEventPattern>();

/**
 * Checks `pattern` as PutRule does and prepares it for matching; throws InvalidEventPatternError.
 * The result is kept per pattern object (patterns are read-only), so matching many events is cheap.
 */
export function compileEventPattern(pattern: unknown): CompiledEventPattern {
  if (typeof pattern === 'object' && pattern !== null) {
    const cached = compiled.get(pattern);
    if (cached) return cached;
  }
  const result = new PatternCompiler().compile(pattern);
  if (typeof pattern === 'object' && pattern !== null) compiled.set(pattern, result);
  return result;
}

/** Lists the operators a pattern uses (`exact` for literal values); throws on a pattern EventBridge refuses. */
export function operatorsOf(pattern: RulePattern): Set<PatternOperator> {
  return new Set(compileEventPattern(pattern).operators);
}

/**
 * Checks every rule's pattern as PutRule would, so a topology EventBridge would refuse fails
 * the local runtime at start instead of routing differently; the error names the rule.
 */
export function assertValidRules(
  rules: readonly { readonly name: string; readonly pattern: RulePattern }[],
): void {
  for (const rule of rules) {
    try {
      compileEventPattern(rule.pattern);
    } catch (err) {
      if (!(err instanceof InvalidEventPatternError)) throw err;
      throw new InvalidEventPatternError(err.reason, { cause: err, rule: rule.name });
    }
  }
}

/** Does `event` (the EventBridge event JSON) match `pattern`? Throws InvalidEventPatternError for a pattern EventBridge refuses. */
export function matchesPattern(pattern: RulePattern | CompiledEventPattern, event: unknown): boolean {
  const compiledPattern = isCompiled(pattern) ? pattern : compileEventPattern(pattern);
  const fields = flatten(event, compiledPattern.prefixes);
  return compiledPattern.subPatterns.some((conditions) => matchFrom(conditions, 0, fields, []));
}

const isCompiled = (p: unknown): p is CompiledEventPattern =>
  typeof p === 'object' && p !== null && compiledMarker in p;
const compiledMarker = Symbol('compiled event pattern');

// --- validation and compilation: event-ruler's JsonRuleCompiler, read in the same order ----

function fail(reason: string): never {
  throw new InvalidEventPatternError(reason);
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

/** Field names that cannot appear inside `$or` (event-ruler Constants.RESERVED_FIELD_NAMES_IN_OR_RELATIONSHIP). */
const reservedInOr = new Set([
  'exactly',
  'equals-ignore-case',
  'prefix',
  'suffix',
  'anything-but',
  'exists',
  'wildcard',
  'numeric',
  'cidr',
  '=',
  '<',
  '<=',
  '>',
  '>=',
  'regex',
  'not-wildcard',
  'not-equals-ignore-case',
  'date-after',
  'date-on-or-after',
  'date-before',
  'date-on-or-before',
  'in-date-range',
  'ip-address-in-range',
  'ip-address-not-in-range',
]);

const TOO_MANY_ELEMENTS = 'Too many elements in numeric expression';
const ONLY_ONE_KEY = 'Only one key allowed in match expression';

interface Draft {
  readonly tests: ValueTest[];
  absent: boolean;
}
type DraftRule = Map<string, Draft>;

class PatternCompiler {
  private readonly operators = new Set<PatternOperator>();

  compile(pattern: unknown): CompiledEventPattern {
    if (!isPlainObject(pattern)) fail('Filter is not an object');
    assertJson(pattern, '');
    const rules: DraftRule[] = [];
    this.object(rules, [], pattern as Record<string, unknown>, false);
    const subPatterns = rules.map((rule) =>
      [...rule.entries()]
        .map(([path, draft]) => ({ path, tests: draft.tests, absent: draft.absent }))
        // event-ruler sorts a rule's keys (Java String order: UTF-16 code units, as here).
        .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)),
    );
    const prefixes = new Set<string>();
    for (const conditions of subPatterns) {
      for (const { path } of conditions) {
        prefixes.add(path);
        for (let i = path.indexOf('.'); i >= 0; i = path.indexOf('.', i + 1)) prefixes.add(path.slice(0, i));
      }
    }
    return {
      subPatterns,
      operators: this.operators,
      prefixes,
      [compiledMarker]: true,
    } as CompiledEventPattern;
  }

  private object(
    rules: DraftRule[],
    path: readonly string[],
    node: Record<string, unknown>,
    inOr: boolean,
  ): void {
    const keys = Object.keys(node);
    for (const key of keys) {
      const value = node[key];
      if (key === '$or') {
        this.or(rules, path, value);
        continue;
      }
      if (inOr && reservedInOr.has(key))
        fail(`${key} is Ruler reserved fieldName which cannot be used inside $or.`);
      if (isPlainObject(value)) this.object(rules, [...path, key], value, inOr);
      else if (Array.isArray(value)) this.values(rules, [...path, key].join('.'), value);
      else fail(`"${key}" must be an object or an array`);
    }
    if (keys.length === 0) fail('Empty objects are not allowed');
  }

  /** Each branch forks every sub-pattern so far; keys read later are added to all of them. */
  private or(rules: DraftRule[], path: readonly string[], value: unknown): void {
    this.operators.add('$or');
    const before = rules.splice(0);
    if (!Array.isArray(value)) fail('It must be an Array followed with $or.');
    const branches = value as unknown[];
    for (const branch of branches) {
      if (!isPlainObject(branch)) fail('Only JSON object is allowed in array of $or relationship.');
      const forked = before.length > 0 ? before.map((rule) => new Map(rule)) : [new Map()];
      this.object(forked, path, branch as Record<string, unknown>, true);
      rules.push(...forked);
    }
    if (branches.length < 2) fail('There must have at least 2 Objects in $or relationship.');
  }

  private values(rules: DraftRule[], path: string, values: readonly unknown[]): void {
    const draft: Draft = { tests: [], absent: false };
    for (const value of values) {
      if (isPlainObject(value)) this.expression(draft, value);
      else if (typeof value === 'string') draft.tests.push(this.literalString(value));
      else if (typeof value === 'number') draft.tests.push(this.literalNumber(value));
      else if (value === null || typeof value === 'boolean') draft.tests.push(this.literal(String(value)));
      else fail('Match value must be String, number, true, false, or null');
    }
    if (values.length === 0) fail('Empty arrays are not allowed');
    if (rules.length === 0) rules.push(new Map());
    // A path named twice keeps its last conditions, as EventBridge does.
    for (const rule of rules) rule.set(path, draft);
  }

  /** A string value; one that is an IP address matches that address however it is written. */
  private literalString(text: string): ValueTest {
    this.operators.add('exact');
    const ip = ipAddress(text);
    if (ip instanceof Uint8Array)
      return (leaf) => leaf.kind === 'string' && sameBytes(ipAddress(leaf.text), ip);
    return (leaf) => leaf.kind === 'string' && leaf.text === text;
  }

  /** A number value matches an equal number (when comparable) or the same literal. */
  private literalNumber(value: number): ValueTest {
    this.operators.add('exact');
    const text = numberText(value);
    const scaled = scaledNumber(text);
    const comparable = typeof scaled === 'bigint' ? scaled : undefined;
    return (leaf) =>
      leaf.kind === 'number' &&
      (leaf.text === text || (comparable !== undefined && leaf.scaled === comparable));
  }

  private literal(text: string): ValueTest {
    this.operators.add('exact');
    return (leaf) => leaf.kind === 'literal' && leaf.text === text;
  }

  private expression(draft: Draft, expression: Record<string, unknown>): void {
    const keys = Object.keys(expression);
    const [name] = keys;
    if (name === undefined) fail('Match expression name not found');
    const arg = expression[name];
    const onlyOneKey = () => {
      if (keys.length > 1) fail(ONLY_ONE_KEY);
    };
    switch (name) {
      case 'exactly': {
        if (typeof arg !== 'string') fail('exact match pattern must be a string');
        onlyOneKey();
        this.operators.add('exactly');
        draft.tests.push((leaf) => leaf.kind === 'string' && leaf.text === arg);
        return;
      }
      case 'prefix':
      case 'suffix': {
        this.operators.add(name);
        if (isPlainObject(arg)) {
          const text = ignoreCaseOperand(name, arg);
          onlyOneKey();
          this.operators.add('equals-ignore-case');
          draft.tests.push(stringTest(ignoreCase(text, name)));
          return;
        }
        if (typeof arg !== 'string') fail(`${name} match pattern must be a string`);
        onlyOneKey();
        draft.tests.push(stringTest(name === 'prefix' ? (s) => s.startsWith(arg) : (s) => s.endsWith(arg)));
        return;
      }
      case 'numeric': {
        if (!Array.isArray(arg)) fail('Value of numeric must be an array.');
        const test = numericTest(arg as unknown[]);
        if (keys.length > 1) fail(TOO_MANY_ELEMENTS);
        this.operators.add('numeric');
        draft.tests.push(test);
        return;
      }
      case 'anything-but': {
        const test = anythingBut(arg);
        if (keys.length > 1) fail(TOO_MANY_ELEMENTS);
        this.operators.add('anything-but');
        draft.tests.push(test);
        return;
      }
      case 'exists': {
        if (typeof arg !== 'boolean') fail('exists match pattern must be either true or false.');
        onlyOneKey();
        this.operators.add('exists');
        if (arg) draft.tests.push(() => true);
        else draft.absent = true;
        return;
      }
      case 'cidr': {
        // Sic: event-ruler words a non-string cidr as a prefix error.
        if (typeof arg !== 'string') fail('prefix match pattern must be a string');
        const range = cidrRange(arg as string);
        onlyOneKey();
        this.operators.add('cidr');
        draft.tests.push((leaf) => leaf.kind === 'string' && inRange(ipAddress(leaf.text), range));
        return;
      }
      case 'equals-ignore-case': {
        if (typeof arg !== 'string') fail('equals-ignore-case match pattern must be a string');
        onlyOneKey();
        this.operators.add('equals-ignore-case');
        draft.tests.push(stringTest(ignoreCase(arg as string, 'equals')));
        return;
      }
      case 'wildcard': {
        if (typeof arg !== 'string') fail('wildcard match pattern must be a string');
        const test = wildcard(arg as string);
        onlyOneKey();
        this.operators.add('wildcard');
        draft.tests.push(stringTest(test));
        return;
      }
      default:
        fail(`Unrecognized match type ${name}`);
    }
  }
}

/** Rejects what JSON cannot carry, since EventBridge only ever sees the pattern's JSON text. */
function assertJson(value: unknown, where: string): void {
  const at = where === '' ? 'the pattern' : `"${where}"`;
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) fail(`${at} is not a JSON value (${value})`);
    return;
  }
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) assertJson(item, `${where}[${i}]`);
    return;
  }
  if (isPlainObject(value)) {
    for (const [key, item] of Object.entries(value)) assertJson(item, where === '' ? key : `${where}.${key}`);
    return;
  }
  fail(`${at} is not a JSON value (${typeof value})`);
}

/** The operand of `{"prefix"|"suffix": {"equals-ignore-case": "..."}}`. */
function ignoreCaseOperand(kind: 'prefix' | 'suffix', inner: Record<string, unknown>): string {
  const keys = Object.keys(inner);
  const Kind = kind === 'prefix' ? 'Prefix' : 'Suffix';
  const [name] = keys;
  if (name === undefined) return fail(`${Kind} expression name not found`);
  if (name !== 'equals-ignore-case') fail(`Unsupported ${kind} pattern: ${name}`);
  const text = inner[name];
  if (typeof text !== 'string') fail('equals-ignore-case match pattern must be a string');
  if (keys.length > 1) fail(ONLY_ONE_KEY);
  return text as string;
}

const stringTest =
  (test: (s: string) => boolean): ValueTest =>
  (leaf) =>
    leaf.kind === 'string' && test(leaf.text);

// --- anything-but --------------------------------------------------------------------------

type AnythingButKind = 'equals-ignore-case' | 'prefix' | 'suffix' | 'wildcard';
const anythingButKinds: readonly string[] = ['equals-ignore-case', 'prefix', 'suffix', 'wildcard'];

/** Messages for a value of the wrong type in each anything-but form (event-ruler's wording). */
const anythingButTypeError: Record<AnythingButKind, string> = {
  'equals-ignore-case':
    'Inside anything-but/equals-ignore-case list, number|start|null|boolean is not supported.',
  wildcard: 'wildcard match pattern must be a string',
  prefix: 'prefix/suffix match pattern must be a string',
  suffix: 'prefix/suffix match pattern must be a string',
};

/**
 * `anything-but` matches a present value that none of its operands matches: a value of another
 * type (a number against strings, null, a boolean) always passes. An absent field never does.
 */
function anythingBut(arg: unknown): ValueTest {
  let kind: AnythingButKind | undefined;
  let operand = arg;
  let innerKeys = 0;
  if (isPlainObject(arg)) {
    const keys = Object.keys(arg);
    const [name] = keys;
    if (name === undefined) return fail('Anything-But expression name not found');
    if (!anythingButKinds.includes(name)) fail(`Unsupported anything-but pattern: ${name}`);
    kind = name as AnythingButKind;
    operand = arg[name];
    innerKeys = keys.length;
  }
  if (!Array.isArray(operand) && typeof operand !== 'string' && typeof operand !== 'number') {
    fail('Value of anything-but must be an array or single string/number value.');
  }
  const test = kind === undefined ? anythingButValues(operand) : anythingButPatterns(kind, operand);
  if (innerKeys > 1) fail(TOO_MANY_ELEMENTS);
  return test;
}

/** `anything-but` a string or number, or a list of only strings or only numbers. */
function anythingButValues(operand: unknown): ValueTest {
  const strings = new Set<string>();
  const numbers = new Set<bigint>();
  for (const value of Array.isArray(operand) ? operand : [operand]) {
    if (typeof value === 'string') strings.add(value);
    else if (typeof value === 'number') numbers.add(comparable(value));
    else fail('Inside anything but list, start|null|boolean is not supported.');
  }
  if (strings.size > 0 === numbers.size > 0) {
    fail('Inside anything but list, either all values are number or string, mixed type is not supported');
  }
  return (leaf) =>
    !(
      (leaf.kind === 'string' && strings.has(leaf.text)) ||
      (leaf.kind === 'number' && leaf.scaled !== undefined && numbers.has(leaf.scaled))
    );
}

/** `anything-but` with equals-ignore-case, prefix, suffix or wildcard, one operand or a list of them. */
function anythingButPatterns(kind: AnythingButKind, operand: unknown): ValueTest {
  const operands = Array.isArray(operand) ? operand : [operand];
  for (const value of operands) {
    if (typeof value !== 'string') fail(anythingButTypeError[kind]);
    if ((kind === 'prefix' || kind === 'suffix') && value === '') fail('Null prefix/suffix not allowed');
  }
  const tests = (operands as string[]).map((text): ((s: string) => boolean) => {
    if (kind === 'prefix') return (s) => s.startsWith(text);
    if (kind === 'suffix') return (s) => s.endsWith(text);
    return kind === 'equals-ignore-case' ? ignoreCase(text, 'equals') : wildcard(text);
  });
  return (leaf) => !(leaf.kind === 'string' && tests.some((test) => test(leaf.text)));
}

// --- equals-ignore-case and wildcard --------------------------------------------------------

const escapeRegExp = (s: string) => s.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&');

/**
 * Case-insensitive comparison as event-ruler's EqualsIgnoreCaseParser does it: each UTF-16
 * unit of the pattern stands for its lower or its upper case (so "ß" matches "ß" or "SS"); the
 * event's value is compared as it is.
 */
function ignoreCase(pattern: string, anchor: 'equals' | 'prefix' | 'suffix'): (s: string) => boolean {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const unit = pattern.charAt(i);
    const forms = [...new Set([unit.toLowerCase(), unit.toUpperCase()])].map(escapeRegExp);
    source += forms.length === 1 ? forms[0] : `(?:${forms.join('|')})`;
  }
  const regExp = new RegExp(
    anchor === 'equals' ? `^${source}$` : anchor === 'prefix' ? `^${source}` : `${source}$`,
  );
  return (s) => regExp.test(s);
}

/**
 * A wildcard: `*` is any run of characters, `\*` a literal `*`, `\\` a literal `\`; two `*` in
 * a row and any other escape are refused, at the byte position event-ruler's WildcardParser
 * reports (it counts UTF-8 bytes from the value's opening quote).
 */
function wildcard(pattern: string): (s: string) => boolean {
  const bytes = Buffer.from(`"${pattern}"`, 'utf8');
  const STAR = 0x2a;
  const BACKSLASH = 0x5c;
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] === STAR && bytes[i + 1] === STAR) fail(`Consecutive wildcard characters at pos ${i}`);
    if (bytes[i] === BACKSLASH) {
      if (bytes[i + 1] !== STAR && bytes[i + 1] !== BACKSLASH) fail(`Invalid escape character at pos ${i}`);
      i++;
    }
  }
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern.charAt(i);
    if (c === '*') source += '[\\s\\S]*';
    else if (c === '\\') source += escapeRegExp(pattern.charAt(++i));
    else source += escapeRegExp(c);
  }
  const regExp = new RegExp(`^${source}$`);
  return (s) => regExp.test(s);
}

// --- numbers: event-ruler's ComparableNumber ------------------------------------------------

/** EventBridge compares numbers from -5e11 to 5e11 with six decimals: as integers of millionths. */
const DECIMALS = 6;
const LIMIT = 5n * 10n ** 17n;
const JAVA_LONG_MAX = 2n ** 63n - 1n;
const OUT_OF_RANGE = 'Value must be between -5.0E11 and 5.0E11, inclusive';

/** The JSON text of a finite number, which is what event-ruler reads. */
const numberText = (n: number) => JSON.stringify(n);

/**
 * The number `text` denotes times 10^6 as an exact integer, or the reason event-ruler's
 * ComparableNumber.generate gives for refusing it: more than six decimals once trailing zeros
 * are dropped, an overflow of Java's long, or outside -5e11..5e11.
 */
function scaledNumber(text: string): bigint | string {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!m) return `Not a number: ${text}`;
  const fraction = m[3] ?? '';
  let digits = `${m[2]}${fraction}`.replace(/^0+(?=\d)/, '');
  let exponent = Number(m[4] ?? 0) - fraction.length;
  while (digits.length > 1 && digits.endsWith('0')) {
    digits = digits.slice(0, -1);
    exponent++;
  }
  if (digits === '0') return 0n;
  if (-exponent > DECIMALS) return 'Only values upto 6 decimals are supported';
  const shift = exponent + DECIMALS;
  // Past 19 digits it cannot fit a long; stop before building a huge power of ten.
  if (digits.length + shift > 20) return 'Overflow';
  const scaled = BigInt(digits) * 10n ** BigInt(shift) * (m[1] ? -1n : 1n);
  if (scaled > JAVA_LONG_MAX || scaled < -JAVA_LONG_MAX - 1n) return 'Overflow';
  if (scaled > LIMIT || scaled < -LIMIT) return OUT_OF_RANGE;
  return scaled;
}

/** A pattern's number as EventBridge compares it; refuses one it cannot compare. */
function comparable(n: number): bigint {
  const scaled = scaledNumber(numberText(n));
  return typeof scaled === 'bigint' ? scaled : fail(scaled);
}

/** What event-ruler's parser echoes for a token of a numeric expression. */
function tokenText(token: unknown, present: boolean): string {
  if (!present) return ']';
  if (Array.isArray(token)) return '[';
  if (isPlainObject(token)) return '{';
  if (typeof token === 'string') return token;
  return typeof token === 'number' ? numberText(token) : String(token);
}

/** `{"numeric": ["=", n]}`, or one or two comparisons bounding a range. */
function numericTest(spec: readonly unknown[]): ValueTest {
  const [operator, value] = spec;
  if (typeof operator !== 'string')
    fail(`Invalid member in numeric match: ${tokenText(operator, spec.length > 0)}`);
  const numeric = (v: unknown, op: string): number => {
    if (typeof v !== 'number') fail(`Value of ${op} must be numeric`);
    return v as number;
  };
  switch (operator) {
    case '=': {
      const n = numeric(value, 'equals');
      if (spec.length > 2) fail(TOO_MANY_ELEMENTS);
      const target = comparable(n);
      return (leaf) => leaf.kind === 'number' && leaf.scaled === target;
    }
    case '<':
    case '<=': {
      const n = numeric(value, operator);
      if (spec.length > 2) fail(TOO_MANY_ELEMENTS);
      return range(undefined, false, comparable(n), operator === '<');
    }
    case '>':
    case '>=': {
      const n = numeric(value, operator);
      if (spec.length === 2) return range(comparable(n), operator === '>', undefined, false);
      const [, , upper, top] = spec;
      if (typeof upper !== 'string') fail(`Bad value in numeric range: ${tokenText(upper, true)}`);
      if (upper !== '<' && upper !== '<=') fail(`Bad numeric range operator: ${upper}`);
      const t = numeric(top, upper as string);
      if (spec.length > 4) fail('Too many terms in numeric range expression');
      const bottom = comparable(n);
      const ceiling = comparable(t);
      if (bottom >= ceiling) fail('Bottom must be less than top');
      return range(bottom, operator === '>', ceiling, upper === '<');
    }
    default:
      return fail(`Unrecognized numeric range operator: ${operator}`);
  }
}

function range(
  bottom: bigint | undefined,
  openBottom: boolean,
  top: bigint | undefined,
  openTop: boolean,
): ValueTest {
  return (leaf) => {
    if (leaf.kind !== 'number' || leaf.scaled === undefined) return false;
    const v = leaf.scaled;
    const aboveBottom = bottom === undefined || (openBottom ? v > bottom : v >= bottom);
    const belowTop = top === undefined || (openTop ? v < top : v <= top);
    return aboveBottom && belowTop;
  };
}

// --- IP addresses: event-ruler's CIDR ---------------------------------------------------------

const IPV4_LITERAL = /^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$/;
const IPV6_LITERAL = /^[0-9a-fA-F:]*:[0-9a-fA-F:]*$/;

/**
 * The bytes of an IPv4 (4) or IPv6 (16) literal, 'invalid' for one that looks like an address
 * but is not, 'nonstandard' for anything else. An IPv4-mapped IPv6 address is its IPv4 address,
 * as Java's InetAddress makes it.
 */
function ipAddress(text: string): Uint8Array | 'invalid' | 'nonstandard' {
  if (IPV4_LITERAL.test(text)) {
    const octets = text.split('.').map(Number);
    return octets.every((o) => o <= 255) ? Uint8Array.from(octets) : 'invalid';
  }
  if (IPV6_LITERAL.test(text)) {
    const bytes = ipv6Bytes(text);
    if (!bytes) return 'invalid';
    const mapped = bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
    return mapped ? bytes.slice(12) : bytes;
  }
  return 'nonstandard';
}

/** Eight groups of up to four hex digits, one `::` standing for the missing zero groups. */
function ipv6Bytes(text: string): Uint8Array | undefined {
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (half: string | undefined) => (half === undefined || half === '' ? [] : half.split(':'));
  const head = groups(halves[0]);
  const tail = groups(halves[1]);
  const compressed = halves.length === 2;
  const count = head.length + tail.length;
  if (compressed ? count > 7 : count !== 8) return undefined;
  const all = [...head, ...Array<string>(compressed ? 8 - count : 0).fill('0'), ...tail];
  if (!all.every((g) => /^[0-9a-fA-F]{1,4}$/.test(g))) return undefined;
  const bytes = new Uint8Array(16);
  all.forEach((g, i) => {
    const value = Number.parseInt(g, 16);
    bytes[2 * i] = value >> 8;
    bytes[2 * i + 1] = value & 0xff;
  });
  return bytes;
}

const sameBytes = (a: Uint8Array | string, b: Uint8Array) =>
  a instanceof Uint8Array && a.length === b.length && a.every((byte, i) => byte === b[i]);

interface IpRange {
  readonly low: Uint8Array;
  readonly high: Uint8Array;
}

/** A cidr block, checked with event-ruler's messages; it covers its whole block whatever the host bits given. */
function cidrRange(cidr: string): IpRange {
  // Java's String.split drops trailing empty strings.
  const parts = cidr.split('/');
  while (parts.length > 0 && parts[parts.length - 1] === '') parts.pop();
  if (parts.length !== 2) fail("Malformed CIDR, one '/' required");
  const [ip = '', maskText = ''] = parts;
  if (!/^[+-]?\d+$/.test(maskText) || Math.abs(Number(maskText)) > 2 ** 31) {
    fail('Malformed CIDR, mask bits must be an integer');
  }
  const maskBits = Number(maskText);
  if (maskBits < 0) fail('Malformed CIDR, mask bits must not be negative');
  const address = ipAddress(ip);
  if (address === 'invalid') return fail(`Invalid IP address: ${ip}`);
  if (address === 'nonstandard') return fail(`Nonstandard IP address: ${ip}`);
  if (address.length === 4 && maskBits > 31) fail('IPv4 mask bits must be < 32');
  if (address.length === 16 && maskBits > 127) fail('IPv6 mask bits must be < 128');
  const low = new Uint8Array(address.length);
  const high = new Uint8Array(address.length);
  address.forEach((byte, i) => {
    const fixed = Math.max(0, Math.min(8, maskBits - 8 * i));
    const hostMask = 0xff >> fixed;
    low[i] = byte & ~hostMask & 0xff;
    high[i] = byte | hostMask;
  });
  return { low, high };
}

function inRange(address: Uint8Array | string, { low, high }: IpRange): boolean {
  if (!(address instanceof Uint8Array) || address.length !== low.length) return false;
  return compareBytes(address, low) >= 0 && compareBytes(address, high) <= 0;
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < a.length; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

// --- matching ---------------------------------------------------------------------------------

/** One array element an event value lies in: which array (numbered as met) and which index. */
type Membership = readonly (readonly [array: number, index: number])[];

interface Field {
  readonly leaf: Leaf;
  readonly membership: Membership;
}

/** The event's leaves by dotted path, for the paths the pattern can reach. */
function flatten(event: unknown, prefixes: ReadonlySet<string>): Map<string, Field[]> {
  const fields = new Map<string, Field[]>();
  let arrays = 0;
  const visit = (value: unknown, path: string, membership: Membership): void => {
    if (Array.isArray(value)) {
      const array = arrays++;
      for (const [index, element] of value.entries()) visit(element, path, [...membership, [array, index]]);
      return;
    }
    if (typeof value === 'object' && value !== null) {
      for (const [key, child] of Object.entries(value)) {
        const childPath = path === '' ? key : `${path}.${key}`;
        if (prefixes.has(childPath)) visit(child, childPath, membership);
      }
      return;
    }
    const leaf = leafOf(value);
    if (leaf === undefined || path === '') return;
    const list = fields.get(path);
    if (list) list.push({ leaf, membership });
    else fields.set(path, [{ leaf, membership }]);
  };
  if (typeof event === 'object' && event !== null && !Array.isArray(event)) visit(event, '', []);
  return fields;
}

function leafOf(value: unknown): Leaf | undefined {
  if (typeof value === 'string') return { kind: 'string', text: value };
  if (typeof value === 'number' && Number.isFinite(value)) {
    const text = numberText(value);
    const scaled = scaledNumber(text);
    return { kind: 'number', text, scaled: typeof scaled === 'bigint' ? scaled : undefined };
  }
  if (value === null) return { kind: 'literal', text: 'null' };
  if (typeof value === 'boolean') return { kind: 'literal', text: value ? 'true' : 'false' };
  return undefined;
}

/** `b`'s elements joined to `a`'s, or undefined when they disagree on an element of one array. */
function join(a: Membership, b: Membership): Membership | undefined {
  let joined: (readonly [number, number])[] | undefined;
  for (const [array, index] of b) {
    const known = a.find(([other]) => other === array);
    if (known) {
      if (known[1] !== index) return undefined;
    } else {
      joined = [...(joined ?? a), [array, index]];
    }
  }
  return joined ?? a;
}

/**
 * Can the conditions from `i` on be met by one value per path, all within the array elements
 * chosen so far (event-ruler's array-consistent matching)? `exists: false` holds when no value
 * of its path agrees with those elements.
 */
function matchFrom(
  conditions: readonly PathCondition[],
  i: number,
  fields: ReadonlyMap<string, readonly Field[]>,
  membership: Membership,
): boolean {
  const condition = conditions[i];
  if (condition === undefined) return true;
  const candidates = fields.get(condition.path) ?? [];
  if (
    condition.absent &&
    candidates.every((f) => join(membership, f.membership) === undefined) &&
    matchFrom(conditions, i + 1, fields, membership)
  ) {
    return true;
  }
  for (const field of candidates) {
    const joined = join(membership, field.membership);
    if (joined === undefined || !condition.tests.some((test) => test(field.leaf))) continue;
    if (matchFrom(conditions, i + 1, fields, joined)) return true;
  }
  return false;
}
