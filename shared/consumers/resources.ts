import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { FunctionRole } from '../db/roles';
import type { SqlClient } from '../db/sql-client';

/**
 * What a consumer's effect writes to or reads from, declared in its folder
 * (`functions/consumers/<name>/consumer.ts`) and realized by each runtime alike: the CDK
 * construct makes the AWS resource, grants the consumer's function exactly what the kind needs
 * and passes its name in the environment; the local runtime makes its stand-in (a table on the
 * local DynamoDB, a directory, a JSON-lines file, the PostgreSQL role). The effect sees a port
 * (`PortOf`), never the runtime.
 *
 * A declaration is data only, so the topology, the CDK app and the cost model can read every
 * consumer's without bundling any effect code.
 */

/** What one delivered event costs a resource, for the cost and capacity models. */
interface PerEvent<K extends string> {
  readonly perEvent: Readonly<Record<K, number>>;
}

/**
 * A DynamoDB table keyed by one string attribute, on demand, point-in-time recovery on. The
 * function may read (`GetItem`) and put (`PutItem`) items; nothing else.
 */
export interface TableResource extends PerEvent<'reads' | 'writes' | 'itemKb'> {
  readonly kind: 'table';
  readonly description: string;
  readonly partitionKey: string;
}

/**
 * An SNS topic (encrypted with the AWS managed key) the function may publish to. Subscribers
 * are added outside the pipeline. Locally, the messages go to `<data>/effects/<key>.jsonl`.
 */
export interface TopicResource extends PerEvent<'publishes'> {
  readonly kind: 'topic';
  readonly description: string;
  /** The topic's display name (the sender's name of its email). */
  readonly displayName: string;
}

/**
 * An S3 bucket of write-once objects (versioned, encrypted, never public, TLS only): the
 * function may `PutObject` and nothing else, and puts with `If-None-Match: *`. Locally, files
 * under `<data>/effects/<key>/`.
 */
export interface BucketResource extends PerEvent<'puts'> {
  readonly kind: 'bucket';
  readonly description: string;
}

/**
 * The pipeline's PostgreSQL database, logged in as one of its roles (`shared/db/roles.ts`): the
 * role's grants are what the function may do. At most one per consumer.
 */
export interface DatabaseResource extends PerEvent<'calls'> {
  readonly kind: 'database';
  readonly description: string;
  readonly role: FunctionRole;
}

export type ResourceSpec = TableResource | TopicResource | BucketResource | DatabaseResource;
export type ResourceKind = ResourceSpec['kind'];
export type ResourceSpecs = Readonly<Record<string, ResourceSpec>>;

/** Declares a table (see TableResource). */
export const table = (spec: Omit<TableResource, 'kind'>): TableResource => ({ kind: 'table', ...spec });
/** Declares a topic (see TopicResource). */
export const topic = (spec: Omit<TopicResource, 'kind'>): TopicResource => ({ kind: 'topic', ...spec });
/** Declares a bucket of write-once objects (see BucketResource). */
export const bucket = (spec: Omit<BucketResource, 'kind'>): BucketResource => ({ kind: 'bucket', ...spec });
/** Declares the database as one of its roles (see DatabaseResource). */
export const database = (spec: Omit<DatabaseResource, 'kind'>): DatabaseResource => ({
  kind: 'database',
  ...spec,
});

/** A table as the effect reaches it: the DynamoDB client of its function and the table's name. */
export interface TablePort {
  readonly client: DynamoDBClient;
  readonly tableName: string;
}

/** One message for a topic. */
export interface TopicMessage {
  /** Its idempotency key: a FIFO topic dedupes on it; subscribers of a standard one may (it is the `id` attribute). */
  readonly id: string;
  /** Messages of one group stay in order on a FIFO topic. */
  readonly group: string;
  /** The email subject (SNS: at most 100 printable ASCII characters). */
  readonly subject: string;
  /** The message itself, sent as JSON. */
  readonly body: Readonly<Record<string, unknown>>;
  /** String attributes subscribers can filter on (empty values are left out: SNS refuses them). */
  readonly attributes: Readonly<Record<string, string | null>>;
}

/** `sent`: handed to the topic now; `duplicate`: the topic already has a message with this id. */
export type PublishOutcome = 'sent' | 'duplicate';

/** A topic as the effect reaches it. */
export interface Publisher {
  publish(message: TopicMessage): Promise<PublishOutcome>;
}

/** `written`: this call stored the object; `exists`: one was already stored under the key. */
export type PutOutcome = 'written' | 'exists';

/** A bucket as the effect reaches it: write-once objects under keys the effect chooses. */
export interface WriteOnceStore {
  /** Stores `body` (JSON) at `key` unless something is already there (idempotent; first write wins). */
  put(key: string, body: string): Promise<PutOutcome>;
}

/** The port a resource of each kind is to its effect. */
export type PortOf<R extends ResourceSpec> = R extends TableResource
  ? TablePort
  : R extends TopicResource
    ? Publisher
    : R extends BucketResource
      ? WriteOnceStore
      : R extends DatabaseResource
        ? SqlClient
        : never;

/** Every resource of a consumer, as its effect reaches them. */
export type Ports<R extends ResourceSpecs> = { readonly [K in keyof R]: PortOf<R[K]> };

const suffixes = { table: 'TABLE_NAME', topic: 'TOPIC_ARN', bucket: 'BUCKET_NAME' } as const;

/**
 * The environment variable that names resource `key` to the function (`contentIndex` table:
 * `CONTENT_INDEX_TABLE_NAME`). A database has none of its own: the function's database
 * settings (`shared/config.ts`) log in as its role.
 */
export function resourceEnvName(key: string, kind: Exclude<ResourceKind, 'database'>): string {
  const words = key.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase();
  return `${words}_${suffixes[kind]}`;
}

/** What a resource key must look like: it names an environment variable, a construct and a local file. */
export const resourceKeyPattern = /^[a-z][a-zA-Z0-9]{0,39}$/;

/** `contentIndex` -> `ContentIndex`: the id of the resource's construct (and its stack output's prefix). */
export const resourceConstructId = (key: string): string => key[0]?.toUpperCase() + key.slice(1);
