import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The operator's tools (infra/ops-tools/: the CLI and the dashboard) target a deployed stack as
// much as the local runtime, so they must not need the emulator (infra/local/) to load. This
// reads their sources and every file they import, transitively, and names each path that reaches
// infra/local/.

const root = fileURLToPath(new URL('../../', import.meta.url));
const tools = join(root, 'infra/ops-tools');
const emulator = join(root, 'infra/local');
/** bin/pipeline.mjs runs the CLI (and its build): it belongs to the tools' import graph too. */
const entries = [join(root, 'bin/pipeline.mjs')];
const code = /\.(ts|mts|js|mjs)$/;

/** The specifiers of `source`'s imports: `import … from`, `export … from`, `import '…'` and `import('…')`. */
function importSpecifiers(source: string): string[] {
  const forms = [
    /\bfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*['"]([^'"]+)['"]/g,
    /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  return forms.flatMap((form) => [...source.matchAll(form)].map((m) => m[1] ?? ''));
}

/** The file a relative specifier names, as the bundler resolution of tsconfig.json finds it. */
function resolveRelative(from: string, specifier: string): string | undefined {
  const base = resolve(dirname(from), specifier);
  const candidates = [
    base,
    ...['.ts', '.mts', '.js', '.mjs'].map((ext) => base + ext),
    base.replace(/\.m?js$/, (ext) => (ext === '.mjs' ? '.mts' : '.ts')),
    join(base, 'index.ts'),
  ];
  return candidates.find((path) => {
    try {
      return statSync(path).isFile();
    } catch {
      return false;
    }
  });
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)],
  );
}

const inside = (dir: string, path: string) => !relative(dir, path).startsWith('..');

/** Every file the tools reach, with the path of imports that first reached it. */
function walk(): { reached: Map<string, string[]>; problems: string[] } {
  const starts = [...filesUnder(tools), ...entries];
  const reached = new Map(starts.map((file) => [file, [relative(root, file)]]));
  const queue = [...starts];
  const problems: string[] = [];
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
    if (!code.test(file)) continue; // index.html, style.css, tsconfig.json: read, nothing to follow
    const via = reached.get(file) ?? [];
    for (const specifier of importSpecifiers(readFileSync(file, 'utf8'))) {
      if (!specifier.startsWith('.')) continue; // node: built-ins and packages
      const target = resolveRelative(file, specifier);
      if (target === undefined) {
        problems.push(`${via.join(' -> ')} imports '${specifier}', which names no file`);
        continue;
      }
      const path = [...via, relative(root, target)];
      if (inside(emulator, target)) problems.push(`${path.join(' -> ')} (the emulator)`);
      else if (!reached.has(target)) {
        reached.set(target, path);
        queue.push(target);
      }
    }
  }
  return { reached, problems };
}

describe("the operator's tools", () => {
  it('import nothing from the emulator (infra/local/), directly or through another file', () => {
    const { problems } = walk();

    expect(problems).toEqual([]);
  });

  it('are followed through their whole import graph, so the check above sees what they load', () => {
    const reached = [...walk().reached.keys()].map((file) => relative(root, file));

    for (const file of [
      'infra/ops-tools/cli/cli.ts',
      'infra/ops-tools/cli/build-cli.mjs',
      'infra/ops-tools/dashboard/page.ts',
      'infra/ops-tools/trace-view.ts', // imported by both tools
      'shared/topology.ts', // reached only through trace-view.ts
      'shared/events/event-pattern.ts',
    ]) {
      expect(reached).toContain(file);
    }
  });

  it('have every form of import read, type-only and dynamic ones included', () => {
    const source = [
      "import { a } from './a';",
      "import type { B } from '../b';",
      'import {\n  c,\n  d,\n} from "./c";',
      "export { e } from './e';",
      "import './side-effect';",
      "const f = await import('./f');",
      "const g = await import( '../g.mjs' );",
      "import { readFileSync } from 'node:fs';",
    ].join('\n');

    expect(importSpecifiers(source).sort()).toEqual(
      ['./a', '../b', './c', './e', './side-effect', './f', '../g.mjs', 'node:fs'].sort(),
    );
  });
});
