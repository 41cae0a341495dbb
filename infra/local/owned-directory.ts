import { chmodSync, lstatSync, mkdirSync, realpathSync, type Stats } from 'node:fs';
import { basename, dirname, join, parse, resolve, sep } from 'node:path';

/** A directory that another user could write to, or that is not what its path says. */
export class UntrustedDirectoryError extends Error {}

const lstatOrUndefined = (path: string): Stats | undefined => {
  try {
    return lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
};

const me = () => process.getuid?.() ?? -1;
const octal = (mode: number) => `0${(mode & 0o7777).toString(8)}`;

/** Only this user (and root) can change what `path` holds: owner and mode, and sticky when shared. */
function assertTrustedAncestor(path: string): void {
  const stat = lstatSync(path);
  if (!stat.isDirectory()) throw new UntrustedDirectoryError(`${path} is not a directory`);
  if (stat.uid !== 0 && stat.uid !== me()) {
    throw new UntrustedDirectoryError(`${path} is owned by uid ${stat.uid}: refusing to keep files under it`);
  }
  const writableByOthers = (stat.mode & 0o022) !== 0;
  const sticky = (stat.mode & 0o1000) !== 0;
  if (writableByOthers && !sticky) {
    throw new UntrustedDirectoryError(
      `${path} (mode ${octal(stat.mode)}) is writable by other users: refusing to keep files under it`,
    );
  }
}

/** `path` is a real directory of this user's that nobody else can write to. */
export function assertOwnedDirectory(path: string, stat: Stats = lstatSync(path)): void {
  if (stat.isSymbolicLink()) {
    throw new UntrustedDirectoryError(`${path} is a symlink: refusing to use it; remove it and start again`);
  }
  if (!stat.isDirectory()) {
    throw new UntrustedDirectoryError(
      `${path} is not a directory: refusing to use it; remove it and start again`,
    );
  }
  if (stat.uid !== me()) {
    throw new UntrustedDirectoryError(
      `${path} is owned by uid ${stat.uid}, not by this user (uid ${me()}): refusing to use it; remove it if you trust nothing in it, then start again`,
    );
  }
  if ((stat.mode & 0o022) !== 0) {
    throw new UntrustedDirectoryError(
      `${path} (mode ${octal(stat.mode)}) is writable by other users: refusing to use it; remove it and start again`,
    );
  }
}

/**
 * Makes `dir` (and its missing parents) with `mode`, or checks the one already there, so that
 * files kept in it can be trusted: it is a real directory (not a symlink) owned by this user and
 * writable by nobody else, and every ancestor is owned by root or this user and writable by
 * nobody else unless sticky (as /tmp is, where others cannot rename or replace what is ours).
 * The answer is the directory's real path: callers use it rather than `dir`, so a symlink in an
 * ancestor that someone repoints after this check (a symlink race) can no longer redirect them.
 */
export function ensureOwnedDirectory(dir: string, mode = 0o755): string {
  const target = resolve(dir);
  const missing: string[] = [];
  let existing = target;
  while (lstatOrUndefined(existing) === undefined) {
    missing.unshift(basename(existing));
    existing = dirname(existing);
  }
  // The path's own components must be what they say; the system's part may go through links.
  if (existing === target) assertOwnedDirectory(target);
  const real = realpathSync(existing);
  const root = parse(real).root;
  let ancestor = root;
  for (const part of real.slice(root.length).split(sep).filter(Boolean)) {
    assertTrustedAncestor(ancestor);
    ancestor = join(ancestor, part);
  }
  if (existing === target) return real;
  assertTrustedAncestor(real);
  let current = real;
  for (const part of missing) {
    current = join(current, part);
    try {
      mkdirSync(current, { mode });
      chmodSync(current, mode); // whatever the umask
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    assertOwnedDirectory(current);
  }
  return current;
}
