#!/usr/bin/env node
// `npx pipeline …`: the ops CLI. Plain JS so it runs straight after `npm ci` with no build step;
// tsx (a dependency of the project) loads the TypeScript the CLI is written in.
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

// The project's tsconfig wherever the command is run from.
register({ tsconfig: fileURLToPath(new URL('../tsconfig.json', import.meta.url)) });
const { runCli } = await import(new URL('../infra/local/cli.ts', import.meta.url).href);

// `pipeline … | head` closes the pipe early; that is not an error worth a stack trace.
process.stdout.on('error', (err) => {
  if (err.code !== 'EPIPE') throw err;
});

process.exitCode = await runCli(process.argv.slice(2), {
  fetch: globalThis.fetch,
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
});
