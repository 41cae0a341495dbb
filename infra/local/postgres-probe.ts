import pg from 'pg';
import { applicationName, probeSettings } from '../../shared/db/pg-settings';
import type { ComponentState } from '../../shared/ops/ops-ports';
import { Pause } from './pause';

/**
 * Whether PostgreSQL answered `SELECT 1` on a new connection within `timeoutMs`: undefined when
 * it did, else why not. A new connection each time, since what a hung postmaster stops is new
 * connections (it forks every backend): sessions already open go on answering, so a pooled
 * connection would say "up" while every pool that needs a connection waits.
 */
export async function probePostgres(url: string, timeoutMs: number): Promise<string | undefined> {
  const client = new pg.Client({
    connectionString: url,
    application_name: applicationName('probe'),
    // node-postgres ends the connect at this bound (its socket destroyed); the statement gets
    // what is left of the same deadline.
    connectionTimeoutMillis: timeoutMs,
  });
  // A socket that fails after the deadline is already reported.
  client.on('error', () => {});
  const started = performance.now();
  const seconds = `${timeoutMs / 1_000} s`;
  try {
    try {
      await client.connect();
    } catch (err) {
      return performance.now() - started >= timeoutMs
        ? `did not answer SELECT 1 on a new connection within ${seconds} (no session started: the postmaster did not take the connection)`
        : `refused a new connection: ${err instanceof Error ? err.message : String(err)}`;
    }
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        client.query('SELECT 1'),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error('no answer')),
            Math.max(0, timeoutMs - (performance.now() - started)),
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
    return undefined;
  } catch (err) {
    return performance.now() - started >= timeoutMs
      ? `did not answer SELECT 1 on a new connection within ${seconds} (a session started; the statement got no answer)`
      : `failed SELECT 1: ${err instanceof Error ? err.message : String(err)}`;
  } finally {
    // Not awaited: ending a connection to a server that does not answer waits for it; with a
    // statement in flight node-postgres destroys the socket at once.
    client.end().catch(() => {});
  }
}

export interface PostgresProbeOptions {
  readonly url: string;
  /** One probe's deadline. @default probeSettings.timeoutMs */
  readonly timeoutMs?: number;
  /** The pause between the end of one probe and the start of the next. @default probeSettings.periodMs */
  readonly periodMs?: number;
  /** Misses in a row before PostgreSQL counts as down. @default probeSettings.missesToDown */
  readonly missesToDown?: number;
  readonly log: (message: string, extra?: Record<string, unknown>) => void;
  /** Told when PostgreSQL answers again after it counted as down. */
  readonly onRecovered?: () => void;
  /** Epoch ms of `since`; `Date.now` by default. */
  readonly clock?: () => number;
  /**
   * The postmaster's supervisor's word: while it says down (a death it is mending), the probe
   * neither probes nor speaks, so a failure is one line in the log, the supervisor's.
   */
  readonly supervised?: () => ComponentState;
  /** The probe itself (a test's); {@link probePostgres} by default. */
  readonly probe?: (url: string, timeoutMs: number) => Promise<string | undefined>;
}

/**
 * The local runtime's judge of PostgreSQL's health: a probe with a deadline, one after another,
 * so `/ops/status` says down within seconds of a hang (a stopped postmaster, a server that
 * accepts and never answers) that no process exit reveals, with why; one line in the log when it
 * goes down, one when it answers again. A death is the postmaster's supervisor's to tell (and to
 * mend): its word comes first where both have one.
 */
export class PostgresProbe {
  private down: { cause: string; since: number } | undefined;
  private misses = 0;
  private firstMissAt = 0;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private readonly pause = new Pause();
  private readonly clock: () => number;

  constructor(private readonly options: PostgresProbeOptions) {
    this.clock = options.clock ?? Date.now;
  }

  /** Up, or down with the cause and since when (the first probe of the run of misses). */
  get state(): ComponentState {
    if (!this.down) return { up: true };
    return { up: false, cause: this.down.cause, since: new Date(this.down.since).toISOString() };
  }

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.pause.wake();
    await this.loop;
  }

  private async run(): Promise<void> {
    const timeoutMs = this.options.timeoutMs ?? probeSettings.timeoutMs;
    const missesToDown = this.options.missesToDown ?? probeSettings.missesToDown;
    const probe = this.options.probe ?? probePostgres;
    while (!this.stopped) {
      if (this.options.supervised && !this.options.supervised().up) {
        this.misses = 0;
        this.down = undefined;
        await this.pause.for(this.options.periodMs ?? probeSettings.periodMs);
        continue;
      }
      const at = this.clock();
      const miss = await probe(this.options.url, timeoutMs).catch((err: unknown) => String(err));
      if (this.stopped) break;
      if (miss === undefined) {
        if (this.down) {
          const downFor = this.clock() - this.down.since;
          this.down = undefined;
          this.options.log(`postgres answering again after ${downFor} ms`, { component: 'postgres' });
          this.options.onRecovered?.();
        }
        this.misses = 0;
      } else {
        if (this.misses === 0) this.firstMissAt = at;
        this.misses++;
        if (!this.down && this.misses >= missesToDown) {
          const cause = `PostgreSQL ${miss}`;
          this.down = { cause, since: this.firstMissAt };
          this.options.log(`postgres not answering: ${miss}`, { component: 'postgres', cause });
        }
      }
      await this.pause.for(this.options.periodMs ?? probeSettings.periodMs);
    }
  }
}
