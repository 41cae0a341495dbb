import { randomUUID } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, openSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { writeJsonDurably } from './postgres-data-location';

/**
 * A PostgreSQL cluster is made whole or not at all.
 *
 * initdb takes a second or so, and `PG_VERSION` is among the first files it writes. A start
 * killed meanwhile (a SIGKILL, the OOM killer, a container stopped) used to leave a data
 * directory that looked like a cluster and that no later start could use, with a message that
 * named no cause: no `pg_control` ("could not find the database system"), no password for
 * `postgres` yet ("password authentication failed"), or no `postgres` database.
 *
 * So initdb runs in a staging directory beside the data directory (`<data>.initdb-<uuid>`); once
 * it has finished, a marker ({@link clusterMarker}) is written into it and it is renamed into
 * place (then the parent directory is fsynced). A data directory that holds a cluster therefore
 * holds a whole one, and what a killed initdb left is a staging directory, which the next start
 * removes: no commit can be in a cluster whose initdb never finished.
 *
 * A cluster made before the marker existed has none. It is checked once: its bootstrap files
 * must be there, and once started, `postgres` must log in with its password to the `postgres`
 * database (the last two things initdb makes). One that passes gets the marker; one that fails
 * is an initdb that never completed: it is set aside (`<data>.incomplete-<time>`, never
 * deleted, named in the log) and a new cluster is made. Migrations need no marker of their own:
 * each runs in its own transaction with its version recorded, so a start killed between them
 * leaves the next start to apply the rest.
 */

/** The marker initdb's staging directory gets once initdb completed, before it is renamed into place. */
export const clusterMarker = 'content-pipeline-cluster.json';

const stagingInfix = '.initdb-';
/** initdb's password file, beside the directory it makes, deleted once initdb ended (see initCluster). */
export const passwordFilePrefix = '.pwfile-';
const asideInfix = '.incomplete-';

/**
 * What `dataDir` holds: no cluster (nothing, or no `PG_VERSION`), a whole one (the marker), or a
 * cluster made before the marker, to be checked ({@link loginProblem}) before it is trusted.
 */
export type ClusterState = 'none' | 'whole' | 'unchecked';

export function clusterState(dataDir: string): ClusterState {
  if (existsSync(join(dataDir, clusterMarker))) return 'whole';
  return existsSync(join(dataDir, 'PG_VERSION')) ? 'unchecked' : 'none';
}

/**
 * Whether initdb's bootstrap finished in `dataDir`: `global/pg_control` and template1's
 * `PG_VERSION` (written once bootstrap succeeded). Without them no server can start on it.
 */
export function bootstrapped(dataDir: string): boolean {
  return (
    existsSync(join(dataDir, 'global', 'pg_control')) && existsSync(join(dataDir, 'base', '1', 'PG_VERSION'))
  );
}

function fsyncDirectory(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Removes the staging directories of initdb runs that a killed start left beside `dataDir`, and
 * their password files (the superuser's password, which only a finished initdb deletes).
 */
export function removeAbandonedStaging(dataDir: string, log: (message: string) => void): void {
  const parent = dirname(dataDir);
  if (!existsSync(parent)) return;
  const prefix = `${basename(dataDir)}${stagingInfix}`;
  for (const name of readdirSync(parent)) {
    if (name.startsWith(passwordFilePrefix)) rmSync(join(parent, name), { force: true });
    if (!name.startsWith(prefix)) continue;
    const staging = join(parent, name);
    log(
      `removing ${staging}: a PostgreSQL cluster whose initdb was stopped before it finished (a start killed while making it)`,
    );
    rmSync(staging, { recursive: true, force: true, maxRetries: 3 });
  }
}

/**
 * Makes a cluster for `dataDir` (which holds none) with `init` (initdb into the directory it is
 * given), in a staging directory renamed into place once initdb completed and the marker is
 * written: see the module's comment.
 */
export async function makeCluster(
  dataDir: string,
  init: (stagingDir: string) => Promise<void>,
  log: (message: string) => void,
): Promise<void> {
  const staging = `${dataDir}${stagingInfix}${randomUUID()}`;
  log(`initializing PostgreSQL 17 in ${dataDir}`);
  try {
    await init(staging);
    writeJsonDurably(
      join(staging, clusterMarker),
      { initdb: 'completed', at: new Date().toISOString() },
      0o644,
    );
    rmSync(dataDir, { recursive: true, force: true }); // no cluster there (clusterState 'none')
    renameSync(staging, dataDir);
    fsyncDirectory(dirname(dataDir));
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    throw err;
  }
}

/** Marks a cluster made before the marker existed as whole, once {@link loginProblem} found none. */
export function markChecked(dataDir: string): void {
  writeJsonDurably(join(dataDir, clusterMarker), { initdb: 'checked', at: new Date().toISOString() }, 0o644);
}

/**
 * Moves the half-made cluster in `dataDir` aside, never deleting it (only a person can tell it
 * holds nothing), and says where and why in one line. Stop its server first.
 */
export function setAside(dataDir: string, why: string, log: (message: string) => void): string {
  const aside = `${dataDir}${asideInfix}${new Date().toISOString().replace(/[:.]/g, '-')}`;
  renameSync(dataDir, aside);
  fsyncDirectory(dirname(dataDir));
  log(
    `PostgreSQL's cluster in ${dataDir} was never completed (${why}: its initdb was stopped before it finished): set aside in ${aside} (remove it once you no longer need it); making a new one`,
  );
  return aside;
}

/** SQLSTATEs a cluster whose initdb stopped in its post-bootstrap steps answers a login with. */
const halfMadeAnswers: Record<string, string> = {
  '28P01': 'the postgres user has no password yet',
  '3D000': 'it has no postgres database',
};

/**
 * Says why a cluster made before the marker is half-made (initdb sets the password first and
 * makes the `postgres` database last), from how `login` (the superuser's, to the `postgres`
 * database) fails, or undefined when it succeeds. Any other error is thrown: it says nothing
 * about how the cluster was made.
 */
export async function loginProblem(login: () => Promise<void>): Promise<string | undefined> {
  try {
    await login();
    return undefined;
  } catch (err) {
    const problem = halfMadeAnswers[(err as { code?: string }).code ?? ''];
    if (problem === undefined) throw err;
    return problem;
  }
}
