import { randomUUID } from 'node:crypto';
import { link, readdir, unlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { PutOutcome, WriteOnceStore } from '../../../shared/consumers/resources';
import { ensureDirectory } from './ensure-directory';

/**
 * A bucket resource as files under `root/<key>` (the local runtime's stand-in for S3). Written
 * to a temporary file, then hard-linked into place: the link fails if the file exists, so the
 * first complete write wins and a crash never leaves a half-written object under the real
 * name; a write that fails leaves no temporary file either.
 */
export class FileWriteOnceStore implements WriteOnceStore {
  constructor(readonly root: string) {}

  async put(key: string, body: string): Promise<PutOutcome> {
    if (key.split('/').some((part) => part === '..' || part === ''))
      throw new Error(`invalid object key ${key}`);
    const path = join(this.root, key);
    await ensureDirectory(dirname(path));
    const temp = `${path}.${randomUUID()}.tmp`;
    try {
      // Inside the try: a write that fails part-way (a full disk) leaves no temporary file.
      await writeFile(temp, body);
      await link(temp, path);
      return 'written';
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return 'exists';
      throw err;
    } finally {
      await unlink(temp).catch(() => undefined);
    }
  }

  /** The objects stored (a listing: its cost grows with history, for tests and the recount only). */
  async count(): Promise<number> {
    const entries = await readdir(this.root, { recursive: true, withFileTypes: true }).catch(() => []);
    return entries.filter((e) => e.isFile() && !e.name.endsWith('.tmp')).length;
  }
}
