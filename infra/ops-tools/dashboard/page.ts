import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { topology } from '../../../functions/topology';
import { countersOf } from '../../../shared/consumers/define-consumer';
import { uuidPattern } from '../../../shared/ids';
import { consumerNames, routingTable } from '../trace-view';

/** How often the page reads the ops API again. */
export const dashboardRefreshMs = 2_000;

/**
 * The page's files (this folder: index.html, app.js, style.css), read once when this
 * module loads, so a missing or broken file stops the runtime at start rather than at the first
 * request.
 */
function readPart(name: string): string {
  return readFileSync(new URL(`./${name}`, import.meta.url), 'utf8');
}

/**
 * `text` inlined in `<tag>…</tag>`. The HTML parser ends a script or style element at the first
 * `</tag`, so such a text would end the element early and the rest would be parsed as markup.
 */
function inlineable(text: string, tag: 'script' | 'style', file: string): string {
  if (text.toLowerCase().includes(`</${tag}`)) {
    throw new Error(
      `infra/ops-tools/dashboard/${file} contains "</${tag}": it cannot be inlined in the page`,
    );
  }
  return text;
}

/** The CSP source that allows exactly this inline text. */
const hash = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

/**
 * index.html with each slot (an empty element, which Biome parses as well as the page does)
 * replaced by its filled form. Each slot must be there exactly once: a page that lost its
 * policy or its script fails at start. split/join, so a `$&` in the script stays as written.
 */
function fillSlots(template: string, slots: readonly (readonly [slot: string, filled: string])[]): string {
  return slots.reduce((page, [slot, filled]) => {
    const parts = page.split(slot);
    if (parts.length !== 2)
      throw new Error(
        `infra/ops-tools/dashboard/index.html must hold ${slot} once, not ${parts.length - 1} times`,
      );
    return parts.join(filled);
  }, template);
}

const script = inlineable(readPart('app.js'), 'script', 'app.js');
const style = inlineable(readPart('style.css'), 'style', 'style.css');

/**
 * The page's Content-Security-Policy: only its own inline script and style run (by hash), and it
 * fetches from this origin only, so nothing else runs, loads or connects anywhere, even if some
 * value were ever rendered as markup. Style attributes match no hash, so the page sets none.
 * A `<meta>` CSP cannot say `frame-ancestors`; a header sending this policy may add it.
 */
export const dashboardContentSecurityPolicy = [
  "default-src 'none'",
  `script-src ${hash(script)}`,
  `style-src ${hash(style)}`,
  "connect-src 'self'",
  'img-src data:',
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

// JSON inside <script type="application/json">: `<` escaped so no value can close the element.
// The UUID pattern travels as source and flags: the page's script cannot import shared/ids.ts.
// The effect counters' labels travel too, as their consumers declare them.
const config = JSON.stringify({
  consumers: consumerNames,
  effectLabels: Object.fromEntries(countersOf(topology.registry).map((c) => [c.name, c.spec.label])),
  routes: routingTable(),
  refreshMs: dashboardRefreshMs,
  uuidPattern: { source: uuidPattern.source, flags: uuidPattern.flags },
}).replace(/</g, '\\u003c');

const page = fillSlots(readPart('index.html'), [
  [
    '<meta http-equiv="Content-Security-Policy">',
    `<meta http-equiv="Content-Security-Policy" content="${dashboardContentSecurityPolicy}">`,
  ],
  ['<style></style>', `<style>${style}</style>`],
  [
    '<script type="application/json" id="config"></script>',
    `<script type="application/json" id="config">${config}</script>`,
  ],
  ['<script type="module"></script>', `<script type="module">${script}</script>`],
]);

/**
 * The local dashboard (`GET /`): one self-contained page that reads the ops API every 2 s and
 * shows what `GET /ops/status` does with a chart of its last minutes, the dead lists with
 * redrive buttons, the latest events and one task's trace.
 */
export function dashboardHtml(): string {
  return page;
}
