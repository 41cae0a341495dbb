import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { open, rename, rm, statfs } from 'node:fs/promises';

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

/** Incompressible filler for {@link probeWrite}, made once: a filesystem that compresses (btrfs, ZFS) must really find the room. */
let probeFiller: Buffer | undefined;

/**
 * Writes `bytes` bytes to `path`, fsyncs them and removes the file again: the filesystem took a
 * write of that size just now (its room, and its ability to write at all). Removed on failure too.
 */
export async function probeWrite(path: string, bytes: number): Promise<void> {
  probeFiller ??= randomBytes(1 << 20);
  try {
    const file = await open(path, 'w');
    try {
      for (let left = bytes; left > 0; left -= probeFiller.length)
        await file.write(probeFiller, 0, Math.min(left, probeFiller.length));
      await file.sync();
    } finally {
      await file.close();
    }
  } finally {
    await rm(path, { force: true });
  }
}

/** Bytes free for this process on the filesystem of `dir` (statfs), or undefined when it cannot tell. */
export async function freeBytes(dir: string): Promise<number | undefined> {
  try {
    const s = await statfs(dir);
    return s.bavail * s.bsize;
  } catch {
    return undefined;
  }
}
