import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { tempDataDir } from '../support/pipeline-client';

// The README's Quick start, pasted into bash as a reader would, against a started runtime: every
// bash block of the section after the first (`npm ci`, `npm start`, `npm test`: the set-up this
// test stands in for). The one change: the runtime listens on a free port, not 3000 (other runs
// share this machine), so the blocks' `http://127.0.0.1:3000` becomes its URL and PORT its port.

const root = fileURLToPath(new URL('../..', import.meta.url));
const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

/** The fenced bash blocks of the README section under `heading`. */
function bashBlocks(markdown: string, heading: string): string[] {
  const start = markdown.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`README.md has no "## ${heading}" section`);
  const end = markdown.indexOf('\n## ', start + 1);
  const section = markdown.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/^```bash\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string);
}

let runtime: Runtime;
let dir: string;

beforeAll(async () => {
  dir = tempDataDir('pipeline-readme-');
  runtime = await startRuntime({ dataDir: dir, port: 0, caller: 'local:readme-reader' });
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
      { cwd: root, env: { ...process.env, PORT: port, NO_COLOR: '1' }, timeout: 240_000 },
      (error, stdout, stderr) =>
        resolve({
          code: error ? Number(error.code ?? -1) : 0,
          stdout: String(stdout),
          stderr: String(stderr),
        }),
    );
  });
}

describe("the README's Quick start", () => {
  it('has the set-up block, then the blocks a reader pastes with `npm start` running', () => {
    const blocks = bashBlocks(readme, 'Quick start');
    expect(blocks[0]).toMatch(/^npm ci\b/m);
    expect(blocks.length).toBeGreaterThan(1);
    // Nothing left to fill in by hand: `<id>` would be a shell redirect.
    for (const block of blocks.slice(1)) expect(block).not.toMatch(/<[a-zA-Z]+>(?![^#]*#)/);
  });

  it('runs as written: the task is created, approved and shown, and every JSON answer ends its line', async () => {
    const port = new URL(runtime.url).port;
    const script = bashBlocks(readme, 'Quick start')
      .slice(1)
      .join('\n')
      .replaceAll('http://127.0.0.1:3000', runtime.url);

    const r = await bash(script, port);

    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    // The curl approve answer, then /ops/status, each on lines of their own.
    expect(r.stdout).toMatch(
      /^\{"taskId":"[0-9a-f-]{36}","status":"approved","version":2,"eventId":"[0-9a-f-]{36}"\}$/m,
    );
    expect(r.stdout).not.toContain('}{');
    expect(r.stdout).toMatch(/^approved task [0-9a-f-]{36} \(version 2, event [0-9a-f-]{36}\)$/m);
    expect(r.stdout).toContain('title     Spring launch post');
    expect(r.stdout).toMatch(/^tasks\s+pending_review 0\s+approved 2/m);
  }, 300_000);
});
