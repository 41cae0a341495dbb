import { describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { runCli } from '../../infra/ops-tools/cli/cli';
import type { FetchLike } from '../../infra/ops-tools/cli/cli-client';

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
    [['frobnicate'], "unknown command 'frobnicate'", 'pipeline'],
    [['stauts'], "unknown command 'stauts' (did you mean status?)", 'pipeline'],
    [['tasks', 'delete', taskId], "unknown command 'delete'", 'pipeline tasks'],
    [['tasks', 'lsit'], "unknown command 'lsit' (did you mean list?)", 'pipeline tasks'],
    [['status', '--verbose'], "unknown option '--verbose'", 'pipeline status'],
    [['status', '--title', 'x'], "unknown option '--title'", 'pipeline status'],
    [['tasks', 'create'], "required option '--title <t>' not specified", 'pipeline tasks create'],
    [['tasks', 'create', '--title'], "option '--title <t>' argument missing", 'pipeline tasks create'],
    [['tasks', 'approve', taskId, '--by', 'rita'], "unknown option '--by'", 'pipeline tasks approve'],
    [['tasks', 'approve'], "missing required argument 'taskId'", 'pipeline tasks approve'],
    [
      ['tasks', 'show', taskId, 'extra'],
      "too many arguments for 'show'. Expected 1 argument but got 2.",
      'pipeline tasks show',
    ],
    [['tasks', 'show', '../ops/status'], 'task id "../ops/status" is not a UUID', 'pipeline tasks show'],
    [['inbox', 'dead'], "required option '--consumer <name>' not specified", 'pipeline inbox dead'],
    [
      ['inbox', 'dead', '--consumer', 'search'],
      `option '--consumer <name>' argument 'search' is invalid. Allowed choices are ${topology.consumerNames.join(', ')}.`,
      'pipeline inbox dead',
    ],
    [
      ['outbox', 'dead', '--redrive', taskId, '--all'],
      "option '--redrive <eventId>' cannot be used with option '--all'",
      'pipeline outbox dead',
    ],
    // A bad id exits 2 before any request wherever an id must be a UUID, as in `tasks show`.
    [['outbox', 'dead', '--redrive', 'nope'], 'event id "nope" is not a UUID', 'pipeline outbox dead'],
    [['dead-letters', '--redrive', ''], '--redrive needs an id', 'pipeline dead-letters'],
    [['status', '--url', 'not a url'], '--url "not a url" is not a URL', 'pipeline status'],
    [['status', '--url', 'ftp://host'], '--url "ftp://host" is not an http(s) URL', 'pipeline status'],
    [['status', '-o', 'yaml'], "option '-o, --output <format>' argument 'yaml' is invalid.", 'pipeline'],
  ])('%j exits 2 with "%s" and sends nothing', async (argv, message, command) => {
    const r = await run(argv);

    expect(r.code).toBe(2);
    // One style for every usage error: one `pipeline: ` line, then where the help is.
    expect(r.stderr).toBe(
      `pipeline: ${message}${message.endsWith('invalid.') ? ' Allowed choices are table, json.' : ''}\nRun \`${command} --help\` for usage.\n`,
    );
    expect(r.stdout).toBe('');
    expect(r.requests).toEqual([]);
  });

  it('no command, or a group without its command, prints that help on stderr and exits 2', async () => {
    for (const [argv, usageLine] of [
      [[], 'Usage: pipeline [options] [command]'],
      [['tasks'], 'Usage: pipeline tasks [options] [command]'],
    ] as const) {
      const r = await run([...argv]);
      expect(r.code).toBe(2);
      expect(r.stderr.startsWith(usageLine)).toBe(true);
      expect(r.stdout).toBe('');
      expect(r.requests).toEqual([]);
    }
  });

  it('refuses a PORT that is not a port', async () => {
    const r = await run(['status'], undefined, { PORT: 'eighty' });

    expect(r.code).toBe(2);
    expect(r.stderr).toContain('PORT=eighty is not a TCP port');
  });

  it("--help prints that command's help on stdout, exits 0 and sends nothing, wherever it appears", async () => {
    const top = await run(['--help']);
    expect(top).toMatchObject({ code: 0, stderr: '', requests: [] });
    expect(top.stdout).toMatch(/^Usage: pipeline \[options\] \[command\]/);
    for (const argv of [['-h'], ['help'], ['frobnicate', '--help']]) {
      expect(await run(argv)).toEqual({ code: 0, stdout: top.stdout, stderr: '', requests: [], slept: [] });
    }
    const approve = await run(['tasks', 'approve', '--help']);
    expect(approve).toMatchObject({ code: 0, stderr: '', requests: [] });
    expect(approve.stdout).toMatch(/^Usage: pipeline tasks approve \[options\] <taskId>/);
    expect((await run(['tasks', 'approve', taskId, '-h'])).stdout).toBe(approve.stdout);
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
