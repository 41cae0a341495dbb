import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';

/**
 * Replaces a JSON-lines file with `lines` so that a crash leaves either the old file or the
 * whole new one: written to a temporary file, fsync'ed, then renamed over the old. A failed
 * write (a full disk) leaves the old file and no temporary one.
 */
export function replaceDurably(path: string, lines: Iterable<string>): void {
  const tmp = `${path}.tmp`;
  try {
    const fd = openSync(tmp, 'w');
    try {
      let text = '';
      for (const line of lines) text += `${line}\n`;
      writeFileSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

/** How much text {@link replaceDurablyAsync} gathers before it writes: a few hundred lines. */
const chunkChars = 1 << 20;

/**
 * {@link replaceDurably} off the event loop, writing `lines` a chunk at a time, so a file of
 * any size is never one string in memory. A failed write (a full disk) leaves the old file and
 * no temporary one.
 */
export async function replaceDurablyAsync(path: string, lines: Iterable<string>): Promise<void> {
  const tmp = `${path}.tmp`;
  try {
    const file = await open(tmp, 'w');
    try {
      let text = '';
      for (const line of lines) {
        text += `${line}\n`;
        if (text.length >= chunkChars) {
          await file.writeFile(text);
          text = '';
        }
      }
      if (text) await file.writeFile(text);
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}
