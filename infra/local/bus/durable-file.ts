import { closeSync, fsyncSync, openSync, renameSync, writeFileSync } from 'node:fs';

/**
 * Replaces a JSON-lines file with `lines` so that a crash leaves either the old file or the
 * whole new one: written to a temporary file, fsync'ed, then renamed over the old.
 */
export function replaceDurably(path: string, lines: readonly string[]): void {
  const tmp = `${path}.tmp`;
  const fd = openSync(tmp, 'w');
  try {
    writeFileSync(fd, lines.map((l) => `${l}\n`).join(''));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}
