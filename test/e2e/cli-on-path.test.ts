import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { tempDataDir } from '../support/pipeline-client';

// `pipeline` typed by name, as the README tells a user to set it up: `export PATH="$PWD/bin:$PATH"`
// once in the clone's root (bin/pipeline is a symlink to bin/pipeline.mjs), or `npm link`, whose
// global bin is a symlink to package.json's "bin" through a symlink to the clone. Node resolves
// the symlinks of its main module, so each runs bin/pipeline.mjs as ESM from any directory.

const root = fileURLToPath(new URL('../..', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: Record<string, string> };

let runtime: Runtime;
let dataDir: string;
/** A directory outside the clone: a user's cwd, and the prefixes the symlink chains live under. */
let elsewhere: string;

beforeAll(async () => {
  dataDir = tempDataDir('pipeline-on-path-');
  elsewhere = tempDataDir('pipeline-elsewhere-');
  runtime = await startRuntime({ dataDir, port: 0, caller: 'local:path-user' });
}, 240_000);

afterAll(async () => {
  await runtime?.stop();
  for (const dir of [dataDir, elsewhere]) if (dir) rmSync(dir, { recursive: true, force: true });
});

/** `script` in bash from `cwd`, with PORT naming the runtime as `PORT=… npm start` would. */
function bash(script: string, cwd: string) {
  const port = new URL(runtime.url).port;
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      'bash',
      ['-e', '-o', 'pipefail', '-c', script],
      { cwd, env: { ...process.env, PORT: port, NO_COLOR: '1' }, timeout: 120_000 },
      (error, stdout, stderr) =>
        resolve({
          code: error ? Number(error.code ?? -1) : 0,
          stdout: String(stdout),
          stderr: String(stderr),
        }),
    );
  });
}

describe('pipeline on PATH', () => {
  it('export PATH="$PWD/bin:$PATH" in the clone: `pipeline status` is bin/pipeline, the status of the runtime', async () => {
    const r = await bash('export PATH="$PWD/bin:$PATH"\ncommand -v pipeline\npipeline status', root);

    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const [found, ...status] = r.stdout.split('\n');
    expect(found).toBe(join(root, 'bin', 'pipeline'));
    expect(status.join('\n')).toMatch(/^tasks\s+pending_review 0\s+approved 0/m);
    expect(status.join('\n')).toMatch(/^alarms\s+/m);
  });

  it('answers from any other working directory once PATH is set', async () => {
    const r = await bash(`export PATH="$PWD/bin:$PATH"\ncd '${elsewhere}'\npipeline status -o json`, root);

    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ tasks: { pending_review: 0 }, outbox: { dead: 0 } });
  });

  it.each([
    // What `npm link` makes: <prefix>/bin/pipeline -> ../lib/node_modules/<name>/<"bin" of package.json>,
    // and <prefix>/lib/node_modules/<name> -> the clone.
    ['npm link', `../lib/node_modules/content-pipeline/${pkg.bin.pipeline}`],
    // A user's own ~/bin/pipeline -> the clone's bin/pipeline -> pipeline.mjs.
    ['a link to bin/pipeline', join(root, 'bin', 'pipeline')],
  ])('answers through a chain of symlinks as %s makes', async (name, target) => {
    const prefix = join(elsewhere, name.replaceAll(' ', '-'));
    mkdirSync(join(prefix, 'bin'), { recursive: true });
    mkdirSync(join(prefix, 'lib', 'node_modules'), { recursive: true });
    symlinkSync(root, join(prefix, 'lib', 'node_modules', 'content-pipeline'));
    symlinkSync(target, join(prefix, 'bin', 'pipeline'));

    const r = await bash(`export PATH='${prefix}/bin':"$PATH"\npipeline status -o json`, elsewhere);

    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ tasks: { pending_review: 0 } });
  });
});
