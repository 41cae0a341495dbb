import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { ApiError, statusByName, translateSqlError, validation } from './errors';
import { createStatementRunner } from './statement';
import type {
  Body,
  DataApiOperation,
  DataApiServer,
  DataApiServerOptions,
  FailureDecider,
  InjectedAnswer,
  InjectedFailure,
  SecretLogin,
  WireParameter,
} from './types';

interface OpenTransaction {
  readonly client: pg.PoolClient;
  readonly database: string;
  busy: boolean;
  disarmIdle?: () => void;
}

/**
 * The idle rollback's default: a real timer that keeps no process alive, as the Data API times an
 * idle transaction out. Tests that need the rollback pass `idleTimer` and fire it themselves.
 */
const realIdleTimer = (fire: () => void, ms: number) => {
  const timer = setTimeout(fire, ms);
  timer.unref();
  return () => clearTimeout(timer);
};

async function readJson(req: IncomingMessage): Promise<Body> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    const body: unknown = text ? JSON.parse(text) : {};
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new Error('not an object');
    return body as Body;
  } catch {
    throw new ApiError(400, 'SerializationException', 'The request body is not a JSON object');
  }
}

function send(res: ServerResponse, status: number, body: unknown, errorType?: string): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'x-amzn-requestid': randomUUID(),
    ...(errorType ? { 'x-amzn-errortype': errorType } : {}),
  });
  res.end(text);
}

const operations = new Set<string>([
  'Execute',
  'BatchExecute',
  'BeginTransaction',
  'CommitTransaction',
  'RollbackTransaction',
]);

/**
 * Starts a local RDS Data API endpoint on 127.0.0.1 (a free port) in front of the PostgreSQL
 * database at `pgUrl`, for DataApiSqlClient tests with the real `RDSDataClient`; calls may name
 * another database on the same server with `database`. Each call reads its secret and runs as
 * that login; a transaction holds one connection, serves one call at a time, and is rolled back
 * after `transactionIdleMs` without a call; failures can be injected before or after a call runs.
 */
export async function startDataApiServer(
  pgUrl: string,
  options: DataApiServerOptions = {},
): Promise<DataApiServer> {
  const url = new URL(pgUrl);
  const defaultDatabase = decodeURIComponent(url.pathname.slice(1)) || 'postgres';
  const cluster = `content-pipeline-local-${randomBytes(4).toString('hex')}`;
  const resourceArn = options.resourceArn ?? `arn:aws:rds:us-east-1:000000000000:cluster:${cluster}`;
  const secretArn = `arn:aws:secretsmanager:us-east-1:000000000000:secret:${cluster}-AbCdEf`;
  const statementTimeoutMs = options.statementTimeoutMs ?? 45_000;
  const transactionIdleMs = options.transactionIdleMs ?? 180_000;
  const idleTimer = options.idleTimer ?? realIdleTimer;

  const ownLogin: SecretLogin = {
    username: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
  };
  const added = new Map<string, SecretLogin>([[secretArn, ownLogin]]);
  const loginOf = (arn: string) => added.get(arn) ?? options.secrets?.(arn);

  // One pool per (database, login): the login is the secret's, as on AWS.
  const pools = new Map<string, pg.Pool>();
  const poolFor = (database: string, login: SecretLogin) => {
    const key = `${login.username}\u0000${database}`;
    let pool = pools.get(key);
    if (!pool) {
      const dbUrl = new URL(pgUrl);
      dbUrl.pathname = `/${encodeURIComponent(database)}`;
      dbUrl.username = encodeURIComponent(login.username);
      dbUrl.password = encodeURIComponent(login.password);
      pool = new pg.Pool({
        connectionString: dbUrl.toString(),
        max: 20,
        // Results in UTC, as AWS returns them; the statement timeout AWS enforces.
        options: `-c TimeZone=UTC -c statement_timeout=${statementTimeoutMs}`,
      });
      pool.on('error', () => {}); // an idle connection dropped by the server; the next call reconnects
      pools.set(key, pool);
    }
    return pool;
  };
  const connect = async (database: string, login: SecretLogin) => {
    try {
      return await poolFor(database, login).connect();
    } catch (err) {
      throw translateSqlError(err, 0);
    }
  };

  const transactions = new Map<string, OpenTransaction>();
  const failures: { remaining: number; failure: InjectedFailure }[] = [];
  let decider: FailureDecider | undefined;
  const injected: InjectedAnswer[] = [];
  const calls: DataApiOperation[] = [];
  const runStatement = createStatementRunner();

  /** Checks the cluster and reads the secret, as the Data API does on every call; returns its login. */
  const checkTarget = (body: Body): SecretLogin => {
    if (typeof body.resourceArn !== 'string' || typeof body.secretArn !== 'string') {
      throw validation('resourceArn and secretArn are required');
    }
    // (I): an unknown cluster or secret; the exact AWS exceptions vary by cause.
    if (body.resourceArn !== resourceArn) {
      throw new ApiError(
        400,
        'BadRequestException',
        `HttpEndpoint is not enabled for resource ${body.resourceArn}`,
      );
    }
    const login = loginOf(body.secretArn);
    if (!login) {
      throw new ApiError(
        400,
        'SecretsErrorException',
        `Secrets Manager cannot find the secret ${body.secretArn}`,
      );
    }
    return login;
  };

  const endTransaction = (id: string) => {
    const tx = transactions.get(id);
    if (!tx) return undefined;
    transactions.delete(id);
    tx.disarmIdle?.();
    return tx;
  };

  const armIdleTimer = (id: string, tx: OpenTransaction) => {
    tx.disarmIdle?.();
    tx.disarmIdle = idleTimer(() => {
      if (tx.busy || !endTransaction(id)) return;
      tx.client.query('ROLLBACK').then(
        () => tx.client.release(),
        () => tx.client.release(true),
      );
    }, transactionIdleMs);
  };

  /** Runs `fn` holding the transaction; a second call meanwhile is refused, as AWS does. */
  async function withTransaction<T>(id: unknown, fn: (tx: OpenTransaction) => Promise<T>): Promise<T> {
    const tx = typeof id === 'string' ? transactions.get(id) : undefined;
    if (!tx)
      throw new ApiError(404, 'TransactionNotFoundException', `Transaction ${String(id)} is not found`);
    if (tx.busy) throw new ApiError(400, 'DatabaseErrorException', 'Transaction is still running a query');
    tx.busy = true;
    try {
      return await fn(tx);
    } finally {
      tx.busy = false;
      if (transactions.has(id as string)) armIdleTimer(id as string, tx);
    }
  }

  async function autoCommit<T>(
    database: string,
    login: SecretLogin,
    fn: (client: pg.PoolClient) => Promise<T>,
  ): Promise<T> {
    const client = await connect(database, login);
    let broken = false;
    try {
      return await fn(client);
    } catch (err) {
      broken = !(err instanceof ApiError);
      throw err;
    } finally {
      client.release(broken);
    }
  }

  const databaseOf = (body: Body) => (typeof body.database === 'string' ? body.database : defaultDatabase);

  async function handle(operation: DataApiOperation, body: Body): Promise<unknown> {
    const login = checkTarget(body);
    switch (operation) {
      case 'Execute':
        if (body.transactionId !== undefined) {
          return withTransaction(body.transactionId, (tx) => runStatement(tx.client, tx.database, body));
        }
        return autoCommit(databaseOf(body), login, (client) => runStatement(client, databaseOf(body), body));
      case 'BatchExecute': {
        const sets = (body.parameterSets ?? []) as WireParameter[][];
        const runAll = async (client: pg.PoolClient, database: string) => {
          for (const parameters of sets) await runStatement(client, database, { ...body, parameters });
          return { updateResults: sets.map(() => ({ generatedFields: [] })) };
        };
        if (body.transactionId !== undefined) {
          return withTransaction(body.transactionId, (tx) => runAll(tx.client, tx.database));
        }
        // pgjdbc sends an auto-commit batch as one implicit transaction: all sets or none (I).
        return autoCommit(databaseOf(body), login, async (client) => {
          await client.query('BEGIN');
          try {
            const out = await runAll(client, databaseOf(body));
            await client.query('COMMIT');
            return out;
          } catch (err) {
            await client.query('ROLLBACK');
            throw err;
          }
        });
      }
      case 'BeginTransaction': {
        if (body.schema !== undefined) throw validation("The schema parameter isn't supported");
        const database = databaseOf(body);
        const client = await connect(database, login);
        try {
          await client.query('BEGIN');
        } catch (err) {
          client.release(true);
          throw translateSqlError(err, 0);
        }
        // AWS ids are long opaque base64 strings; callers must not parse them.
        const id = randomBytes(96).toString('base64');
        const tx: OpenTransaction = { client, database, busy: false };
        transactions.set(id, tx);
        armIdleTimer(id, tx);
        return { transactionId: id };
      }
      case 'CommitTransaction':
        return withTransaction(body.transactionId, async (tx) => {
          endTransaction(body.transactionId as string);
          try {
            const result = await tx.client.query('COMMIT');
            tx.client.release();
            // COMMIT of a failed transaction rolls back quietly; pgjdbc turns that into an error (I).
            if (result.command === 'ROLLBACK') {
              throw new ApiError(
                400,
                'DatabaseErrorException',
                'The database returned ROLLBACK, so the transaction cannot be committed.; SQLState: 25P02',
              );
            }
            return { transactionStatus: 'Transaction Committed' };
          } catch (err) {
            if (!(err instanceof ApiError)) tx.client.release(true);
            throw translateSqlError(err, 0);
          }
        });
      case 'RollbackTransaction':
        return withTransaction(body.transactionId, async (tx) => {
          endTransaction(body.transactionId as string);
          try {
            await tx.client.query('ROLLBACK');
            tx.client.release();
          } catch (err) {
            tx.client.release(true);
            throw translateSqlError(err, 0);
          }
          return { transactionStatus: 'Rollback Complete' };
        });
    }
  }

  function takeFailure(operation: DataApiOperation): InjectedFailure | undefined {
    const entry = failures.find(
      (f) => f.remaining > 0 && (!f.failure.operation || f.failure.operation === operation),
    );
    if (!entry) return undefined;
    entry.remaining--;
    return entry.failure;
  }

  const server = createServer((req, res) => {
    const operation = (req.url ?? '').replace(/^\//, '').split('?')[0] ?? '';
    (async () => {
      if (req.method !== 'POST' || !operations.has(operation)) {
        throw new ApiError(404, 'UnknownOperationException', `Unknown operation ${req.method} ${req.url}`);
      }
      const op = operation as DataApiOperation;
      const body = await readJson(req);
      calls.push(op);
      const failure = takeFailure(op) ?? decider?.(op, body);
      if (failure) {
        // The work is done and kept; only its answer is lost (whatever that answer was).
        if (failure.afterRunning) await handle(op, body).catch(() => undefined);
        injected.push({ operation: op, name: failure.name, afterRunning: failure.afterRunning === true });
        const message =
          failure.message ??
          (failure.name === 'DatabaseResumingException'
            ? `The Aurora DB instance ${resourceArn} is resuming after being auto-paused. Please wait a few seconds and try again.`
            : failure.name);
        throw new ApiError(failure.status ?? statusByName[failure.name] ?? 400, failure.name, message);
      }
      return handle(op, body);
    })().then(
      (out) => send(res, 200, out),
      (err: unknown) => {
        const e =
          err instanceof ApiError ? err : new ApiError(500, 'InternalServerErrorException', String(err));
        send(res, e.status, { message: e.message, ...e.extra }, e.errorType);
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    endpoint: `http://127.0.0.1:${port}`,
    resourceArn,
    secretArn,
    database: defaultDatabase,
    addSecret(login) {
      const arn = `arn:aws:secretsmanager:us-east-1:000000000000:secret:${cluster}-${login.username}-${randomBytes(3).toString('hex')}`;
      added.set(arn, login);
      return arn;
    },
    calls,
    failNext(times, failure) {
      failures.push({ remaining: times, failure });
    },
    failWhen(decide) {
      decider = decide;
    },
    injected,
    async close() {
      for (const id of [...transactions.keys()]) {
        const tx = endTransaction(id);
        await tx?.client.query('ROLLBACK').catch(() => {});
        tx?.client.release(true);
      }
      // The SDK keeps connections alive; without this, close() waits for them to time out.
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all([...pools.values()].map((p) => p.end()));
    },
  };
}
