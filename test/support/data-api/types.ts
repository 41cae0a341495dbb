/** The operations served: the SDK POSTs each to `/<name>`. */
export type DataApiOperation =
  | 'Execute'
  | 'BatchExecute'
  | 'BeginTransaction'
  | 'CommitTransaction'
  | 'RollbackTransaction';

/** An AWS error to answer instead of serving a call, e.g. a resuming cluster. */
export interface InjectedFailure {
  readonly name: string;
  readonly message?: string;
  /** Defaults to the status AWS uses for `name` (400 when unknown). */
  readonly status?: number;
  /** Only calls to this operation fail; any operation when absent. */
  readonly operation?: DataApiOperation;
  /**
   * Serve the call first, then answer the failure instead of its result: the statement ran (and,
   * outside a transaction, committed) but the caller never hears so, as when the response is
   * lost after the database did the work. @default false
   */
  readonly afterRunning?: boolean;
}

/** Decides per call whether to answer an injected failure instead (undefined: serve it). */
export type FailureDecider = (
  operation: DataApiOperation,
  request: Readonly<Record<string, unknown>>,
) => InjectedFailure | undefined;

/** One injected failure the endpoint answered. */
export interface InjectedAnswer {
  readonly operation: DataApiOperation;
  readonly name: string;
  /** The call was served before the failure was answered (see `InjectedFailure.afterRunning`). */
  readonly afterRunning: boolean;
}

/** A database login a Secrets Manager secret holds (`username` and `password`, as the Data API reads it). */
export interface SecretLogin {
  readonly username: string;
  readonly password: string;
}

/** AWS's time limits, shortened in tests that exercise them, and the secrets it can read. */
export interface DataApiServerOptions {
  /**
   * Looks a secret up as the Data API does on each call: the login is the secret's, so each
   * function reaches PostgreSQL as its own role. `secretArn` (the URL's own login) is always known.
   */
  readonly secrets?: (secretArn: string) => SecretLogin | undefined;
  /** The cluster ARN calls must name. @default a made-up ARN of a new local cluster */
  readonly resourceArn?: string;
  /** The Data API cancels a statement after 45 s (StatementTimeoutException). */
  readonly statementTimeoutMs?: number;
  /** The Data API rolls a transaction back after 3 minutes without a call. */
  readonly transactionIdleMs?: number;
  /**
   * Arms the idle rollback of a transaction: calls `fire` after `ms` and returns what disarms
   * it (a call on the transaction re-arms it). A test passes timers it fires itself, to reach
   * "the transaction sat idle past the limit" without waiting for it. @default a real timer
   */
  readonly idleTimer?: (fire: () => void, ms: number) => () => void;
}

/** A running endpoint; point `RDSDataClient` at `endpoint` with any credentials. */
export interface DataApiServer {
  readonly endpoint: string;
  readonly resourceArn: string;
  readonly secretArn: string;
  readonly database: string;
  /** Registers a secret holding `login` and returns its ARN (the secret a function's DB_SECRET_ARN names). */
  addSecret(login: SecretLogin): string;
  /** Operations served (or failed by injection), in arrival order: lets tests count retries. */
  readonly calls: readonly DataApiOperation[];
  /** The next `times` matching calls answer `failure` (after serving them, with `afterRunning`). */
  failNext(times: number, failure: InjectedFailure): void;
  /** Asks `decide` about every call `failNext` does not fail, from now on; undefined stops asking. */
  failWhen(decide: FailureDecider | undefined): void;
  /** Every injected failure answered so far, in order: lets tests prove a fault really happened. */
  readonly injected: readonly InjectedAnswer[];
  close(): Promise<void>;
}

/** A `SqlParameter` as the SDK sends it. */
export interface WireParameter {
  name?: string;
  typeHint?: string;
  value?: Record<string, unknown>;
}

/** A request body: the operation's members as JSON. */
export type Body = Record<string, unknown>;
