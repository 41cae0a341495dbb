import { readFileSync, writeFileSync } from 'node:fs';

/**
 * Figures a script measures or computes live in the docs between two markers, written there by
 * the script itself (`--docs`), never retyped:
 *
 *     <!-- generated:capacity (npm run capacity -- --docs) -->
 *     …whatever the script wrote…
 *     <!-- /generated:capacity -->
 *
 * The opening marker names the command that writes the section, so a reader who wants it fresh
 * knows what to run. Hand-written: a marker pair is the whole format, and a markdown library
 * (remark) would reformat the rest of the page.
 */

/** The docs page a section lives in, from the project root. */
export type DocPage = `docs/${string}.md`;

const root = new URL('../../', import.meta.url);

function markers(name: string): RegExp {
  if (!/^[a-z0-9-]+$/.test(name))
    throw new Error(`a section name is lowercase letters, digits and dashes: ${name}`);
  return new RegExp(`(<!-- generated:${name} \\(([^)]*)\\) -->\\n)([\\s\\S]*?)(<!-- /generated:${name} -->)`);
}

/** The text between a section's markers (without its trailing newline), or `undefined` when the page has no such section. */
export function readSection(text: string, name: string): string | undefined {
  const m = markers(name).exec(text);
  return m === null ? undefined : (m[3] ?? '').replace(/\n$/, '');
}

/** `text` with the section `name` replaced by `body`; throws when the page has no such markers. */
export function replaceSection(text: string, name: string, body: string): string {
  const pattern = markers(name);
  if (!pattern.test(text))
    throw new Error(`no <!-- generated:${name} (...) --> ... <!-- /generated:${name} --> markers`);
  return text.replace(
    pattern,
    (_, open: string, _command: string, _old: string, close: string) =>
      `${open}${body.replace(/\n$/, '')}\n${close}`,
  );
}

/** Reads a docs page (a path from the project root). */
export function readDoc(page: DocPage): string {
  return readFileSync(new URL(page, root), 'utf8');
}

/** Writes `body` into section `name` of `page`; returns the page written, for a progress line. */
export function writeSection(page: DocPage, name: string, body: string): string {
  writeFileSync(new URL(page, root), replaceSection(readDoc(page), name, body));
  return page;
}
