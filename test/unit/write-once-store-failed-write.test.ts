import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';

/** While set, a write of a temporary file lands part-way and then fails as a full disk does. */
let diskFull = false;

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>();
  return {
    ...real,
    writeFile: async (...args: Parameters<typeof real.writeFile>) => {
      const [path, data] = args;
      if (diskFull && String(path).endsWith('.tmp')) {
        await real.writeFile(path, String(data).slice(0, 10));
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      }
      return real.writeFile(...args);
    },
  };
});

const { FileWriteOnceStore } = await import('../../infra/local/consumer-resources/file-write-once-store');

const dirs: string[] = [];
afterEach(() => {
  diskFull = false;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('the local write-once store (a bucket) on a full disk', () => {
  it('fails the put and leaves no temporary file, then writes the object once there is room', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'archive-full-'));
    dirs.push(dir);
    const store = new FileWriteOnceStore(join(dir, 'archive'));
    diskFull = true;

    await expect(store.put('t/1/e.json', '{"a":"snapshot body"}')).rejects.toThrow(/ENOSPC/);
    const afterFailure = readdirSync(join(dir, 'archive', 't', '1'));
    diskFull = false;
    const outcome = await store.put('t/1/e.json', '{"a":"snapshot body"}');

    expect(afterFailure).toEqual([]);
    expect(outcome).toBe('written');
    expect(readdirSync(join(dir, 'archive', 't', '1'))).toEqual(['e.json']);
  });
});
