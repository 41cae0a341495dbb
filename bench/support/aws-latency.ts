/**
 * An AWS-like latency profile for the benchmarks: what a Data API call and a PutEvents call
 * cost in the cloud and cost nothing on loopback. Each is a distribution given by quantiles
 * (linear in between), with its source beside it; where a source gives no value, the value
 * is marked as our assumption. Both sources measured more than the call alone, so the profile
 * leans slow: defaults that hold up under it hold up in the cloud.
 */
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { seededRandom } from '../../infra/local/faults';
import { PgSqlClient } from '../../shared/db/pg-client';
import type { QueryResult, Row, SqlClient, SqlExecutor, SqlParams } from '../../shared/db/sql-client';

/** A latency distribution: `[fraction, ms]` points, fractions ascending from 0 to 1. */
export interface LatencyDistribution {
  readonly points: readonly (readonly [number, number])[];
  readonly source: string;
}

export interface AwsLatencyProfile {
  /** One RDS Data API call: ExecuteStatement, BeginTransaction, CommitTransaction. */
  readonly dataApiCall: LatencyDistribution;
  /** One PutEvents call of up to 10 entries. */
  readonly putEvents: LatencyDistribution;
}

export const awsLatencyProfile: AwsLatencyProfile = {
  dataApiCall: {
    points: [
      [0, 40], // assumption: a floor of 40 ms
      [0.5, 105], // measured p50 104.68 ms
      [0.75, 174], // measured p75 173.96 ms
      [0.9, 271], // measured p90 271.32 ms
      [0.99, 572], // measured p99 572.11 ms
      [0.999, 1483], // measured p99.9 1,482.89 ms
      [1, 2180], // measured max 2,179.7 ms
    ],
    source:
      'Vadym Kazulkin, "Data API for Amazon Aurora Serverless v2 with AWS SDK for Java - Part 5: Basic cold and warm ' +
      'starts measurements" (2024-04-08), https://dev.to/aws-builders/data-api-for-amazon-aurora-serverless-v2-with-aws-sdk-for-java-part-5-basic-cold-and-warm-starts-measurements-4gi9: ' +
      'about 10,000 warm invocations of a Lambda function (Java, 1,024 MB) whose work is one ExecuteStatement ' +
      'by primary key on Aurora Serverless v2 PostgreSQL. The whole invocation was timed, so each value bounds ' +
      'one Data API call from above; the 40 ms floor is our assumption.',
  },
  putEvents: {
    points: [
      [0, 10], // assumption
      [0.5, 30], // assumption
      [0.9, 80], // the published p90 of publish -> subscriber, taken for the call alone
      [0.99, 200], // assumption: 2.5 x p90
      [1, 400], // assumption
    ],
    source:
      'AWS Architecture Blog, "Mastering millisecond latency and millions of events: the event-driven ' +
      'architecture behind the Amazon Key Suite" (2026-02-04): 80 ms p90 end-to-end latency from publish to ' +
      'the subscriber on EventBridge at 2,000 events/s over 14 million subscriber calls. The PutEvents call is ' +
      'part of that path, so its p90 is taken as the whole (an upper bound); the p50, p99 and extremes are our ' +
      'assumptions.',
  },
};

/** Draws from `distribution` by inverting its quantile points with `random` (uniform in [0, 1)). */
export function sampler(distribution: LatencyDistribution, random: () => number): () => number {
  const points = distribution.points;
  return () => {
    const u = random();
    for (let i = 1; i < points.length; i++) {
      const [f1, ms1] = points[i] as readonly [number, number];
      if (u <= f1) {
        const [f0, ms0] = points[i - 1] as readonly [number, number];
        return ms0 + ((u - f0) / (f1 - f0 || 1)) * (ms1 - ms0);
      }
    }
    return (points[points.length - 1] as readonly [number, number])[1];
  };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Half the call's latency before it reaches the database, half after: a lock taken inside is held for the second half. */
async function delayed<T>(ms: number, call: () => Promise<T>): Promise<T> {
  await sleep(ms / 2);
  const result = await call();
  await sleep(ms / 2);
  return result;
}

/** The latency samplers of one run, seeded so that two runs draw the same sequence. */
export function latencySamplers(profile: AwsLatencyProfile = awsLatencyProfile, seed = 42) {
  const random = seededRandom(seed);
  return { dataApiCall: sampler(profile.dataApiCall, random), putEvents: sampler(profile.putEvents, random) };
}

/**
 * A transaction as the Data API runs it: BeginTransaction, each statement and CommitTransaction
 * are calls of their own, each with its latency; `run` is the client's own transaction.
 */
async function transactionWithLatency<T>(
  latency: () => number,
  run: (work: (tx: SqlExecutor) => Promise<T>) => Promise<T>,
  work: (tx: SqlExecutor) => Promise<T>,
): Promise<T> {
  await sleep(latency());
  const result = await run((tx) =>
    work({
      query: <R extends Row>(sql: string, params?: SqlParams) =>
        delayed(latency(), () => tx.query<R>(sql, params)),
    }),
  );
  await sleep(latency());
  return result;
}

/** A SqlClient with a Data API call's latency on every call. */
export class DataApiLatencySqlClient implements SqlClient {
  constructor(
    private readonly inner: SqlClient,
    private readonly latency: () => number,
  ) {}

  query<R extends Row = Row>(sql: string, params?: SqlParams): Promise<QueryResult<R>> {
    return delayed(this.latency(), () => this.inner.query<R>(sql, params));
  }

  transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return transactionWithLatency(this.latency, (w) => this.inner.transaction(w), work);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/**
 * Puts the profile's latencies into everything in this process that talks to PostgreSQL
 * through `PgSqlClient` or sends `PutEvents` through an `EventBridgeClient`: the whole local
 * runtime, whose clients the benchmark cannot reach. Returns the undo.
 */
export function installAwsLatency(samplers = latencySamplers()): () => void {
  const pgProto = PgSqlClient.prototype;
  const originalQuery = pgProto.query;
  const originalTransaction = pgProto.transaction;
  // The SDK's `send` is overloaded (promise and callback forms); only the command matters here.
  const ebProto = EventBridgeClient.prototype as unknown as {
    send: (...args: unknown[]) => Promise<unknown>;
  };
  const originalSend = ebProto.send;
  pgProto.query = function query<R extends Row = Row>(this: PgSqlClient, sql: string, params?: SqlParams) {
    return delayed(
      samplers.dataApiCall(),
      () => originalQuery.call(this, sql, params) as Promise<QueryResult<R>>,
    );
  };
  pgProto.transaction = function transaction<T>(this: PgSqlClient, work: (tx: SqlExecutor) => Promise<T>) {
    return transactionWithLatency(
      samplers.dataApiCall,
      (w) => originalTransaction.call(this, w) as Promise<T>,
      work,
    );
  };
  ebProto.send = async function send(this: unknown, ...args: unknown[]) {
    if (args[0] instanceof PutEventsCommand) await sleep(samplers.putEvents());
    return originalSend.apply(this, args);
  };
  return () => {
    pgProto.query = originalQuery;
    pgProto.transaction = originalTransaction;
    ebProto.send = originalSend;
  };
}
