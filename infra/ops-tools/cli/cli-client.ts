import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { backoffDelay, sleep } from '../../../shared/db/retry';
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

/** The part of a fetch `Response` the CLI reads: a `Response` is one, and so is `nodeHttpFetch`'s answer. */
export interface HttpAnswer {
  readonly status: number;
  readonly ok: boolean;
  readonly headers: { get(name: string): string | null };
  text(): Promise<string>;
  readonly body?: { cancel(): Promise<void> } | null;
}

/** The fetch the CLI calls: `nodeHttpFetch` in production, a fake (or global `fetch`) in tests. */
export type FetchLike = (input: string, init?: RequestInit) => Promise<HttpAnswer>;

/**
 * A fetch on node:http and node:https. Node 20's global `fetch` loads undici on its first call,
 * which took longer than the rest of a `pipeline status` run together (0.8 s of 1.9 s on a busy
 * machine, against 0.3 s for `node -e 0`); node:http is part of Node's startup snapshot.
 * Takes what the CLI sends: a method, string headers, a string body and an abort signal.
 */
export const nodeHttpFetch: FetchLike = (input, init = {}) =>
  new Promise((resolve, reject) => {
    const url = new URL(input);
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const headers = Object.fromEntries(
      Object.entries((init.headers ?? {}) as Record<string, string>).map(([k, v]) => [k, String(v)]),
    );
    const body = typeof init.body === 'string' ? init.body : undefined;
    if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
    const req = send(
      url,
      { method: init.method ?? 'GET', headers, signal: init.signal ?? undefined },
      (res) => resolve(answerOf(res)),
    );
    req.on('error', (err) => reject(init.signal?.aborted ? (init.signal.reason ?? err) : err));
    req.end(body);
  });

function answerOf(res: IncomingMessage): HttpAnswer {
  const status = res.statusCode ?? 0;
  const text = new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
  });
  // Read or dropped, the answer is consumed either way: no unhandled rejection if never read.
  text.catch(() => {});
  return {
    status,
    ok: status >= 200 && status < 300,
    headers: {
      get: (name) => {
        const value = res.headers[name.toLowerCase()];
        return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
      },
    },
    text: () => text,
    body: {
      cancel: async () => {
        res.destroy();
      },
    },
  };
}

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

/** How the CLI retries a 429 or a 5xx; the sleep and the jitter are injectable for tests. */
export interface OpsClientOptions {
  /** Milliseconds a request may take. @default 30,000 */
  readonly timeoutMs?: number;
  /** Tries in all, the first included, for a 429 or a 5xx. @default 4 */
  readonly attempts?: number;
  /** Backoff (full jitter) when the answer names no Retry-After. @default 500 ms, up to 8 s */
  readonly backoff?: { readonly baseMs: number; readonly maxMs: number };
  readonly sleep?: (ms: number) => Promise<void>;
  readonly random?: () => number;
}

/** The longest Retry-After the CLI honours, in ms: a longer one fails the command with the server's answer. */
const maxRetryAfterMs = 30_000;

/**
 * The seconds of a `Retry-After` header (RFC 9110, 10.2.3: delay-seconds or an HTTP date), in
 * ms; undefined when absent or unreadable.
 */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1_000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Answers worth another try: the API Gateway throttle (429) and server errors (5xx). */
const retryable = (status: number) => status === 429 || status >= 500;

/**
 * The pipeline's HTTP API as the CLI calls it. Translates every failure into a `CliError`
 * carrying the server's own error text, so commands only handle the happy path. A 429 or a
 * 5xx is tried again (at most `attempts` in all), after the answer's `Retry-After` when it has
 * one, else after a full-jitter backoff: a throttled stage or a resuming database is waited
 * out, not reported. A POST retried after a 5xx may find its change made by the first try: the
 * task commands then answer 409 with the current status, which the CLI shows; a create is sent
 * with an `Idempotency-Key` its retries repeat, so it makes one task however often it is sent.
 */
export class OpsClient {
  private readonly timeoutMs: number;
  private readonly attempts: number;
  private readonly backoff: { readonly baseMs: number; readonly maxMs: number };
  private readonly pause: (ms: number) => Promise<void>;
  private readonly random: () => number;

  constructor(
    readonly baseUrl: string,
    private readonly fetchFn: FetchLike,
    options: OpsClientOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.attempts = Math.max(1, options.attempts ?? 4);
    this.backoff = options.backoff ?? { baseMs: 500, maxMs: 8_000 };
    this.pause = options.sleep ?? sleep;
    this.random = options.random ?? Math.random;
  }

  get<T>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  /** POSTs `body`; `headers` go with every try (an `Idempotency-Key` its retries must repeat). */
  post<T>(path: string, body: unknown, headers: Readonly<Record<string, string>> = {}): Promise<T> {
    return this.request<T>('POST', path, body, headers);
  }

  private async request<T>(
    method: string,
    path: string,
    body?: unknown,
    headers: Readonly<Record<string, string>> = {},
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const response = await this.send(method, path, body, headers);
      if (retryable(response.status) && attempt < this.attempts) {
        const told = retryAfterMs(response.headers.get('retry-after'));
        if (told === undefined || told <= maxRetryAfterMs) {
          await response.body?.cancel();
          await this.pause(told ?? backoffDelay(attempt, this.backoff, this.random));
          continue;
        }
      }
      return this.read<T>(method, path, response);
    }
  }

  private async send(
    method: string,
    path: string,
    body: unknown,
    headers: Readonly<Record<string, string>>,
  ): Promise<HttpAnswer> {
    const url = this.baseUrl.replace(/\/+$/, '') + path;
    try {
      return await this.fetchFn(url, {
        method,
        headers: {
          ...headers,
          ...(body === undefined ? { accept: 'application/json' } : { 'content-type': 'application/json' }),
        },
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
  }

  private async read<T>(method: string, path: string, response: HttpAnswer): Promise<T> {
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
