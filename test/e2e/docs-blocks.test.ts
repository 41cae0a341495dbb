import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import {
  documentationPages,
  isCommandBlock,
  type MarkdownBlock,
  markdownBlocks,
  projectRoot,
} from '../support/markdown-blocks';
import { tempDataDir } from '../support/pipeline-client';

// Every command block of README.md and docs/*.md that no `<!-- needs: … -->` marker excuses,
// pasted into bash as a reader would, page by page in the order the page shows them (a later
// block may use what an earlier one set), from the clone's root, against a started runtime. The
// one change: the runtime listens on a free port, not 3000 (other runs share this machine), so
// `http://127.0.0.1:3000` becomes its URL and PORT its port, as `PORT=… npm start` would be.

let runtime: Runtime;
let dir: string;

beforeAll(async () => {
  dir = tempDataDir('pipeline-docs-');
  runtime = await startRuntime({ dataDir: dir, port: 0, caller: 'local:docs-reader' });
}, 240_000);

afterAll(async () => {
  await runtime?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function bash(script: string, port: string) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      'bash',
      ['-e', '-o', 'pipefail', '-c', script],
      { cwd: projectRoot, env: { ...process.env, PORT: port, NO_COLOR: '1' }, timeout: 240_000 },
      (error, stdout, stderr) =>
        resolve({
          code: error ? Number(error.code ?? -1) : 0,
          stdout: String(stdout),
          stderr: String(stderr),
        }),
    );
  });
}

const runnable = documentationPages
  .map((page) => ({
    page,
    blocks: markdownBlocks(page).blocks.filter((b) => isCommandBlock(b) && b.needs === undefined),
  }))
  .filter((p) => p.blocks.length > 0);

/** Each block echoes where it starts, so a failure names the block that failed. */
const script = (blocks: readonly MarkdownBlock[], url: string) =>
  blocks
    .map((b) => `echo '>>> ${b.page}:${b.line}' >&2\n${b.body.replaceAll('http://127.0.0.1:3000', url)}`)
    .join('\n');

describe('the command blocks of the documentation', () => {
  it('include the README and the operations guide', () => {
    expect(runnable.map((p) => p.page)).toEqual(expect.arrayContaining(['README.md', 'docs/operations.md']));
  });

  it.each(runnable)(
    'of $page run as written',
    async ({ blocks }) => {
      const r = await bash(script(blocks, runtime.url), new URL(runtime.url).port);
      const failedAt = [...r.stderr.matchAll(/^>>> (\S+)$/gm)].at(-1)?.[1];
      expect(r.code, `failed in the block at ${failedAt}:\n${r.stderr.slice(-2000)}`).toBe(0);
      expect(r.stderr).not.toMatch(/^pipeline: /m);
    },
    300_000,
  );
});
