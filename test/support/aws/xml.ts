/**
 * The little XML the stand-ins answer with (awsQuery results and errors, S3 errors), written by
 * hand: the SDK's own builder (`@aws-sdk/xml-builder`) is marked `@internal` and is only here as
 * a transitive dependency of `@aws-sdk/core`, not one this project declares, and a handful of
 * fixed shapes need nothing more than escaping.
 */

/** An XML fragment that is already well-formed; text put into it goes through {@link xml}. */
export class XmlFragment {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const escapes: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&apos;',
};

/** Escapes text for element content and attribute values. */
export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => escapes[c] ?? c);
}

/** Content of an element: text (escaped), a number, or child elements (kept as they are). */
export type XmlContent = string | number | readonly XmlFragment[];

/** `<name attr="…">content</name>`; an absent content gives an empty element. */
export function xml(
  name: string,
  content?: XmlContent,
  attributes: Record<string, string> = {},
): XmlFragment {
  const attrs = Object.entries(attributes)
    .map(([k, v]) => ` ${k}="${escapeXml(v)}"`)
    .join('');
  const inner =
    content === undefined
      ? ''
      : typeof content === 'string'
        ? escapeXml(content)
        : typeof content === 'number'
          ? String(content)
          : content.map((c) => c.text).join('');
  return new XmlFragment(`<${name}${attrs}>${inner}</${name}>`);
}

/** A whole document: the XML declaration, then `root`. */
export function xmlDocument(root: XmlFragment): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n${root.text}`;
}
