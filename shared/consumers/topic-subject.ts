/**
 * The SNS Publish `Subject` for an approval, built so that no title the tasks API accepts can get
 * the publish rejected.
 *
 * SNS: "Subjects must be UTF-8 text with no line breaks or control characters, and less than 100
 * characters long" (https://docs.aws.amazon.com/sns/latest/api/API_Publish.html; the same text is
 * the `Subject` TSDoc in `@aws-sdk/client-sns`; older revisions asked for ASCII, the current one
 * allows UTF-8, so non-ASCII titles are kept). The tasks API accepts any JSON string of 1 to 500
 * characters after trimming (zod counts code points, so up to 1,000 UTF-16 code units), so a
 * title may carry newlines, tabs, C0/C1 controls, DEL and U+2028/U+2029. The API refuses NUL and
 * lone surrogates (a JSON `"\ud800"` escape); this still replaces a lone surrogate, so a subject is
 * valid whatever the title's origin.
 *
 * SNS does not say what a "character" is. A JVM service counts UTF-16 code units
 * (`String.length()`); a code-point count is never larger than that, so capping code units at 99
 * satisfies both readings. Cutting by code point means a surrogate pair is never split.
 */

// Shorter than 100 characters: 99 UTF-16 code units, hence also at most 99 code points.
const maxLength = 99;

const ellipsis = '…';

// With the `u` flag a well-formed pair is one astral code point, so `\p{Cs}` matches only a lone
// surrogate: the same replacement `String.prototype.toWellFormed` makes (it is ES2024, past our lib).
const loneSurrogate = /\p{Cs}/gu;
// `\p{Cc}` is exactly C0, DEL and C1 (what Java's `Character.isISOControl` calls control, NEL
// included); `\s` adds every Unicode space and U+2028/U+2029, the line breaks outside Cc.
const controlOrSpaceRun = /[\p{Cc}\s]+/gu;

/**
 * `<prefix><title>` (a consumer's own words before the title, none unless told) as a valid SNS
 * subject: lone surrogates become U+FFFD, each run of control characters, line breaks and
 * whitespace becomes one space, the result is trimmed, and a subject longer than 99 code units
 * is cut on a code-point boundary to end in '…'.
 * Never empty when the prefix is not blank: the prefix survives every title.
 */
export function snsSubject(title: string, prefix = ''): string {
  const subject = `${prefix}${title}`.replace(loneSurrogate, '\uFFFD').replace(controlOrSpaceRun, ' ').trim();
  if (subject.length <= maxLength) return subject;
  let cut = '';
  for (const codePoint of subject) {
    if (cut.length + codePoint.length > maxLength - ellipsis.length) break;
    cut += codePoint;
  }
  return `${cut.trimEnd()}${ellipsis}`;
}
