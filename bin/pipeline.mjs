#!/usr/bin/env node
// `pipeline …`: the ops CLI. Typed by name through bin/pipeline (a symlink to this file: with
// `export PATH="$PWD/bin:$PATH"` in the clone), `npm link` (package.json's "bin") or `npx pipeline`;
// node resolves the symlinks to this .mjs, so it runs as ESM from any directory. It runs
// dist/cli.mjs, the JavaScript `npm ci` built from infra/ops-tools/cli/cli.ts (the `prepare`
// script). A source newer than the build (an edit, a checkout, a move: dist/cli.meta.json names
// each file it was built from) is built again first, in about a quarter of a second; every other
// run compiles nothing.
import { readFileSync, statSync } from 'node:fs';

const root = new URL('../', import.meta.url);

/** Whether every file the bundle was built from is still as it was (size and time). */
function fresh() {
  try {
    const { inputs } = JSON.parse(readFileSync(new URL('dist/cli.meta.json', root), 'utf8'));
    return inputs.every(([path, mtimeMs, size]) => {
      const s = statSync(new URL(path, root));
      return s.mtimeMs === mtimeMs && s.size === size;
    });
  } catch {
    return false;
  }
}

if (!fresh()) await (await import('../infra/ops-tools/cli/build-cli.mjs')).buildCli();

// `pipeline … | head` closes the pipe early; that is not an error worth a stack trace.
process.stdout.on('error', (err) => {
  if (err.code !== 'EPIPE') throw err;
});

const { runCli, nodeHttpFetch } = await import(new URL('dist/cli.mjs', root).href);
process.exitCode = await runCli(process.argv.slice(2), {
  fetch: nodeHttpFetch,
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
});
