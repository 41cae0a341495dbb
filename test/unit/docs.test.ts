import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import GithubSlugger from 'github-slugger';
import { describe, expect, it } from 'vitest';

// The README is the page a newcomer reads in five minutes; everything else lives in docs/. These
// tests keep the README short and every link between the pages (a file, and a heading in it,
// slugged as GitHub slugs them) pointing at something that exists.

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const pages = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** Each heading's anchor on a page, outside fenced code. */
function anchors(page: string): Set<string> {
  const slugger = new GithubSlugger();
  const found = new Set<string>();
  let fenced = false;
  for (const line of readFileSync(join(root, page), 'utf8').split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6} (.+)$/.exec(line);
    if (heading?.[1]) found.add(slugger.slug(heading[1].replace(/`/g, '')));
  }
  return found;
}

/** The relative links of a page (`[text](target)`), outside fenced code. */
function links(page: string): string[] {
  const found: string[] = [];
  let fenced = false;
  for (const line of readFileSync(join(root, page), 'utf8').split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    if (fenced) continue;
    for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1] as string;
      if (!/^[a-z]+:/.test(target)) found.push(target);
    }
  }
  return found;
}

describe('the README and docs/', () => {
  it('keeps the README to at most 200 lines, with the sections a newcomer needs', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    expect(readme.trimEnd().split('\n').length).toBeLessThanOrEqual(200);
    for (const section of ['Quick start', 'Deploy', 'Operate', 'Extend', 'Documentation']) {
      expect(readme).toContain(`\n## ${section}\n`);
    }
  });

  it('links only to pages and headings that exist', () => {
    const broken: string[] = [];
    for (const page of pages) {
      for (const target of links(page)) {
        const [file, anchor] = target.split('#') as [string, string | undefined];
        const to = file === '' ? page : relative(root, join(root, dirname(page), file));
        if (!existsSync(join(root, to))) broken.push(`${page} -> ${target} (no ${to})`);
        else if (anchor !== undefined && to.endsWith('.md') && !anchors(to).has(anchor)) {
          broken.push(`${page} -> ${target} (no heading #${anchor} in ${to})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('links every page of docs/ from the README', () => {
    const fromReadme = new Set(links('README.md').map((t) => t.split('#')[0]));
    expect(pages.filter((p) => p !== 'README.md' && !fromReadme.has(p))).toEqual([]);
  });
});
