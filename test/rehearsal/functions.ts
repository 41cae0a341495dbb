import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const runtime = fileURLToPath(new URL('./lambda-runtime.mjs', import.meta.url));

/** One function as the template defines it, ready to run. */
export interface FunctionSpec {
  readonly logicalId: string;
  /** Its physical name (what Invoke and the environment of others call it). */
  readonly name: string;
  readonly arn: string;
  /** The bundled file (`asset.<hash>/index.mjs` in the cloud assembly). */
  readonly bundle: string;
  /** From `Handler` (`index.handler` → `handler`). */
  readonly exportName: string;
  /** `Environment.Variables`, resolved. */
  readonly environment: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly memoryMb: number;
  /** The logical id of its execution role. */
  readonly roleId: string;
}

/** A function's error, as Lambda reports it (`X-Amz-Function-Error: Unhandled`). */
export class FunctionError extends Error {
  constructor(
    readonly functionName: string,
    readonly errorType: string,
    message: string,
  ) {
    super(`${functionName}: ${errorType}: ${message}`);
  }
}

/** The init error of a function whose cold start failed (e.g. its configuration is incomplete). */
export interface InitError {
  readonly name: string;
  readonly message: string;
  readonly code?: string;
  readonly fields?: readonly { path: string; message: string }[];
}

type Pending = { resolve: (value: unknown) => void; reject: (err: Error) => void };

/**
 * One function's execution environment: a Node process of its own running `lambda-runtime.mjs`
 * over the bundle, with exactly the template's environment plus what Lambda adds (region,
 * credentials of its role, its name and memory) and the endpoints of the local stand-ins.
 * Invocations run one at a time, as in one Lambda execution environment.
 */
export class FunctionProcess {
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private queue: Promise<unknown> = Promise.resolve();
  readonly output: string[] = [];
  /** Milliseconds from spawn to the handler being ready (the bundle's import). */
  initMs = 0;
  /** Milliseconds of the first invocation, once there was one. */
  firstInvokeMs: number | undefined;

  private constructor(
    readonly spec: FunctionSpec,
    private readonly child: ChildProcess,
  ) {
    child.on(
      'message',
      (m: { type: string; id?: number; result?: unknown; error?: InitError; durationMs?: number }) => {
        if (m.type !== 'result' && m.type !== 'error') return;
        const waiting = this.pending.get(m.id as number);
        if (!waiting) return;
        this.pending.delete(m.id as number);
        this.firstInvokeMs ??= m.durationMs;
        if (m.type === 'result') waiting.resolve(m.result);
        else waiting.reject(new FunctionError(spec.name, m.error?.name ?? 'Error', m.error?.message ?? ''));
      },
    );
    child.on('exit', (code) => {
      for (const waiting of this.pending.values()) {
        waiting.reject(new FunctionError(spec.name, 'Runtime.ExitError', `the process exited (${code})`));
      }
      this.pending.clear();
    });
  }

  /**
   * Starts the environment and waits for the bundle's import. Resolves with the process, or
   * with the init error when the cold start failed.
   */
  static start(
    spec: FunctionSpec,
    lambdaEnv: Readonly<Record<string, string>>,
  ): Promise<{ process: FunctionProcess } | { initError: InitError; output: string[] }> {
    const spawnedAt = performance.now();
    const child = fork(runtime, [spec.bundle, spec.exportName], {
      env: {
        // Nothing of the parent's environment: only what the template and Lambda give.
        PATH: process.env.PATH ?? '',
        ...lambdaEnv,
        AWS_LAMBDA_FUNCTION_NAME: spec.name,
        AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(spec.memoryMb),
        AWS_ACCESS_KEY_ID: spec.logicalId,
        AWS_SECRET_ACCESS_KEY: 'rehearsal',
        ...spec.environment,
      },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    const proc = new FunctionProcess(spec, child);
    const keep = (chunk: Buffer) => {
      proc.output.push(chunk.toString());
      if (proc.output.length > 2_000) proc.output.splice(0, 1_000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    return new Promise((resolve, reject) => {
      child.once('error', reject);
      child.on('message', function first(m: { type: string; error?: InitError }) {
        if (m.type === 'ready') {
          child.off('message', first);
          proc.initMs = performance.now() - spawnedAt;
          resolve({ process: proc });
        } else if (m.type === 'init-error') {
          child.off('message', first);
          resolve({ initError: m.error as InitError, output: proc.output });
        }
      });
    });
  }

  /** One invocation (queued behind the ones before it); throws FunctionError when the handler throws. */
  invoke(event: unknown): Promise<unknown> {
    const run = () =>
      new Promise<unknown>((resolve, reject) => {
        const id = this.nextId++;
        this.pending.set(id, { resolve, reject });
        this.child.send({
          type: 'invoke',
          id,
          event,
          timeoutMs: this.spec.timeoutMs,
          functionArn: this.spec.arn,
        });
      });
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      this.child.once('exit', () => resolve());
      this.child.kill('SIGTERM');
    });
  }
}
