import { describe, expect, it } from 'vitest';
import {
  compileEventPattern,
  InvalidEventPatternError,
  matchesPattern,
} from '../../shared/events/event-pattern';
import type { RulePattern } from '../../shared/topology';

// One describe per behaviour the local matcher used to get wrong. Each case names where it
// comes from: aws/event-ruler (AWS's matcher, the engine of EventBridge rules: its tests under
// src/test and the behaviour of its sources under src/main) or the EventBridge User Guide.

const reason = (pattern: unknown) => {
  try {
    compileEventPattern(pattern);
    return undefined;
  } catch (err) {
    if (err instanceof InvalidEventPatternError) return err.reason;
    throw err;
  }
};

describe('anything-but on an array field matches when any element is not excluded', () => {
  // event-ruler src/test/resources/correctness-cases.json "primarray: anything-but in array" and
  // "anything-but array": each array element is a field of its own (README "JSON Array Matching").
  it.each([
    ['one element excluded, one not', { tags: ['banned', 'ok'] }, true],
    ['every element excluded', { tags: ['banned', 'banned'] }, false],
    ['no element', { tags: [] }, false],
  ] as const)('%s', (_, detail, expected) => {
    expect(matchesPattern({ detail: { tags: [{ 'anything-but': 'banned' }] } }, { detail })).toBe(expected);
  });

  it('in an array of objects, within one element (correctness-cases.json "anything-but array")', () => {
    const pattern = { u: { s: [{ 'anything-but': 'banned' }], n: [{ exists: true }] } };
    const event = {
      u: [
        { n: 'alice', s: 'banned' },
        { n: 'bob', s: 'active' },
      ],
    };
    expect(matchesPattern(pattern, event)).toBe(true);
    expect(matchesPattern(pattern, { u: [{ n: 'alice', s: 'banned' }] })).toBe(false);
  });

  it('a numeric list: [100, 50] has a value that is not 100 or 500 (https://docs.aws.amazon.com/sns/latest/dg/numeric-value-matching.html, the same matcher)', () => {
    expect(matchesPattern({ price: [{ 'anything-but': [100, 500] }] }, { price: [100, 50] })).toBe(true);
    expect(matchesPattern({ price: [{ 'anything-but': [100, 500] }] }, { price: [100, 500] })).toBe(false);
  });

  it.each([
    [{ prefix: 'init' }, ['init-1', 'post-init'], true],
    [{ prefix: 'init' }, ['init-1', 'init-2'], false],
    [{ suffix: '.txt' }, ['a.txt', 'b.bak'], true],
    [{ 'equals-ignore-case': 'x' }, ['X', 'y'], true],
    [{ wildcard: '*/lib/*' }, ['/usr/lib/a', '/usr/bin/b'], true],
  ] as const)('with %j over %j', (inner, values, expected) => {
    expect(matchesPattern({ f: [{ 'anything-but': inner }] }, { f: values })).toBe(expected);
  });
});

describe('arrays of arrays are crushed out like any array (event-ruler README "JSON Array Matching": "This works for multi-level arrays too")', () => {
  it.each([
    [{ a: ['x'] }, { a: [['w'], ['x', 'y']] }, true],
    [{ a: ['z'] }, { a: [['w'], ['x', 'y']] }, false],
    [{ a: [{ numeric: ['>', 2] }] }, { a: [[1, 2], [3]] }, true],
    [{ a: [{ prefix: 'ab' }] }, { a: [[['abc']]] }, true],
    [{ a: [{ 'anything-but': 'w' }] }, { a: [['w'], ['w']] }, false],
    [{ a: { b: ['x'] } }, { a: [[{ b: 'y' }], [{ b: 'x' }]] }, true],
  ])('%j against %j', (pattern, event, expected) => {
    expect(matchesPattern(pattern, event)).toBe(expected);
  });

  it('never combines fields from different elements (README: "refuse to recognize any match in which any two fields are within JSON objects that are in different elements of the same array")', () => {
    const event = {
      employees: [
        [
          { firstName: 'John', lastName: 'Doe' },
          { firstName: 'Anna', lastName: 'Smith' },
        ],
        [{ firstName: 'Peter', lastName: 'Jones' }],
      ],
    };
    expect(matchesPattern({ employees: { firstName: ['Anna'], lastName: ['Smith'] } }, event)).toBe(true);
    expect(matchesPattern({ employees: { firstName: ['Anna'], lastName: ['Jones'] } }, event)).toBe(false);
  });
});

describe('anything-but with a list under prefix, suffix, wildcard and equals-ignore-case', () => {
  // Accepted forms from event-ruler JsonRuleCompilerTest.testCompile; semantics: the value must
  // match none of the listed patterns (EventBridge runs in event_pattern_templates/*_list*.json5).
  it.each([
    [{ prefix: ['init', 'test'] }, 'post-init', true],
    [{ prefix: ['init', 'post'] }, 'post-init', false],
    [{ suffix: ['.txt', '.jpg'] }, 'file.txt.bak', true],
    [{ suffix: ['.txt', '.jpg'] }, 'file.jpg', false],
    [{ wildcard: ['*/init/*', '*/dir/*'] }, 'dir/post/dir', true],
    [{ wildcard: ['*/init/*', '*/dir/*'] }, 'dir/init/dir', false],
    [{ 'equals-ignore-case': ['initializing', 'stopped'] }, 'pending', true],
    [{ 'equals-ignore-case': ['initializing', 'stopped'] }, 'Stopped', false],
  ] as const)('%j and %s', (inner, state, expected) => {
    expect(matchesPattern({ state: [{ 'anything-but': inner }] }, { state })).toBe(expected);
  });

  it('matches values that are not strings at all: numbers and null (event_pattern_templates content_anything_*_int, *_null)', () => {
    expect(matchesPattern({ s: [{ 'anything-but': { prefix: ['init'] } }] }, { s: 12 })).toBe(true);
    expect(matchesPattern({ s: [{ 'anything-but': { wildcard: ['*a*'] } }] }, { s: null })).toBe(true);
    expect(matchesPattern({ s: [{ 'anything-but': { suffix: ['x'] } }] }, {})).toBe(false);
  });
});

describe('an escaped wildcard (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html: \\* is a literal *, \\\\ a literal \\)', () => {
  it.each([
    ['a\\*b', 'a*b', true],
    ['a\\*b', 'axb', false],
    ['a\\*b', 'a\\xb', false],
    ['a\\\\*', 'a\\anything', true],
    ['a\\\\*', 'a', false],
    ['*\\**', 'x*y', true],
    ['*\\**', 'xy', false],
  ])('%s against %s', (wildcard, value, expected) => {
    expect(matchesPattern({ f: [{ wildcard }] }, { f: value })).toBe(expected);
  });

  it('refuses any other escape and a trailing backslash (event-ruler input/WildcardParser.java)', () => {
    expect(reason({ f: [{ wildcard: 'a\\b' }] })).toBe('Invalid escape character at pos 2');
    expect(reason({ f: [{ wildcard: 'ab\\' }] })).toBe('Invalid escape character at pos 3');
    expect(reason({ f: [{ wildcard: 'ab**' }] })).toBe('Consecutive wildcard characters at pos 3');
  });
});

describe('cidr, IPv4 and IPv6 (event-ruler CIDR.java and README "IP Address Matching")', () => {
  it.each([
    ['10.0.0.0/24', '10.0.0.0', true],
    ['10.0.0.0/24', '10.0.0.255', true],
    ['10.0.0.0/24', '10.0.1.0', false],
    ['10.0.0.77/24', '10.0.0.1', true],
    ['0.0.0.0/0', '255.255.255.255', true],
    ['10.0.0.0/8', 'not an address', false],
    ['10.0.0.0/8', '10.0.0.256', false],
    ['2001:db8::/32', '2001:0db8:ffff::1', true],
    ['2001:db8::/32', '2001:db9::1', false],
    ['2001:db8::/32', '10.0.0.1', false],
    ['10.0.0.0/8', '::ffff:10.1.2.3', false],
    ['10.0.0.0/8', '::ffff:a01:203', true],
  ])('%s against %s', (cidr, ip, expected) => {
    expect(matchesPattern({ ip: [{ cidr }] }, { ip })).toBe(expected);
  });

  it('matches only strings', () => {
    expect(matchesPattern({ ip: [{ cidr: '0.0.0.0/0' }] }, { ip: 167772161 })).toBe(false);
  });

  it('a value that is an IP address matches the same address however it is written (CIDRTest.TestToString)', () => {
    expect(matchesPattern({ ip: ['2001:db8::1'] }, { ip: '2001:0DB8:0000:0000:0000:0000:0000:0001' })).toBe(
      true,
    );
    expect(matchesPattern({ ip: ['2001:db8::1'] }, { ip: '2001:db8::2' })).toBe(false);
    expect(matchesPattern({ ip: [{ exactly: '2001:db8::1' }] }, { ip: '2001:DB8::1' })).toBe(false);
  });
});

describe('suffix with equals-ignore-case (event-ruler JsonRuleCompilerTest.testSuffixEqualsIgnoreCaseCompile)', () => {
  it.each([
    ['image.PNG', true],
    ['IMAGE.png', true],
    ['image.png.bak', false],
    ['png', false],
  ])('%s', (file, expected) => {
    expect(matchesPattern({ file: [{ suffix: { 'equals-ignore-case': '.png' } }] }, { file })).toBe(expected);
  });
});

describe('equals-ignore-case folds each character of the pattern to its lower and upper case (event-ruler input/EqualsIgnoreCaseParser.java)', () => {
  it.each([
    ['straße', 'STRASSE', true],
    ['straße', 'straße', true],
    ['straße', 'strasse', false],
    ['ΣΊΣΥΦΟΣ', 'σίσυφοσ', true],
    ['Ǆ', 'ǆ', true],
  ])('%s against %s', (pattern, value, expected) => {
    expect(matchesPattern({ s: [{ 'equals-ignore-case': pattern }] }, { s: value })).toBe(expected);
  });
});

describe('numbers are compared as EventBridge compares them (event-ruler ComparableNumber.java: -5e11 to 5e11, six decimals)', () => {
  it.each([
    [['=', 300], 300.0, true],
    [['=', 301.8], 3.018e2, true],
    [['>', 0], 0.000001, true],
    [['<', 0], -0.000001, true],
    [['>', 0, '<', 1], 0.999999, true],
    [['>=', -5e11, '<=', 5e11], 5e11, true],
    [['>=', -5e11, '<=', 5e11], -5e11, true],
    [['>', 0], 6e11, false],
    [['<', 1], 0.0000001, false],
    [['>', 1], 1.0000001, false],
    [['=', 0], 0, true],
    [['=', 0], -0, true],
  ])('%j against %s', (numeric, value, expected) => {
    expect(matchesPattern({ n: [{ numeric }] }, { n: value })).toBe(expected);
  });

  it('a literal number matches an equal number written otherwise (event_pattern_templates number_comparison_float)', () => {
    expect(matchesPattern({ n: [300] }, { n: 300.0 })).toBe(true);
    expect(matchesPattern({ n: [0.5] }, { n: 5e-1 })).toBe(true);
    expect(matchesPattern({ n: [300] }, { n: '300' })).toBe(false);
  });

  it('a literal number beyond the comparable range or precision matches its own text (JsonRuleCompilerTest.testBigNumbers)', () => {
    expect(matchesPattern({ account: [123456789012] }, { account: 123456789012 })).toBe(true);
    expect(matchesPattern({ n: [1e15] }, { n: 1e15 })).toBe(true);
    expect(matchesPattern({ n: [1e15] }, { n: 1e15 + 2 })).toBe(false);
    expect(matchesPattern({ n: [0.1234567] }, { n: 0.1234567 })).toBe(true);
  });

  it.each([
    [['>', 6e11], 'Value must be between -5.0E11 and 5.0E11, inclusive'],
    [['<', -500000000000.1], 'Value must be between -5.0E11 and 5.0E11, inclusive'],
    [['<', 1.1234567], 'Only values upto 6 decimals are supported'],
    [['=', 0.0000001], 'Only values upto 6 decimals are supported'],
    [['<=', 1e13], 'Overflow'],
    [['>', 5, '<', 5], 'Bottom must be less than top'],
    [['>=', 5, '<=', 5], 'Bottom must be less than top'],
    [['>', 5, '<', 4.999999], 'Bottom must be less than top'],
    [[5], 'Invalid member in numeric match: 5'],
    [[], 'Invalid member in numeric match: ]'],
    [['>', 1, 2], 'Bad value in numeric range: 2'],
    [['>', 1, '>=', 2], 'Bad numeric range operator: >='],
    [['>', 1, '<', '2'], 'Value of < must be numeric'],
    [['=', 1, 2], 'Too many elements in numeric expression'],
  ])('refuses %j: %s', (numeric, expected) => {
    expect(reason({ n: [{ numeric }] })).toBe(expected);
  });

  it('refuses anything-but numbers it cannot compare', () => {
    expect(reason({ n: [{ 'anything-but': 6e11 }] })).toBe(
      'Value must be between -5.0E11 and 5.0E11, inclusive',
    );
    expect(reason({ n: [{ 'anything-but': [1, 0.1234567] }] })).toBe(
      'Only values upto 6 decimals are supported',
    );
  });
});

describe('patterns EventBridge refuses (event-ruler JsonRuleCompiler.java)', () => {
  it.each([
    [{ a: [{ exists: 'yes' }] }, 'exists match pattern must be either true or false.'],
    [{ a: [{ exists: 1 }] }, 'exists match pattern must be either true or false.'],
    [{ a: [{ prefix: 3 }] }, 'prefix match pattern must be a string'],
    [{ a: [{ prefix: null }] }, 'prefix match pattern must be a string'],
    [{ a: [] }, 'Empty arrays are not allowed'],
    [{ a: {} }, 'Empty objects are not allowed'],
    [{}, 'Empty objects are not allowed'],
    [{ a: [['x']] }, 'Match value must be String, number, true, false, or null'],
    [{ a: [{}] }, 'Match expression name not found'],
    [
      { a: [{ 'anything-but': ['x', 1] }] },
      'Inside anything but list, either all values are number or string, mixed type is not supported',
    ],
    [
      { a: [{ 'anything-but': [] }] },
      'Inside anything but list, either all values are number or string, mixed type is not supported',
    ],
    [{ a: [{ 'anything-but': [true] }] }, 'Inside anything but list, start|null|boolean is not supported.'],
    [
      { a: [{ 'anything-but': true }] },
      'Value of anything-but must be an array or single string/number value.',
    ],
    [{ a: [{ 'anything-but': {} }] }, 'Anything-But expression name not found'],
    [{ a: [{ 'anything-but': { exists: true } }] }, 'Unsupported anything-but pattern: exists'],
    [{ a: [{ numeric: 5 }] }, 'Value of numeric must be an array.'],
    [{ a: [{ numeric: ['>', 1], x: 1 }] }, 'Too many elements in numeric expression'],
    [{ a: [{ wildcard: 'a**' }] }, 'Consecutive wildcard characters at pos 2'],
    [{ a: [{ contains: 'x' }] }, 'Unrecognized match type contains'],
    [{ a: [{ cidr: '10.0.0.0/32' }] }, 'IPv4 mask bits must be < 32'],
    [{ a: [{ cidr: '::/128' }] }, 'IPv6 mask bits must be < 128'],
    [{ a: [{ cidr: '10.0.0.300/8' }] }, 'Invalid IP address: 10.0.0.300'],
    [{ a: [{ cidr: '10.0.0.0/' }] }, "Malformed CIDR, one '/' required"],
    [
      { a: [{ prefix: { 'equals-ignore-case': 'x' }, suffix: 'y' }] },
      'Only one key allowed in match expression',
    ],
    [{ $or: [{ a: ['x'] }] }, 'There must have at least 2 Objects in $or relationship.'],
    [{ $or: { a: ['x'] } }, 'It must be an Array followed with $or.'],
    [{ $or: [{ a: ['x'] }, ['b']] }, 'Only JSON object is allowed in array of $or relationship.'],
    [{ $or: [{ a: ['x'] }, {}] }, 'Empty objects are not allowed'],
    [
      { $or: [{ numeric: [1] }, { b: ['x'] }] },
      'numeric is Ruler reserved fieldName which cannot be used inside $or.',
    ],
    [
      { $or: [{ a: { prefix: ['x'] } }, { b: ['x'] }] },
      'prefix is Ruler reserved fieldName which cannot be used inside $or.',
    ],
  ])('%j', (pattern, expected) => {
    expect(reason(pattern)).toBe(expected);
  });

  it('refuses what is not JSON, naming where', () => {
    expect(reason(null)).toBe('Filter is not an object');
    expect(reason('{"a": ["x"]}')).toBe('Filter is not an object');
    expect(reason({ a: [Number.NaN] })).toMatch(/not a JSON value/);
    expect(reason({ a: [undefined] })).toMatch(/not a JSON value/);
  });

  it('reports the first problem in the order EventBridge reads the pattern', () => {
    expect(reason({ a: [{ prefix: 1 }], b: [] })).toBe('prefix match pattern must be a string');
    expect(reason({ b: [], a: [{ prefix: 1 }] })).toBe('Empty arrays are not allowed');
  });

  it('accepts a reserved word as a field name outside $or (event-ruler README "The $or Primitive")', () => {
    expect(reason({ numeric: ['x'], detail: { prefix: [1] } })).toBeUndefined();
  });
});

describe('$or', () => {
  it('a later key overrides the same path in a branch (event-ruler JsonRuleCompilerTest.testWithRuleOverride)', () => {
    const pattern = {
      name: ['a', 'b'],
      $or: [{ name: [{ 'anything-but': 'a' }] }, { condition1: ['x'] }],
    };
    expect(matchesPattern(pattern, { name: 'c' })).toBe(true);
    expect(matchesPattern(pattern, { name: 'a' })).toBe(false);
    expect(matchesPattern(pattern, { name: 'a', condition1: 'x' })).toBe(true);
    expect(matchesPattern(pattern, { name: 'c', condition1: 'x' })).toBe(true);
  });

  it('nests, with the branches AND-ed with the other keys (event-ruler README "Nested Or and And")', () => {
    const pattern: RulePattern = {
      source: ['aws.cloudwatch'],
      $or: [
        { metricName: ['CPUUtilization', 'ReadLatency'] },
        {
          metricType: ['MetricType'],
          namespace: ['AWS/EC2', 'AWS/ES'],
          $or: [{ metricId: [1234] }, { spaceId: [1000] }],
        },
        { scope: ['Service'] },
      ],
    };
    const base = { source: 'aws.cloudwatch' };
    expect(matchesPattern(pattern, { ...base, scope: 'Service' })).toBe(true);
    expect(
      matchesPattern(pattern, { ...base, metricType: 'MetricType', namespace: 'AWS/ES', spaceId: 1000 }),
    ).toBe(true);
    expect(matchesPattern(pattern, { ...base, metricType: 'MetricType', namespace: 'AWS/ES' })).toBe(false);
    expect(matchesPattern(pattern, { source: 'x', scope: 'Service' })).toBe(false);
  });
});

describe('keys with dots (event-ruler README "Caveat: Compiled rules and JSON keys with dots")', () => {
  it('a dotted pattern key and a dotted event key both name the nested path', () => {
    expect(
      matchesPattern(
        { detail: { 'state.status': ['running'] } },
        { detail: { state: { status: 'running' } } },
      ),
    ).toBe(true);
    expect(
      matchesPattern(
        { detail: { state: { status: ['running'] } } },
        { detail: { 'state.status': 'running' } },
      ),
    ).toBe(true);
  });
});
