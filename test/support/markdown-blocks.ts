import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const projectRoot = fileURLToPath(new URL('../..', import.meta.url));

/** The pages a user reads: the README and every page of docs/, relative to the project root. */
export const documentationPages: readonly string[] = [
  'README.md',
  ...readdirSync(join(projectRoot, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];

/**
 * Why a command block is not run by the docs test, as the markdown says it in an HTML comment on
 * the line before the block (`<!-- needs: aws -->`), invisible on GitHub:
 * - `aws`: an AWS account and credentials;
 * - `docker`: a Docker engine (LocalStack);
 * - `setup`: the set-up the suite itself stands for (`npm ci`, `npm start`, `npm test`: CI runs
 *   `.ci/run` on a clean clone, the end-to-end tests start `npm start`'s entry point).
 */
export const blockNeeds = ['aws', 'docker', 'setup'] as const;
export type BlockNeed = (typeof blockNeeds)[number];

/** One fenced block of a page. */
export interface MarkdownBlock {
  readonly page: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  /** The fence's info string (`bash`, `text`, …), '' when it has none. */
  readonly lang: string;
  readonly body: string;
  /** The `<!-- needs: … -->` marker on the line before the fence, if any (the raw value). */
  readonly needs?: string;
  /** The section heading (`## …`) the block sits under. */
  readonly section: string;
}

/** A `<!-- needs: … -->` comment not followed by a fence: a marker that marks nothing. */
export interface StrayMarker {
  readonly page: string;
  readonly line: number;
}

const markerPattern = /^<!--\s*needs:\s*(\S+)\s*-->\s*$/;

/** Every fenced block of `page` (relative to the project root), in order, and any stray marker. */
export function markdownBlocks(page: string): { blocks: MarkdownBlock[]; strayMarkers: StrayMarker[] } {
  const lines = readFileSync(join(projectRoot, page), 'utf8').split('\n');
  const blocks: MarkdownBlock[] = [];
  const strayMarkers: StrayMarker[] = [];
  let section = '';
  let open: { line: number; lang: string; needs?: string; section: string; body: string[] } | undefined;
  let marker: { value: string; line: number } | undefined;
  lines.forEach((text, i) => {
    if (open) {
      if (/^```\s*$/.test(text)) {
        blocks.push({ page, ...open, body: open.body.join('\n') });
        open = undefined;
      } else {
        open.body.push(text);
      }
      return;
    }
    const fence = /^```(\S*)/.exec(text);
    if (fence) {
      open = { line: i + 1, lang: fence[1] ?? '', needs: marker?.value, section, body: [] };
      marker = undefined;
      return;
    }
    if (marker && text.trim() !== '') {
      strayMarkers.push({ page, line: marker.line });
      marker = undefined;
    }
    const heading = /^#{1,6} (.+)$/.exec(text);
    if (heading) section = heading[1] as string;
    const m = markerPattern.exec(text.trim());
    if (m) marker = { value: m[1] as string, line: i + 1 };
  });
  if (marker) strayMarkers.push({ page, line: marker.line });
  return { blocks, strayMarkers };
}

/** The command blocks (`bash`) a reader pastes. */
export const isCommandBlock = (b: MarkdownBlock): boolean => b.lang === 'bash';
