import { randomUUID } from 'node:crypto';
import type { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import pg from 'pg';
import type { QueryResult, Row, SqlClient, SqlExecutor, SqlParams } from '../../shared/db/sql-client';

/** A tally the counting wrappers add to; `reset` starts a measurement. */
export class Tally {
  count = 0;
  reset(): void {
    this.count = 0;
  }
}

/**
 * A SqlClient that counts database round trips: one per statement, and one each for the
 * BEGIN and COMMIT of a transaction. On AWS each of them is one Data API call, so the tally
 * is what the relay would send there.
 */
export class CountingSqlClient implements SqlClient {
  constructor(
    private readonly inner: SqlClient,
    readonly roundTrips: Tally = new Tally(),
  ) {}

  query<R extends Row = Row>(sql: string, params?: SqlParams): Promise<QueryResult<R>> {
    this.roundTrips.count++;
    return this.inner.query<R>(sql, params);
  }

  transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.roundTrips.count += 2;
    return this.inner.transaction((tx) =>
      work({
        query: <R extends Row>(sql: string, params?: SqlParams) => {
          this.roundTrips.count++;
          return tx.query<R>(sql, params);
        },
      }),
    );
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/**
 * A node-postgres `Client` class whose every `query` adds to `tally`: handed to a `pg.Pool` as
 * its `Client` option, it counts the round trips of code that builds its own pools (the peer).
 * Once `retired()` is true, the connection errors its clients raise are dropped: the benchmark
 * is done with that code and drops its database, and a pool it left behind without an error
 * listener must not take the process down.
 */
export function countingPgClient(tally: Tally, retired: () => boolean = () => false): typeof pg.Client {
  return class CountingClient extends pg.Client {
    // biome-ignore lint/suspicious/noExplicitAny: EventEmitter's emit signature.
    override emit(event: string | symbol, ...args: any[]): boolean {
      if (event === 'error' && retired()) return true;
      return super.emit(event, ...args);
    }

    // biome-ignore lint/suspicious/noExplicitAny: pg's query has a dozen overloads; this only counts and forwards.
    override query(...args: any[]): any {
      tally.count++;
      // biome-ignore lint/suspicious/noExplicitAny: see above.
      return (super.query as (...a: any[]) => any)(...args);
    }
  };
}

/**
 * An EventBridge client stand-in that accepts every entry, after `delay()` milliseconds (0 by
 * default: only our code and the database count), and counts its PutEvents calls.
 */
export function acceptingEventBridge(
  calls: Tally = new Tally(),
  delay: () => number = () => 0,
): { client: EventBridgeClient; calls: Tally } {
  const client = {
    async send(command: PutEventsCommand) {
      calls.count++;
      const ms = delay();
      if (ms > 0) await new Promise((r) => setTimeout(r, ms));
      const entries = command.input.Entries ?? [];
      return { FailedEntryCount: 0, Entries: entries.map(() => ({ EventId: randomUUID() })) };
    },
  } as unknown as EventBridgeClient;
  return { client, calls };
}
