/**
 * What asks `npm start`'s runtime to stop: SIGINT (Ctrl-C), SIGTERM (`timeout`, `kill`,
 * supervisors, `docker stop`), SIGHUP (the terminal closed), and the end of the npm process
 * that started it.
 *
 * `npm start` runs the start script through a shell (`sh -c`), which npm sends SIGINT and
 * SIGTERM to and which does not pass them on: a SIGTERM to npm ended npm and the shell and left
 * the runtime and PostgreSQL running, orphaned. The script therefore `exec`s node (no shell left
 * between npm and the runtime, so npm's SIGINT and SIGTERM reach the runtime). npm does not pass
 * SIGHUP on: it just exits, and so does npm killed by any other means; so the runtime, when a
 * package manager's script started it, also watches its parent and stops once that parent is
 * gone (the runtime was re-parented). Started directly (`node --import tsx ...`, `nohup`) it
 * does not watch: its parent may end by design.
 */

/** How often the parent is looked at: a stop begins at most this long after npm exited. */
export const parentWatchMs = 250;

/** Calls `onStop` with the cause of each stop request (a signal's name, or the parent's end). */
export function onStopRequest(onStop: (cause: string) => void, env: NodeJS.ProcessEnv = process.env): void {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => onStop(signal));
  // Set by npm (and yarn and pnpm) in a script's environment.
  if (env.npm_lifecycle_event === undefined) return;
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onStop(`the process that started it (npm, pid ${parent}) exited`);
  }, parentWatchMs);
  timer.unref();
}
