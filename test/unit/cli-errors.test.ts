import { describe, expect, it } from 'vitest';
import { runCli, usage } from '../../infra/local/cli';
import type { FetchLike } from '../../infra/local/cli-client';

// Bad arguments exit 2 before any request; failed requests exit 1 with the server's own words.

const taskId = '3f1c2b7e-8d4a-4c1e-9b0a-5e6f7a8b9c0d';

async function run(argv: string[], fetch?: FetchLike, env: Record<string, string> = {}) {
  let stdout = '';
  let stderr = '';
  const requests: string[] = [];
  const slept: number[] = [];
  const code = await runCli(argv, {
    sleep: async (ms) => void slept.push(ms),
    fetch: async (url, init) => {
      requests.push(`${init?.method ?? 'GET'} ${url}`);
      if (!fetch) throw new Error('this test expects no request');
      return fetch(url, init);
    },
    env,
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  });
  return { code, stdout, stderr, requests, slept };
}

const answer =
  (status: number, body: string, contentType = 'application/json'): FetchLike =>
  async () =>
    new Response(body, { status, headers: { 'content-type': contentType } });

describe('bad arguments', () => {
  it.each([
    [[], 'no command given'],
    [['frobnicate'], 'unknown command "frobnicate"'],
    [['tasks'], 'tasks: which one? create, approve, withdraw, show'],
    [
      ['tasks', 'delete', taskId],
      'unknown command "tasks delete"; tasks commands: create, approve, withdraw, show',
    ],
    [['status', '--verbose'], "Unknown option '--verbose'"],
    [['status', '--title', 'x'], 'status does not take --title'],
    [['tasks', 'create'], 'tasks create needs --title'],
    [['tasks', 'create', '--title'], "Option '--title <value>' argument missing"],
    [['tasks', 'approve', taskId, '--by', 'rita'], "Unknown option '--by'"],
    [['tasks', 'approve'], 'tasks approve: missing <taskId>'],
    [['tasks', 'show', taskId, 'extra'], 'tasks show: unexpected argument "extra"'],
    [['tasks', 'show', '../ops/status'], 'task id "../ops/status" is not a UUID'],
    [['inbox', 'dead'], 'inbox dead needs --consumer'],
    [['inbox', 'dead', '--consumer', 'search'], 'unknown consumer "search"; one of index, notify, archive'],
    [['outbox', 'dead', '--redrive', taskId, '--all'], '--redrive and --all exclude each other'],
    [['dead-letters', '--redrive', ''], '--redrive needs an id'],
    [['status', '--url', 'not a url'], '--url "not a url" is not a URL'],
    [['status', '--url', 'ftp://host'], '--url "ftp://host" is not an http(s) URL'],
  ])('%j exits 2 with "%s" and sends nothing', async (argv, message) => {
    const r = await run(argv);

    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`pipeline: ${message}`);
    expect(r.stderr).toContain('Run `pipeline --help` for usage.');
    expect(r.stdout).toBe('');
    expect(r.requests).toEqual([]);
  });

  it('refuses a PORT that is not a port', async () => {
    const r = await run(['status'], undefined, { PORT: 'eighty' });

    expect(r.code).toBe(2);
    expect(r.stderr).toContain('PORT=eighty is not a TCP port');
  });

  it('--help prints the usage on stdout, exits 0 and sends nothing, wherever it appears', async () => {
    for (const argv of [
      ['--help'],
      ['-h'],
      ['help'],
      ['tasks', 'approve', '--help'],
      ['frobnicate', '--help'],
    ]) {
      const r = await run(argv);
      expect(r).toEqual({ code: 0, stdout: usage, stderr: '', requests: [], slept: [] });
    }
    expect(usage).toContain('tasks show <taskId>');
    expect(usage).toContain('inbox dead --consumer <index|notify|archive>');
  });
});

describe('failed requests', () => {
  it('a 409 prints the error and the current status, exit 1', async () => {
    const r = await run(
      ['tasks', 'approve', taskId],
      answer(409, JSON.stringify({ error: 'task is not pending review', currentStatus: 'approved' })),
    );

    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `pipeline: POST /tasks/${taskId}/approve failed: 409 task is not pending review (current status: approved)\n`,
    );
    expect(r.stdout).toBe('');
  });

  it('a 400 lists each bad field the server names', async () => {
    const r = await run(
      ['tasks', 'create', '--title', ' '],
      answer(
        400,
        JSON.stringify({
          error: 'invalid request',
          fields: [{ path: 'title', message: 'must not be empty' }],
        }),
      ),
    );

    expect(r.code).toBe(1);
    expect(r.stderr).toBe('pipeline: POST /tasks failed: 400 invalid request\n  title: must not be empty\n');
  });

  it('a 404 from the ops API (an id that is not dead) exits 1 with its text', async () => {
    const r = await run(
      ['outbox', 'dead', '--redrive', taskId],
      answer(404, JSON.stringify({ error: `no dead outbox event ${taskId}` })),
    );

    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`404 no dead outbox event ${taskId}`);
  });

  it('a 5xx is tried four times with a growing backoff; the last one without a JSON body prints as text', async () => {
    const r = await run(['status'], answer(502, 'Bad Gateway', 'text/plain'));

    expect(r.code).toBe(1);
    expect(r.stderr).toBe('pipeline: GET /ops/status failed: 502 Bad Gateway\n');
    expect(r.requests).toHaveLength(4);
    expect(r.slept).toHaveLength(3);
    expect(r.slept.every((ms, i) => ms >= 0 && ms <= 500 * 2 ** i)).toBe(true);
  });

  it('a 429 is waited out as its Retry-After says, then the answer is the next one', async () => {
    const answers = [
      new Response('{"error":"Too Many Requests"}', { status: 429, headers: { 'retry-after': '2' } }),
      new Response(JSON.stringify({ error: 'internal error' }), { status: 503 }),
      new Response(JSON.stringify({ taskId, status: 'approved', version: 2, eventId: taskId }), {
        status: 200,
      }),
    ];
    const r = await run(['tasks', 'approve', taskId], async () => answers.shift() as Response);

    expect(r.code).toBe(0);
    expect(r.requests).toHaveLength(3);
    expect(r.slept[0]).toBe(2_000);
    expect(r.slept[1]).toBeLessThanOrEqual(1_000);
  });

  it('a 4xx other than 429 is never retried', async () => {
    const r = await run(['status'], answer(403, JSON.stringify({ message: 'Forbidden' })));

    expect(r.code).toBe(1);
    expect(r.requests).toHaveLength(1);
    expect(r.slept).toEqual([]);
  });

  it('a 200 that is not JSON is a failure too', async () => {
    const r = await run(['status'], answer(200, '<html>someone else</html>', 'text/html'));

    expect(r.code).toBe(1);
    expect(r.stderr).toContain('GET /ops/status: the server answered 200 without a JSON body');
  });

  it('connection refused asks whether `npm start` is running', async () => {
    const refused: FetchLike = async () => {
      throw new TypeError('fetch failed', {
        cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
      });
    };

    const r = await run(['status'], refused, { PORT: '3999' });

    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'pipeline: cannot reach the pipeline at http://127.0.0.1:3999 (ECONNREFUSED): is `npm start` running? (or pass --url)\n',
    );
  });

  it('a server that never answers times out with a message instead of hanging', async () => {
    const silent: FetchLike = async (_url, init) => {
      const error = new Error('The operation was aborted due to timeout');
      error.name = 'TimeoutError';
      expect(init?.signal).toBeInstanceOf(AbortSignal); // the CLI always bounds its requests
      throw error;
    };

    const r = await run(['status'], silent);

    expect(r.code).toBe(1);
    expect(r.stderr).toBe('pipeline: GET http://127.0.0.1:3000/ops/status: no answer within 30 s\n');
  });
});
