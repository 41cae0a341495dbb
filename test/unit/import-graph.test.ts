import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The import graph is checked by Biome, the project's linter, with two rules biome.json turns on:
// `suspicious/noImportCycles` with `ignoreTypes: false` (an `import type` loop still ties the
// modules together, and the migrations' loop was one), and `style/noRestrictedImports` with a
// pattern that lets only the migration list import a migration and, for the files of `shared/`
// (an override), one that keeps the core from importing the application in `functions/`.
// https://biomejs.dev/linter/rules/no-import-cycles/
// https://biomejs.dev/linter/rules/no-restricted-imports/
// No dedicated cycle finder (madge, dependency-cruiser, dpdm) is a dependency, and the installed
// TypeScript (7) offers its compiler API only as an unstable preview; Biome's scanner already
// builds the project's module graph, so these tests ask it rather than keep a second resolver, and
// `npx biome check .` reports the same diagnostics while editing. Each cycle is read back from
// the chain Biome prints ("resolves to … which imports …").

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const biome = join(root, 'node_modules/.bin/biome');
const sourceFolders = ['shared', 'functions', 'infra', 'bin', 'bench', 'test', 'types'];
const migrationRule = /only its list, shared\/db\/migrations\/index\.ts, imports it/;
const coreRule = /shared\/ is the core: it takes the pipeline as a value/;

interface ImportFindings {
  /** Each import cycle once, as the files along it from its first file (by name). */
  readonly cycles: string[];
  /** Each import of a migration outside the list: `file:line imports 'specifier'`. */
  readonly migrationImports: string[];
  /** Each import of the application (`functions/`) by the core (`shared/`). */
  readonly appImports: string[];
}

/** Lints `paths` under `cwd` and collects the import cycles and the migrations imported. */
function importFindings(cwd: string, paths: readonly string[]): ImportFindings {
  const run = spawnSync(biome, ['lint', '--colors=off', '--max-diagnostics=none', ...paths], {
    cwd,
    encoding: 'utf8',
  });
  const output = `${run.stdout}\n${run.stderr}`;
  // A broken configuration or a crash prints no diagnostics: that must not read as a clean graph.
  if (!/Checked \d+ files? in/.test(output)) throw new Error(`biome did not lint:\n${output}`);

  const cycles = new Map<string, string>();
  const migrationImports: string[] = [];
  const appImports: string[] = [];
  const header = /^(\S+):(\d+):\d+ (lint\/[A-Za-z]+\/[A-Za-z]+).*$/gm;
  const found = [...output.matchAll(header)];
  found.forEach((match, i) => {
    const [, file, line, category] = match as unknown as [string, string, string, string];
    const body = output.slice(
      (match.index as number) + match[0].length,
      found[i + 1]?.index ?? output.length,
    );
    if (category === 'lint/suspicious/noImportCycles') {
      // From the import's target round to the importing file itself.
      const chain = [...body.matchAll(/(?:resolves to|which imports) (\S+)/g)].map((m) => m[1] as string);
      if (chain.at(-1) !== file) throw new Error(`unexpected cycle report for ${file}:\n${body}`);
      const first = chain.indexOf([...chain].sort()[0] as string);
      const cycle = [...chain.slice(first), ...chain.slice(0, first), chain[first]].join(' -> ');
      cycles.set(cycle, cycle);
    } else if (category === 'lint/style/noRestrictedImports') {
      const specifier = /^\s*> \d+ │.*?from '([^']+)'/m.exec(body)?.[1] ?? '?';
      if (migrationRule.test(body)) migrationImports.push(`${file}:${line} imports '${specifier}'`);
      if (coreRule.test(body)) appImports.push(`${file}:${line} imports '${specifier}'`);
    }
  });
  return { cycles: [...cycles.values()].sort(), migrationImports, appImports };
}

describe('the import graph', () => {
  let findings: ImportFindings;
  beforeAll(() => {
    findings = importFindings(root, sourceFolders);
  });

  it('has no cycles among the project’s modules', () => {
    const { cycles } = findings;

    expect(cycles, `import cycles:\n${cycles.join('\n')}`).toEqual([]);
  });

  it('lets no module but the migration list import a migration', () => {
    const { migrationImports } = findings;

    expect(migrationImports, `migrations imported:\n${migrationImports.join('\n')}`).toEqual([]);
  });

  it('keeps the core (shared/) from importing the application (functions/)', () => {
    const { appImports } = findings;

    expect(appImports, `the core imports the application:\n${appImports.join('\n')}`).toEqual([]);
  });
});

describe('the import rules', () => {
  const fixture = mkdtempSync(join(tmpdir(), 'import-graph-'));
  afterAll(() => rmSync(fixture, { recursive: true, force: true }));

  it('catch a loop closed by a type-only import, a migration imported outside the list, and the core importing the application', () => {
    const config = JSON.parse(readFileSync(join(root, 'biome.json'), 'utf8'));
    const files: Record<string, string> = {
      'biome.json': JSON.stringify({ ...config, vcs: { enabled: false } }),
      'tsconfig.json': readFileSync(join(root, 'tsconfig.json'), 'utf8'),
      'shared/db/migrations/index.ts':
        "import { migration0001 } from './0001-first';\nimport { migration0002 } from './0002-second';\n\nexport const migrations = [migration0001, migration0002];\n",
      'shared/db/migrations/0001-first.ts':
        "import type { migrations } from './index';\n\nexport const migration0001 = { version: 1 };\nexport type All = typeof migrations;\n",
      'shared/db/migrations/0002-second.ts':
        "import { migration0001 } from './0001-first';\n\nexport const migration0002 = { version: migration0001.version + 1 };\n",
      'shared/db/roles.ts':
        "import { migration0001 } from './migrations/0001-first';\n\nexport const first = migration0001.version;\n",
      'shared/db/migrate.ts':
        "import { migrations } from './migrations/index';\n\nexport const count = migrations.length;\n",
      'functions/topology.ts':
        "import { count } from '../shared/db/migrate';\n\nexport const topology = { count };\n",
      'shared/ops/status.ts':
        "import { topology } from '../../functions/topology';\n\nexport const status = topology.count;\n",
      'shared/ops/status-type.ts':
        "import type { topology } from '../../functions/topology';\n\nexport type Status = typeof topology;\n",
    };
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(fixture, path)), { recursive: true });
      writeFileSync(join(fixture, path), text);
    }

    const findings = importFindings(fixture, ['shared', 'functions']);

    expect(findings).toEqual({
      cycles: [
        'shared/db/migrations/0001-first.ts -> shared/db/migrations/index.ts -> shared/db/migrations/0001-first.ts',
        'shared/db/migrations/0001-first.ts -> shared/db/migrations/index.ts -> shared/db/migrations/0002-second.ts -> shared/db/migrations/0001-first.ts',
      ],
      migrationImports: [
        "shared/db/migrations/0002-second.ts:1 imports './0001-first'",
        "shared/db/roles.ts:1 imports './migrations/0001-first'",
      ],
      // functions/ may import the core; the core may not import functions/, not even a type.
      appImports: [
        "shared/ops/status-type.ts:1 imports '../../functions/topology'",
        "shared/ops/status.ts:1 imports '../../functions/topology'",
      ],
    });
  });
});
