// Builds the ops CLI (infra/ops-tools/cli/cli.ts and what it imports from this repository) into
// one JavaScript file, dist/cli.mjs, so `npx pipeline` runs without compiling TypeScript: tsx
// took 1.5 to 2 s of every run. npm runs it as the root package's `prepare` script on `npm ci`;
// bin/pipeline.mjs runs it again when a source file changed since (a checkout, an edit).
// Plain JavaScript: it must run before anything is built.
import { mkdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../../', import.meta.url));
/** The built CLI and the record of what it was built from. */
export const cliBundle = new URL('../../../dist/cli.mjs', import.meta.url);
export const cliBundleMeta = new URL('../../../dist/cli.meta.json', import.meta.url);

/**
 * Bundles the CLI; packages stay imports of node_modules (`packages: 'external'`), so the AWS
 * SDK the CLI imports dynamically is loaded only by the commands that use it. Writes through a
 * temporary file and a rename: two runs building at once never leave half a file.
 */
export async function buildCli() {
  const { build } = await import('esbuild');
  const result = await build({
    absWorkingDir: root,
    entryPoints: ['infra/ops-tools/cli/cli.ts'],
    outfile: 'dist/cli.mjs',
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    tsconfig: 'tsconfig.json',
    metafile: true,
    write: false,
    logLevel: 'error',
    banner: {
      js: '// Built from infra/ops-tools/cli/cli.ts by infra/ops-tools/cli/build-cli.mjs: edit the source, not this file.',
    },
  });
  // Each input with its size and time, as bin/pipeline.mjs compares them before every run.
  const inputs = Object.keys(result.metafile.inputs).map((path) => {
    const s = statSync(new URL(path, `file://${root}`));
    return [path, s.mtimeMs, s.size];
  });
  mkdirSync(new URL('.', cliBundle), { recursive: true });
  const suffix = `.${process.pid}.${Date.now()}.tmp`;
  for (const [target, text] of [
    [cliBundle, result.outputFiles[0].text],
    [cliBundleMeta, `${JSON.stringify({ inputs }, null, 1)}\n`],
  ]) {
    writeFileSync(new URL(`${target.href}${suffix}`), text);
    renameSync(new URL(`${target.href}${suffix}`), target);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await buildCli();
