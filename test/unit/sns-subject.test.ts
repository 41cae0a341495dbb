import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { snsSubject as topicSubject } from '../../shared/consumers/topic-subject';

/** The subject as notify makes it for an approval: its prefix, then the title. */
const snsSubject = (title: string) => topicSubject(title, 'Approved: ');

import { taskTitle as acceptedTitle } from '../../shared/tasks/tasks-api';

// The title the tasks API accepts. Zod's `.max` counts code points (500 emoji are 1,000 UTF-16
// units), and the body is JSON, so any code unit can arrive; the schema refuses NUL and lone
// surrogates, and the generator's other titles are filtered through it.

const isControl = (unit: number) => unit <= 0x1f || (unit >= 0x7f && unit <= 0x9f);
const isHighSurrogate = (unit: number) => unit >= 0xd800 && unit <= 0xdbff;
const isLowSurrogate = (unit: number) => unit >= 0xdc00 && unit <= 0xdfff;

/**
 * Why SNS would refuse `subject`, or undefined. Written from the Publish rules ("UTF-8 text with
 * no line breaks or control characters, and less than 100 characters long"), reading "character"
 * as the stricter of UTF-16 code unit and code point, and independent of `snsSubject`.
 */
function snsSubjectViolation(subject: string): string | undefined {
  if (subject.length === 0) return 'empty';
  if (subject.length >= 100) return `${subject.length} UTF-16 code units`;
  if ([...subject].length >= 100) return `${[...subject].length} code points`;
  for (let i = 0; i < subject.length; i++) {
    const unit = subject.charCodeAt(i);
    const at = `U+${unit.toString(16).padStart(4, '0')} at ${i}`;
    if (isHighSurrogate(unit)) {
      if (!isLowSurrogate(subject.charCodeAt(i + 1))) return `lone high surrogate ${at}`;
      i++;
    } else if (isLowSurrogate(unit)) return `lone low surrogate ${at}`;
    else if (isControl(unit)) return `control character ${at}`;
    else if (unit === 0x2028 || unit === 0x2029) return `line break ${at}`;
  }
  // Redundant with the surrogate walk above, but by another route: ill-formed UTF-16 does not survive UTF-8.
  if (Buffer.from(subject, 'utf8').toString('utf8') !== subject) return 'not UTF-8 text';
  return undefined;
}

// What a hostile client can put in a JSON title, one unit at a time.
const nastyUnit = fc.oneof(
  fc.constantFrom('\n', '\r', '\r\n', '\t', '\v', '\f', ' ', '  ', '\u0000', '\u0007', '\u001b', '\u007f'),
  fc.constantFrom('\u0085', '\u009b', '\u009f', '\u2028', '\u2029', '\u00a0', '\u3000', '\ufeff'),
  fc.constantFrom('\u200b', '\u200c', '\u200d', '\u2060', '\u202e', '\ufffd', '…'),
  fc.integer({ min: 0xd800, max: 0xdfff }).map((unit) => String.fromCharCode(unit)),
  fc.constantFrom('😀', '👩‍💻', '🇫🇷', '𝔸', '\u{10ffff}'),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 4 }),
);

const rawTitle = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 520, size: 'max' }),
  fc.string({ unit: 'binary', maxLength: 520, size: 'max' }),
  fc.string({ unit: 'binary-ascii', maxLength: 520, size: 'max' }),
  fc.string({ unit: nastyUnit, maxLength: 520, size: 'max' }),
  // Around the cut: 'Approved: ' is 10 code units, so the 99th lands near title unit 89.
  fc
    .tuple(
      fc.string({ unit: 'grapheme-ascii', minLength: 80, maxLength: 92 }),
      fc.string({ unit: nastyUnit, minLength: 1, maxLength: 12 }),
    )
    .map(([head, tail]) => head + tail),
);

/** Titles the tasks API accepts: the raw strings that pass its schema, trimmed as it trims them. */
const accepted = rawTitle
  .map((raw) => acceptedTitle.safeParse(raw))
  .filter((parsed) => parsed.success)
  .map((parsed) => parsed.data as string);

/** Text `snsSubject` has no reason to change: printable, single spaces, no edge whitespace. */
const plainTitle = (maxLength: number) =>
  fc
    .string({ unit: 'grapheme', minLength: 1, maxLength, size: 'max' })
    .map((raw) => raw.replace(/\s+/gu, ' ').trim())
    .filter((t) => t.length > 0);

describe('snsSubject', () => {
  it('turns every title the tasks API accepts into a subject SNS accepts', () => {
    fc.assert(
      fc.property(accepted, (title) => {
        const subject = snsSubject(title);
        expect(snsSubjectViolation(subject)).toBeUndefined();
        expect(subject).toBe(subject.trim());
        expect(subject).not.toMatch(/\s\s/u);
        expect(subject.startsWith('Approved:')).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('keeps a plain title that fits as it is', () => {
    fc.assert(
      fc.property(plainTitle(60), (title) => {
        fc.pre(title.length <= 89);
        expect(snsSubject(title)).toBe(`Approved: ${title}`);
      }),
      { numRuns: 500 },
    );
  });

  it('cuts a plain title that does not fit as late as it can and ends it with an ellipsis', () => {
    fc.assert(
      fc.property(plainTitle(250), (title) => {
        const full = `Approved: ${title}`;
        fc.pre(full.length > 99);
        const subject = snsSubject(title);
        const kept = subject.slice(0, -1);
        expect(subject.endsWith('…')).toBe(true);
        expect(full.startsWith(kept)).toBe(true);
        // 98 units for the text; at most one astral code point and one trailing space given back.
        expect(kept.length).toBeGreaterThanOrEqual(96);
      }),
      { numRuns: 500 },
    );
  });

  it('cuts a 500-character title to 99 characters ending in an ellipsis', () => {
    const subject = snsSubject('a'.repeat(500));
    expect(subject).toBe(`Approved: ${'a'.repeat(88)}…`);
    expect(subject).toHaveLength(99);
  });

  it('cuts a title of only emoji between surrogate pairs', () => {
    // 500 emoji pass the API (1,000 code units); 10 prefix units + 44 pairs = 98, then the ellipsis.
    const title = '😀'.repeat(500);
    expect(acceptedTitle.safeParse(title).success).toBe(true);
    expect(snsSubject(title)).toBe(`Approved: ${'😀'.repeat(44)}…`);
  });

  it('keeps a surrogate pair that ends exactly at the 99th code unit', () => {
    const title = `${'a'.repeat(87)}😀`;
    expect(snsSubject(title)).toBe(`Approved: ${title}`);
    expect(snsSubject(title)).toHaveLength(99);
  });

  it('drops, never splits, a surrogate pair that straddles the cut', () => {
    // 'Approved: ' + 87 letters is 97 units: the pair would end at unit 99, past the 98 left for text.
    expect(snsSubject(`${'a'.repeat(87)}😀b`)).toBe(`Approved: ${'a'.repeat(87)}…`);
    expect(snsSubject(`${'a'.repeat(88)}😀`)).toBe(`Approved: ${'a'.repeat(88)}…`);
  });

  it('folds newlines, tabs and other control characters into single spaces', () => {
    expect(snsSubject('Line one\r\n\n\tline two\u000bthree')).toBe('Approved: Line one line two three');
    expect(snsSubject('a\u0000b\u007fc\u0085d\u009be\u2028f\u2029g')).toBe('Approved: a b c d e f g');
    expect(snsSubject('\u0000\u0007\u001b')).toBe('Approved:');
  });

  it('replaces lone surrogates and keeps well-formed pairs', () => {
    expect(snsSubject('a\ud800b\udc00c\ud83d\ude00')).toBe('Approved: a\ufffdb\ufffdc😀');
    expect(snsSubject('\udc00\ud800')).toBe('Approved: \ufffd\ufffd');
  });

  it('recognises the subjects SNS refuses (the checker can fail)', () => {
    expect(snsSubjectViolation('')).toBe('empty');
    expect(snsSubjectViolation('a'.repeat(100))).toMatch(/code units/);
    expect(snsSubjectViolation('a\nb')).toMatch(/control/);
    expect(snsSubjectViolation('a\u0085b')).toMatch(/control/);
    expect(snsSubjectViolation('a\u2028b')).toMatch(/line break/);
    expect(snsSubjectViolation('a\ud83d')).toMatch(/lone high surrogate/);
    expect(snsSubjectViolation('\ude00a')).toMatch(/lone low surrogate/);
    expect(snsSubjectViolation(`Approved: ${'😀'.repeat(44)}…`)).toBeUndefined();
  });
});
