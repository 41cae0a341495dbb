import { randomUUID } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  existsSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import * as z from 'zod';
import { assertOwnedDirectory, ensureOwnedDirectory, UntrustedDirectoryError } from './owned-directory';
import { canEnter, firstClosedDirectory, type ServerUser } from './server-user';

/**
 * Where a runtime's PostgreSQL data lives. In place (`<PIPELINE_DATA_DIR>/postgres`) when the
 * server's OS user can reach it, which is always so when the runtime is not root. As root with
 * the data directory under one only root can enter (root's home, a `mktemp -d` directory), the
 * `postgres` user cannot reach it, and opening it up would change permissions the user never
 * asked to change; so PostgreSQL's data goes to `/var/lib/content-pipeline/postgres/<id>/data`
 * and `<PIPELINE_DATA_DIR>/postgres/location.json` points there, so every later start finds it
 * again. Everything else (DynamoDB, the bus journal, the effects) stays in the data directory.
 */

/** PostgreSQL's data directories for data directories the `postgres` user cannot reach. */
export const defaultDataRoot = '/var/lib/content-pipeline/postgres';

const pointerFile = 'location.json';
const ownerFile = 'owner.json';
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** A relocated data directory with no cluster and no pointer this old is a start that died. */
const abandonedEntryMs = 60 * 60 * 1_000;

const Pointer = z.object({ postgresData: z.string().min(1) });
const Owner = z.object({ dataDir: z.string().min(1) });

/** Writes `value` as JSON to `file` so that a crash leaves either the old file or the new one. */
export function writeJsonDurably(file: string, value: unknown, mode: number): void {
  const temporary = `${file}.${randomUUID()}.tmp`;
  const fd = openSync(temporary, 'wx', mode);
  try {
    writeSync(fd, `${JSON.stringify(value, null, 2)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, file);
  const dir = openSync(dirname(file), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}

function readJson<T>(file: string, schema: z.ZodType<T>): T | undefined {
  if (!existsSync(file)) return undefined;
  let parsed: z.ZodSafeParseResult<T>;
  try {
    parsed = schema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
  } catch {
    parsed = schema.safeParse(undefined);
  }
  if (!parsed.success) {
    throw new Error(`${file} is not what this runtime wrote there: restore it, or remove it and start again`);
  }
  return parsed.data;
}

/** The PostgreSQL data directory `dir`'s pointer names, when PostgreSQL's data was kept elsewhere. */
export function pointedDataDir(dir: string): string | undefined {
  return readJson(join(dir, pointerFile), Pointer)?.postgresData;
}

const pointsAt = (dir: string, data: string) => {
  try {
    return pointedDataDir(dir) === data;
  } catch {
    return false;
  }
};

/** `data` has the shape of a relocated data directory under `root`: `<root>/<uuid>/data`. */
const isRelocated = (root: string, data: string) =>
  basename(data) === 'data' && dirname(dirname(data)) === root && uuid.test(basename(dirname(data)));

/** The data root, made (root-owned, enterable by all) when missing; one line when it cannot be. */
function dataRootFor(dir: string, user: ServerUser, root: string): string {
  const closed = () => firstClosedDirectory(user, dir) ?? dir;
  const fix = `set PIPELINE_DATA_DIR to a directory the ${user.name} user can enter (for example mkdir -m 755 /var/tmp/pipeline)`;
  let real: string;
  try {
    real = ensureOwnedDirectory(root, 0o755);
  } catch (err) {
    if (err instanceof UntrustedDirectoryError) throw err;
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new Error(
      `PostgreSQL runs as the ${user.name} OS user, which cannot enter ${closed()}, and ${root} cannot hold its data instead (${code}): ${fix}`,
    );
  }
  if (!canEnter(user, real)) {
    throw new Error(
      `PostgreSQL runs as the ${user.name} OS user, which can enter neither ${closed()} nor ${firstClosedDirectory(user, real)}: ${fix}`,
    );
  }
  return real;
}

/**
 * Keeps the relocated data directories under `root` that some data directory points at, removes
 * those that hold no cluster and were left by a start that died before writing its pointer, and
 * names the others in one line: a data directory deleted (or moved and not started since) leaves
 * its PostgreSQL data behind, which only a person can tell is no longer needed.
 */
function reportOrphans(root: string, keep: string, log: (message: string) => void): void {
  const orphans: string[] = [];
  for (const id of readdirSync(root)) {
    const entry = join(root, id);
    if (!uuid.test(id) || entry === keep) continue;
    try {
      const owner = readJson(join(entry, ownerFile), Owner)?.dataDir;
      if (owner && pointsAt(owner, join(entry, 'data'))) continue;
      const stat = lstatSync(entry);
      if (!existsSync(join(entry, 'data', 'PG_VERSION')) && Date.now() - stat.mtimeMs > abandonedEntryMs) {
        assertOwnedDirectory(entry, stat);
        rmSync(entry, { recursive: true, force: true });
      } else orphans.push(owner ? `${entry} (was ${owner})` : entry);
    } catch (err) {
      orphans.push(`${entry} (${err instanceof Error ? err.message : String(err)})`);
    }
  }
  if (orphans.length > 0) {
    log(
      `${orphans.length} PostgreSQL data director${orphans.length === 1 ? 'y belongs' : 'ies belong'} to no data directory (deleted, or moved and not started since): ${orphans.join(', ')}; remove what you no longer need`,
    );
  }
}

/**
 * The relocated data directory `dir` points at, checked: it must be one this runtime made under
 * `root`, it must still exist (a start never silently begins an empty database where committed
 * data was), and no other data directory may point at it too (a copied data directory would
 * share, and its start would stop the original's PostgreSQL). A data directory that was moved
 * takes its PostgreSQL data along: the entry's owner is updated.
 */
function claimRelocated(dir: string, data: string, root: string, log: (message: string) => void): string {
  const pointer = join(dir, pointerFile);
  if (!isRelocated(root, data)) {
    throw new Error(
      `${pointer} names ${data}, which is not a PostgreSQL data directory this runtime made under ${root}: restore ${pointer}, or remove it to start with an empty database`,
    );
  }
  const entry = dirname(data);
  const stat = lstatSync(entry, { throwIfNoEntry: false });
  if (!stat) {
    throw new Error(
      `the PostgreSQL data of ${dir} was kept in ${data}, which is gone: restore it, or remove ${pointer} to start with an empty database`,
    );
  }
  assertOwnedDirectory(entry, stat);
  const me = realpathSync(dir);
  const owner = readJson(join(entry, ownerFile), Owner)?.dataDir;
  if (owner !== me) {
    if (owner && existsSync(owner) && pointsAt(owner, data)) {
      throw new Error(
        `${dir} and ${owner} both keep their PostgreSQL data in ${data} (a copied data directory?): remove one of them, or start the copy from an empty PIPELINE_DATA_DIR`,
      );
    }
    writeJsonDurably(join(entry, ownerFile), { dataDir: me }, 0o644);
    log(`PostgreSQL data in ${data} now belongs to ${me}${owner ? ` (moved from ${owner})` : ''}`);
  }
  return data;
}

/**
 * Chooses a home for PostgreSQL's data outside the data directory, which `user` cannot reach:
 * `<root>/<new uuid>/data`, with its owner recorded there before the pointer is written to
 * `dir` (atomically), so a crash at any step leaves either no pointer (the next start chooses
 * again) or a pointer to an entry that exists.
 */
function relocate(dir: string, user: ServerUser, root: string, log: (message: string) => void): string {
  const closed = firstClosedDirectory(user, dir);
  const real = dataRootFor(dir, user, root);
  const entry = join(real, randomUUID());
  mkdirSync(entry, { mode: 0o755 });
  chmodSync(entry, 0o755);
  rmSync(dir, { recursive: true, force: true }); // a half-done initdb: no cluster, no pointer
  mkdirSync(dir, { mode: 0o700 });
  writeJsonDurably(join(entry, ownerFile), { dataDir: realpathSync(dir) }, 0o644);
  const data = join(entry, 'data');
  writeJsonDurably(
    join(dir, pointerFile),
    { postgresData: data, why: `the ${user.name} OS user, which runs PostgreSQL, cannot enter ${closed}` },
    0o600,
  );
  log(
    `PostgreSQL data kept in ${data}: the ${user.name} OS user, which runs PostgreSQL, cannot enter ${closed}`,
  );
  return data;
}

export interface DataLocationOptions {
  /** Where relocated data directories go. @default {@link defaultDataRoot} */
  readonly dataRoot?: string;
  readonly log?: (message: string) => void;
}

/**
 * The PostgreSQL data directory (PGDATA) for `dir` (`<PIPELINE_DATA_DIR>/postgres`): `dir`
 * itself, or the relocated one its pointer names (see the module's comment). A cluster already
 * in `dir` that `user` can no longer reach is not moved: one line names the directory and the fix.
 */
export function postgresDataDir(
  dir: string,
  user: ServerUser | undefined,
  options: DataLocationOptions = {},
): string {
  const log = options.log ?? (() => {});
  const pointed = pointedDataDir(dir);
  if (pointed !== undefined) {
    if (!user) return pointed;
    const root = dataRootFor(dir, user, options.dataRoot ?? defaultDataRoot);
    const data = claimRelocated(dir, pointed, root, log);
    reportOrphans(root, dirname(data), log);
    return data;
  }
  mkdirSync(dirname(dir), { recursive: true });
  if (!user || canEnter(user, dirname(dir))) return dir;
  if (existsSync(join(dir, 'PG_VERSION'))) {
    throw new Error(
      `PostgreSQL's data in ${dir} is out of reach of the ${user.name} OS user, which runs PostgreSQL and cannot enter ${firstClosedDirectory(user, dirname(dir))}: move the data directory to one it can enter, or let it enter that one (chmod o+x)`,
    );
  }
  const data = relocate(dir, user, options.dataRoot ?? defaultDataRoot, log);
  reportOrphans(dirname(dirname(data)), dirname(data), log);
  return data;
}

/**
 * Deletes `dir` and, when its PostgreSQL data was kept elsewhere, that data too (only a
 * directory of the relocated shape). Stop the server first.
 */
export function removePostgresData(dir: string): void {
  let pointed: string | undefined;
  try {
    pointed = pointedDataDir(dir);
  } catch {
    pointed = undefined;
  }
  if (pointed && isRelocated(dirname(dirname(pointed)), pointed)) {
    rmSync(dirname(pointed), { recursive: true, force: true });
  }
  rmSync(dir, { recursive: true, force: true });
}
