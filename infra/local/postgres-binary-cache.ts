import { createHash, randomUUID } from 'node:crypto';
import { readdirSync, readlinkSync, type Stats } from 'node:fs';
import {
  chmod,
  constants,
  copyFile,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  rename,
  rm,
  symlink,
  utimes,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import { assertOwnedDirectory, ensureOwnedDirectory, UntrustedDirectoryError } from './owned-directory';
import { canRun, firstClosedDirectory, type ServerUser } from './server-user';

/** One entry of a binaries tree; a cached copy must match its source's entries exactly. */
interface TreeEntry {
  readonly path: string;
  readonly type: 'dir' | 'file' | 'symlink';
  readonly mode?: number;
  readonly size?: number;
  readonly sha256?: string;
  readonly target?: string;
}

/**
 * Where copies of the binaries are kept, the first that works: /var/cache (root's, so no other
 * user can plant anything there), else this user's directory in the temp directory.
 */
export const defaultCacheRoots = (): string[] => [
  '/var/cache/content-pipeline',
  join(tmpdir(), `content-pipeline-cache-${process.getuid?.() ?? 'user'}`),
];

/** A copy not used for this long, and run by no process, is removed when another is staged. */
const unusedCopyMs = 24 * 60 * 60 * 1_000;
/** A staging directory this old was left by a start that died while copying. */
const abandonedStagingMs = 60 * 60 * 1_000;
const copyPrefix = 'embedded-postgres-';
const stagingPrefix = '.staging-';
const discardPrefix = '.discard-';

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');
const errorCode = (err: unknown) => (err as NodeJS.ErrnoException).code ?? String(err);

/** The mode a staged entry gets: readable by all, writable by the owner only, programs executable. */
const stagedMode = (stat: Stats, path: string) =>
  stat.isDirectory() || path.startsWith('bin/') || (stat.mode & 0o111) !== 0 ? 0o755 : 0o644;

/**
 * Describes the tree under `top`, depth first (a directory before its contents), with each
 * file's SHA-256. `mode` gives the mode to record; `owner`, when set, is the uid every entry
 * must have: another owner is refused, not replaced, since whoever could plant it is not us.
 */
async function describeTree(
  top: string,
  mode: (stat: Stats, path: string) => number,
  owner?: number,
): Promise<TreeEntry[]> {
  const entries: TreeEntry[] = [];
  const visit = async (dir: string): Promise<void> => {
    for (const name of (await readdir(join(top, dir))).sort()) {
      const path = dir ? `${dir}/${name}` : name;
      const full = join(top, path);
      const stat = await lstat(full);
      if (owner !== undefined && stat.uid !== owner) {
        throw new UntrustedDirectoryError(
          `${full} is owned by uid ${stat.uid}, not by this user (uid ${owner}): refusing to run PostgreSQL from ${top}; remove it, then start again`,
        );
      }
      if (stat.isSymbolicLink()) entries.push({ path, type: 'symlink', target: await readlink(full) });
      else if (stat.isDirectory()) {
        entries.push({ path, type: 'dir', mode: mode(stat, path) });
        await visit(path);
      } else if (stat.isFile()) {
        const content = await readFile(full);
        entries.push({
          path,
          type: 'file',
          mode: mode(stat, path),
          size: stat.size,
          sha256: sha256(content),
        });
      } else throw new Error(`${full} is not a file, a directory or a symlink`);
    }
  };
  await visit('');
  return entries;
}

/** How the copy in `dir` differs from `expected`, or undefined when it is exactly that. */
async function differenceFrom(dir: string, expected: readonly TreeEntry[]): Promise<string | undefined> {
  let actual: TreeEntry[];
  try {
    actual = await describeTree(dir, (stat) => stat.mode & 0o7777, process.getuid?.());
  } catch (err) {
    if (err instanceof UntrustedDirectoryError) throw err;
    return `unreadable: ${errorCode(err)}`;
  }
  const byPath = new Map(actual.map((e) => [e.path, e]));
  for (const want of expected) {
    const have = byPath.get(want.path);
    if (!have) return `${want.path} is missing`;
    if (JSON.stringify(have) !== JSON.stringify(want)) return `${want.path} differs`;
    byPath.delete(want.path);
  }
  const extra = byPath.keys().next();
  return extra.done ? undefined : `${extra.value} is not in the package`;
}

/** Copies `expected`'s entries from `source` into the empty directory `dir`, with the staged modes. */
async function copyTree(source: string, dir: string, expected: readonly TreeEntry[]): Promise<void> {
  for (const entry of expected) {
    const to = join(dir, entry.path);
    if (entry.type === 'dir') await mkdir(to);
    else if (entry.type === 'file') await copyFile(join(source, entry.path), to, constants.COPYFILE_EXCL);
    else await symlink(entry.target as string, to);
    if (entry.mode !== undefined) await chmod(to, entry.mode); // whatever the umask
  }
}

/** Moves `dir` out of the way (atomically, so no start sees half of it), then deletes it. */
async function discard(root: string, dir: string): Promise<void> {
  const aside = join(root, `${discardPrefix}${randomUUID()}`);
  try {
    await rename(dir, aside);
  } catch (err) {
    if (errorCode(err) === 'ENOENT') return; // another start discarded it first
    throw err;
  }
  await rm(aside, { recursive: true, force: true });
}

/** Whether a running process's program lies under `dir` (a PostgreSQL started from that copy). */
function runningFrom(dir: string): boolean {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return true; // no /proc: cannot tell, so keep it
  }
  return pids.some((pid) => {
    try {
      return readlinkSync(`/proc/${pid}/exe`).startsWith(dir + sep);
    } catch {
      return false;
    }
  });
}

/**
 * Removes what earlier starts left in `root`: staging directories of starts that died while
 * copying, and copies of other binaries (another version of the package) that no start has used
 * for a day and no running PostgreSQL was started from. A copy in use is never removed: its
 * servers load libraries from it as they go.
 */
async function collectLeftovers(root: string, keep: string, log: (message: string) => void): Promise<void> {
  const now = Date.now();
  for (const name of await readdir(root)) {
    const path = join(root, name);
    try {
      const stat = await lstat(path);
      const age = now - stat.mtimeMs;
      if (name.startsWith(stagingPrefix) || name.startsWith(discardPrefix)) {
        if (age > abandonedStagingMs) await rm(path, { recursive: true, force: true });
      } else if (name.startsWith(copyPrefix) && name !== keep && age > unusedCopyMs) {
        assertOwnedDirectory(path, stat);
        if (!runningFrom(path)) {
          log(`removing ${path}, a copy of PostgreSQL binaries unused for a day`);
          await discard(root, path);
        }
      }
    } catch (err) {
      log(
        `left ${path} in the PostgreSQL binaries cache: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }
}

/**
 * Makes `root/name` an exact copy of `expected`: keeps a copy already there that matches entry
 * for entry (the content hashes included), replaces one that does not (a stale or damaged
 * copy), and refuses one owned by another user. A new copy is made in a private staging
 * directory and renamed into place, so two starts at once never see half a copy: the second
 * rename fails, and that start uses the first one's copy once it has checked it.
 */
async function ensureCopy(
  source: string,
  root: string,
  name: string,
  expected: readonly TreeEntry[],
  log: (message: string) => void,
): Promise<string> {
  const copy = join(root, name);
  const existing = await lstat(copy).catch(() => undefined);
  if (existing) {
    assertOwnedDirectory(copy, existing);
    const difference = await differenceFrom(copy, expected);
    if (difference === undefined) return copy;
    log(`replacing ${copy}, a stale copy of the PostgreSQL binaries (${difference})`);
    await discard(root, copy);
  }
  const staging = await mkdtemp(join(root, `${stagingPrefix}${name}-`));
  try {
    await copyTree(source, staging, expected);
    await chmod(staging, 0o755);
    await rename(staging, copy).catch((err) => {
      if (!['ENOTEMPTY', 'EEXIST'].includes(errorCode(err))) throw err; // else another start was first
    });
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  const difference = await differenceFrom(copy, expected);
  if (difference !== undefined) {
    throw new Error(
      `the PostgreSQL binaries copied to ${copy} do not match ${source} (${difference}): remove ${copy} and start again`,
    );
  }
  return copy;
}

export interface StageOptions {
  /** The binaries package's directory holding `bin/`, `lib/` and `share/`. */
  readonly source: string;
  /** The user that must run the copy. */
  readonly user: ServerUser;
  /** Candidate cache directories, the first that works is used. @default {@link defaultCacheRoots} */
  readonly roots?: readonly string[];
  readonly log?: (message: string) => void;
}

/**
 * A copy of the PostgreSQL binaries in `source` that `user` can run, for when it cannot reach
 * `source` itself (a clone under a directory only root can enter). The copy lives in a cache
 * directory owned by this user (root) and writable by no one else, under a name made from the
 * SHA-256 of the package's every path, mode, link and file content (`embedded-postgres-<hash>`),
 * so another version of the package gets its own copy; before each use every file of the copy
 * is checked against the package. A cache directory owned by another user, or reached through
 * a symlink, is refused with one line naming it: whoever controls it would choose the programs
 * this process runs. Resolves with the copy's directory.
 */
export async function stageBinaries(options: StageOptions): Promise<string> {
  const log = options.log ?? (() => {});
  const expected = await describeTree(options.source, stagedMode);
  const name = `${copyPrefix}${sha256(JSON.stringify(expected)).slice(0, 16)}`;
  const tried: string[] = [];
  for (const candidate of options.roots ?? defaultCacheRoots()) {
    let root: string;
    try {
      root = ensureOwnedDirectory(candidate, 0o755);
    } catch (err) {
      if (err instanceof UntrustedDirectoryError) throw err;
      tried.push(`${candidate}: ${errorCode(err)}`);
      continue;
    }
    const copy = await ensureCopy(options.source, root, name, expected, log);
    if (!canRun(options.user, join(copy, 'bin', 'postgres'))) {
      tried.push(
        `${candidate}: the ${options.user.name} user cannot enter ${firstClosedDirectory(options.user, copy)}`,
      );
      continue;
    }
    const now = new Date();
    await utimes(copy, now, now); // its last use, for collectLeftovers
    await collectLeftovers(root, name, log);
    return copy;
  }
  throw new Error(
    `PostgreSQL runs as the ${options.user.name} OS user, which cannot enter ${firstClosedDirectory(options.user, options.source) ?? options.source} (where npm put its binaries), and no cache it can reach could be made (${tried.join('; ')}): let root write /var/cache, or clone the project under a directory the ${options.user.name} user can enter`,
  );
}
