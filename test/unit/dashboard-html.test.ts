import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { dashboardHtml } from '../../infra/ops-tools/dashboard/page';
import { allEventTypes } from '../../shared/events/event-types';
import { uuidPattern } from '../../shared/ids';
import { subscriberNames } from '../support/topology-expectations';

// What the browser test cannot see statically: the page's own text. Rendering and escaping are
// checked in Chromium by test/e2e/dashboard-browser.test.ts.
const html = dashboardHtml();
/** The texts of the page's elements opened exactly by `open` (`<style>`, `<script type="module">`). */
const inline = (open: string) => {
  const tag = /^<(\w+)/.exec(open)?.[1] ?? '';
  return [...html.matchAll(new RegExp(`${open}([\\s\\S]*?)</${tag}>`, 'g'))].map((m) => m[1] ?? '');
};
const moduleScript = '<script type="module">';
const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]+)">/.exec(html)?.[1] ?? '';
const directive = (name: string) =>
  csp
    .split(';')
    .map((d) => d.trim())
    .find((d) => d.startsWith(`${name} `))
    ?.slice(name.length + 1);
const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

describe('the dashboard page', () => {
  it('names no URL outside its own origin', () => {
    expect(html).not.toMatch(/https?:\/\//i);
    expect(html).not.toMatch(/(src|href|action)\s*=\s*["']?\/\//i); // scheme-relative //host
    expect(html).not.toMatch(/url\(|@import/i);
    const references = [...html.matchAll(/\b(?:src|href)\s*=\s*"([^"]*)"/g)].map((m) => m[1]);
    expect(references).toEqual(['data:,']); // the empty favicon, so the browser asks for none
  });

  it('allows by Content-Security-Policy only its own inline script and style, and fetches to its origin', () => {
    const [script] = inline(moduleScript);
    const [style] = inline('<style>');

    expect(directive('default-src')).toBe("'none'");
    expect(directive('connect-src')).toBe("'self'");
    expect(directive('script-src')).toBe(sha256(script ?? ''));
    expect(directive('style-src')).toBe(sha256(style ?? ''));
    expect(inline(moduleScript)).toHaveLength(1);
    expect(html.match(/<script\b/g)).toHaveLength(2); // the code and its JSON config
  });

  it('inlines the app.js and style.css of infra/ops-tools/dashboard/ as they are', () => {
    const file = (name: string) =>
      readFileSync(new URL(`../../infra/ops-tools/dashboard/${name}`, import.meta.url), 'utf8');

    expect(inline(moduleScript)).toEqual([file('app.js')]);
    expect(inline('<style>')).toEqual([file('style.css')]);
  });

  it('never turns a string into markup or code in its script', () => {
    const [script] = inline(moduleScript);

    expect(script).not.toMatch(
      /innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/,
    );
    expect(script).toContain('createTextNode');
  });

  it("embeds the routing of each event type, the counters' labels, the 2 s refresh and the UUID pattern in a config no value can break out of", () => {
    const config = /<script type="application\/json" id="config">([^<]*)<\/script>/.exec(html)?.[1];

    expect(JSON.parse(config ?? 'null')).toEqual({
      consumers: topology.consumerNames,
      // Each counter by the label its consumer declares.
      effectLabels: Object.fromEntries(
        topology.registry.flatMap((c) =>
          Object.entries(c.counters).map(([name, counter]) => [name, counter.label]),
        ),
      ),
      // Each event type to the consumers that subscribe to it, in the registry's order.
      routes: Object.fromEntries(allEventTypes.map((type) => [type, subscriberNames(type)])),
      refreshMs: 2000,
      uuidPattern: { source: uuidPattern.source, flags: 'i' },
    });
    expect(Object.keys(JSON.parse(config ?? '{}').effectLabels).length).toBeGreaterThan(0);
  });
});
