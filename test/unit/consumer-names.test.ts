import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { consumers } from '../../functions/consumers/registry';

// Issue 19's "done when": no source file outside a consumer's folder and the registry names a
// consumer. Everything else (the topology, both runtimes, the ops tools, the models, the
// benchmarks) reads the registry, so a consumer added or taken away is one folder and one line.

const root = join(import.meta.dirname, '../..');
const sourceDirs = ['shared', 'infra', 'functions', 'bench', 'bin', 'scripts'];
const sourceFile = /\.(ts|tsx|mts|mjs|js)$/;

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && sourceFile.test(e.name) && !e.parentPath.includes('node_modules'))
    .map((e) => relative(root, join(e.parentPath, e.name)));
}

const ownedBy = (file: string) => consumers.find((c) => file.startsWith(`functions/consumers/${c.name}/`));
const asPattern = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** What would name consumer `c` in code or prose: its name quoted, "<name> consumer", its counters. */
function namings(c: (typeof consumers)[number]): RegExp[] {
  const name = asPattern(c.name);
  return [
    new RegExp(`(['"\`])${name}\\1`),
    new RegExp(`\\b${name} consumer\\b`, 'i'),
    ...Object.keys(c.counters).map((counter) => new RegExp(`\\b${asPattern(counter)}\\b`)),
  ];
}

describe('consumer names', () => {
  const files = sourceDirs.flatMap(sources).filter((f) => f !== 'functions/consumers/registry.ts');

  it('finds the sources it checks (the scan itself works)', () => {
    expect(files).toContain('shared/topology.ts');
    expect(files).toContain('infra/aws/content-pipeline.ts');
    // A folder's own files name their consumer, which is what this test would catch elsewhere.
    const own = sources('functions/consumers').filter((f) => ownedBy(f));
    expect(own.length).toBeGreaterThanOrEqual(consumers.length * 3);
    for (const f of own) {
      const c = ownedBy(f);
      if (c && f.endsWith('/consumer.ts'))
        expect(namings(c).some((re) => re.test(readFileSync(join(root, f), 'utf8')))).toBe(true);
    }
  });

  it('appear only in each consumer’s own folder and the registry', () => {
    const found: string[] = [];
    for (const file of files) {
      const text = readFileSync(join(root, file), 'utf8');
      for (const c of consumers) {
        if (ownedBy(file) === c) continue;
        for (const re of namings(c)) {
          const line = text.split('\n').findIndex((l) => re.test(l));
          if (line >= 0) found.push(`${file}:${line + 1} names ${c.name} (${re.source})`);
        }
      }
    }
    expect(found).toEqual([]);
  });
});
