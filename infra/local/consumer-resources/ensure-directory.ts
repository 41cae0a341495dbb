import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * Makes `path` a directory, with its missing parents, and fails with the error that stopped it.
 *
 * `mkdir(path, { recursive: true })` reports ENOENT when a missing parent cannot be made: on a
 * file system mounted read-only the archive's first write failed with "ENOENT: no such file or
 * directory, mkdir .../effects/archive" rather than EROFS, and a missing file is a failure no
 * retry mends (the inbox judges by the code: shared/inbox/failure-kind.ts). On ENOENT this makes
 * each missing directory itself, from the nearest one that exists, so the refusal that reaches
 * the caller is the real one (EROFS, ENOSPC, EACCES, ...).
 */
export async function ensureDirectory(path: string): Promise<void> {
  try {
    await mkdir(path, { recursive: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    await mkdirEach(path);
  }
}

async function mkdirEach(path: string): Promise<void> {
  try {
    await mkdir(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return;
    const parent = dirname(path);
    if (code !== 'ENOENT' || parent === path) throw err;
    await mkdirEach(parent);
    await mkdir(path).catch((again: NodeJS.ErrnoException) => {
      if (again.code !== 'EEXIST') throw again;
    });
  }
}
