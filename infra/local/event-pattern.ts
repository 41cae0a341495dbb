/**
 * EventBridge event-pattern matching for the local bus. Hand-written because no maintained
 * npm package implements EventBridge's semantics (arrays match if any element matches,
 * anything-but does not match a missing field, exists on leaves only, numeric on JSON numbers
 * only); AWS's own `TestEventPattern` needs the network.
 */

export type EventPattern = Readonly<Record<string, unknown>>;

/** Operators the matcher implements; a pattern using any other is rejected up front. */
export const supportedOperators = [
  'exact',
  'prefix',
  'suffix',
  'equals-ignore-case',
  'anything-but',
  'exists',
  'numeric',
  'wildcard',
  '$or',
] as const;

export class UnsupportedPatternError extends Error {
  override readonly name = 'UnsupportedPatternError';
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Lists the operators a pattern uses (`exact` for literal values); throws on any unsupported one. */
export function operatorsOf(pattern: EventPattern): Set<string> {
  const used = new Set<string>();
  const walk = (node: Record<string, unknown>) => {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$or') {
        if (!Array.isArray(value) || value.length < 2)
          throw new UnsupportedPatternError('$or needs at least two patterns');
        used.add('$or');
        for (const branch of value) {
          if (!isObject(branch)) throw new UnsupportedPatternError('$or branches must be objects');
          walk(branch);
        }
      } else if (Array.isArray(value)) {
        for (const item of value) {
          if (isObject(item)) {
            const [op, ...more] = Object.keys(item);
            if (!op || more.length > 0)
              throw new UnsupportedPatternError(`one operator per object, got ${JSON.stringify(item)}`);
            if (!(supportedOperators as readonly string[]).includes(op))
              throw new UnsupportedPatternError(`unsupported operator ${op}`);
            used.add(op);
          } else {
            used.add('exact');
          }
        }
      } else if (isObject(value)) {
        walk(value);
      } else {
        throw new UnsupportedPatternError(`pattern values must be arrays or objects (at "${key}")`);
      }
    }
  };
  if (!isObject(pattern)) throw new UnsupportedPatternError('a pattern is a JSON object');
  walk(pattern);
  return used;
}

/** Does `event` (the EventBridge event JSON) match `pattern`? */
export function matchesPattern(pattern: EventPattern, event: unknown): boolean {
  return matchObject(pattern, event);
}

function matchObject(pattern: Record<string, unknown>, value: unknown): boolean {
  for (const [key, sub] of Object.entries(pattern)) {
    if (key === '$or') {
      if (!(sub as Record<string, unknown>[]).some((branch) => matchObject(branch, value))) return false;
      continue;
    }
    const field = isObject(value) ? value[key] : undefined;
    const present = isObject(value) && key in value;
    if (Array.isArray(sub)) {
      if (!matchLeaf(sub, field, present)) return false;
    } else if (isObject(sub)) {
      // An array of objects matches when one element matches the whole sub-pattern (event-ruler
      // crushes arrays out but never combines fields of different elements).
      const candidates = Array.isArray(field) && field.length > 0 ? field : [field];
      if (!candidates.some((candidate) => matchObject(sub, candidate))) return false;
    }
  }
  return true;
}

function matchLeaf(conditions: readonly unknown[], field: unknown, present: boolean): boolean {
  return conditions.some((condition) => {
    if (isObject(condition) && 'exists' in condition) {
      const isLeaf = present && !isObject(field) && !(Array.isArray(field) && field.length === 0);
      // exists sees leaves only: false matches an absent field and an object or [] alike.
      return condition.exists === true ? isLeaf : !isLeaf;
    }
    if (!present) return false;
    // An event array matches when any of its elements matches.
    const values = Array.isArray(field) ? field : [field];
    if (isObject(condition) && 'anything-but' in condition) {
      return values.length > 0 && values.every((v) => !matchesAnythingBut(condition['anything-but'], v));
    }
    return values.some((v) => matchValue(condition, v));
  });
}

function matchValue(condition: unknown, value: unknown): boolean {
  if (!isObject(condition)) return condition === value;
  const [op] = Object.keys(condition);
  const arg = op === undefined ? undefined : condition[op];
  switch (op) {
    case 'prefix':
      return typeof value === 'string' && stringTest(arg, value, (v, a) => v.startsWith(a));
    case 'suffix':
      return typeof value === 'string' && stringTest(arg, value, (v, a) => v.endsWith(a));
    case 'equals-ignore-case':
      return (
        typeof value === 'string' && typeof arg === 'string' && value.toLowerCase() === arg.toLowerCase()
      );
    case 'wildcard':
      return typeof value === 'string' && typeof arg === 'string' && wildcard(arg).test(value);
    case 'numeric':
      return typeof value === 'number' && numeric(arg as unknown[], value);
    default:
      return false;
  }
}

function stringTest(arg: unknown, value: string, test: (v: string, a: string) => boolean): boolean {
  if (typeof arg === 'string') return test(value, arg);
  if (isObject(arg) && typeof arg['equals-ignore-case'] === 'string') {
    return test(value.toLowerCase(), arg['equals-ignore-case'].toLowerCase());
  }
  return false;
}

function matchesAnythingBut(arg: unknown, value: unknown): boolean {
  if (Array.isArray(arg)) return arg.includes(value);
  if (isObject(arg)) return matchValue(arg, value);
  return arg === value;
}

function wildcard(pattern: string): RegExp {
  const escaped = pattern.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${escaped.join('.*')}$`);
}

function numeric(spec: readonly unknown[], value: number): boolean {
  for (let i = 0; i + 1 < spec.length; i += 2) {
    const op = spec[i];
    const bound = spec[i + 1] as number;
    const ok =
      op === '='
        ? value === bound
        : op === '<'
          ? value < bound
          : op === '<='
            ? value <= bound
            : op === '>'
              ? value > bound
              : op === '>='
                ? value >= bound
                : false;
    if (!ok) return false;
  }
  return true;
}
