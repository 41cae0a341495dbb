import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmdirSync, rmSync, statfsSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Mounts a tmpfs of `bytes` at `dir` (an existing, empty directory), owner-only; returns its unmount. */
export function mountTmpfs(dir: string, bytes: number): () => void {
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${bytes},mode=0700`, 'tmpfs', dir], { stdio: 'pipe' });
  return () => {
    try {
      execFileSync('umount', [dir], { stdio: 'pipe' });
    } catch {
      // Something still holds a file there (a runtime that did not stop): detach it anyway.
      execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
    }
  };
}

/**
 * Why a test that needs a real small filesystem cannot have one here, or undefined when it
 * can: mounting a tmpfs needs root (or CAP_SYS_ADMIN) and a kernel that lets this process mount.
 * Tried once on a throwaway directory.
 */
export function tmpfsUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'mounting a tmpfs needs root, and this process is not root';
  const dir = mkdtempSync(join(tmpdir(), 'tmpfs-probe-'));
  try {
    mountTmpfs(dir, 1 << 20)();
    return undefined;
  } catch (err) {
    const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
    return `mount -t tmpfs failed: ${stderr || String(err)}`;
  } finally {
    rmdirSync(dir);
  }
}

/** Bytes a filesystem has free for this process. */
export function freeBytes(dir: string): number {
  const s = statfsSync(dir);
  return s.bavail * s.bsize;
}

/**
 * Fills the filesystem of `dir` with a file `name` until at most `leaveBytes` are free (as
 * statfs counts them: whole blocks). Returns its path; removing it frees the space again.
 */
export function fillLeaving(dir: string, leaveBytes: number, name = 'filler'): string {
  const path = join(dir, name);
  const fd = openSync(path, 'w');
  try {
    const chunk = Buffer.alloc(64 * 1024, 0x78);
    for (let free = freeBytes(dir); free > leaveBytes; free = freeBytes(dir)) {
      const n = Math.min(chunk.length, free - leaveBytes);
      try {
        writeSync(fd, chunk, 0, n);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
        throw err;
      }
    }
  } catch (err) {
    closeSync(fd);
    rmSync(path, { force: true });
    throw err;
  }
  closeSync(fd);
  return path;
}
