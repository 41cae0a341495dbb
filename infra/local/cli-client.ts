/** Why a CLI run failed; each code has its exit status (see `exitCodes`). */
export type CliErrorCode = 'usage' | 'request' | 'unreachable';

/** Exit statuses: 2 for arguments the CLI refuses, 1 for a request that failed or got a 4xx/5xx. */
export const exitCodes: Readonly<Record<CliErrorCode, number>> = { usage: 2, request: 1, unreachable: 1 };

/** The one error type of the ops CLI; its message is what the user reads on stderr. */
export class CliError extends Error {
  constructor(
    readonly code: CliErrorCode,
    message: string,
    options?: { cause?: unknown; status?: number },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.status = options?.status;
  }
  /** The HTTP status when the server answered with an error. */
  readonly status: number | undefined;
}

/** The fetch the CLI calls: global `fetch` in production, a fake in unit tests. */
export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

// Error codes of undici's `fetch failed` causes that mean "nothing is listening there".
const unreachableCodes = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNRESET', 'EHOSTUNREACH']);

const causeCode = (err: unknown): string | undefined => {
  for (let e: unknown = err, depth = 0; e && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
};

/**
 * The pipeline's HTTP API as the CLI calls it. Translates every failure into a `CliError`
 * carrying the server's own error text, so commands only handle the happy path.
 */
export class OpsClient {
  constructor(
    readonly baseUrl: string,
    private readonly fetchFn: FetchLike,
    private readonly timeoutMs = 30_000,
  ) {}

  get<T>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  post<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>('POST', path, body);
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const url = this.baseUrl.replace(/\/+$/, '') + path;
    let response: Response;
    try {
      response = await this.fetchFn(url, {
        method,
        headers: body === undefined ? { accept: 'application/json' } : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      const name = (err as { name?: unknown }).name;
      if (name === 'TimeoutError' || name === 'AbortError') {
        throw new CliError('unreachable', `${method} ${url}: no answer within ${this.timeoutMs / 1000} s`, {
          cause: err,
        });
      }
      const code = causeCode(err);
      const why = code ?? (err instanceof Error ? err.message : String(err));
      const hint =
        code === undefined || unreachableCodes.has(code) ? ': is `npm start` running? (or pass --url)' : '';
      throw new CliError('unreachable', `cannot reach the pipeline at ${this.baseUrl} (${why})${hint}`, {
        cause: err,
      });
    }
    const text = await response.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (!response.ok) {
      throw new CliError(
        'request',
        `${method} ${path} failed: ${response.status} ${serverError(json, text)}`,
        {
          status: response.status,
        },
      );
    }
    if (json === undefined) {
      throw new CliError(
        'request',
        `${method} ${path}: the server answered ${response.status} without a JSON body`,
      );
    }
    return json as T;
  }
}

/** The server's error text: `{error, fields?, currentStatus?}` from the tasks and ops APIs, else the raw body. */
function serverError(json: unknown, text: string): string {
  if (json && typeof json === 'object' && typeof (json as { error?: unknown }).error === 'string') {
    const e = json as { error: string; fields?: unknown; currentStatus?: unknown };
    const lines = [e.error];
    if (typeof e.currentStatus === 'string') lines[0] += ` (current status: ${e.currentStatus})`;
    if (Array.isArray(e.fields)) {
      for (const f of e.fields as { path?: unknown; message?: unknown }[]) {
        const path = Array.isArray(f?.path) ? f.path.join('.') : String(f?.path ?? '');
        lines.push(`  ${path || '(body)'}: ${String(f?.message ?? '')}`);
      }
    }
    return lines.join('\n');
  }
  const raw = text.trim();
  return raw === '' ? '(empty body)' : raw.slice(0, 500);
}
