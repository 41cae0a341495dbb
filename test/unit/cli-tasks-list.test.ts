import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { runCli } from '../../infra/ops-tools/cli/cli';

// `tasks list` and `tasks reject` against a stub HTTP server speaking the tasks API's contract
// (GET /tasks?status&limit&cursor, POST /tasks/{id}/reject): the CLI's real fetch, a real socket.

const taskId = '3f1c2b7e-8d4a-4c1e-9b0a-5e6f7a8b9c0d';
const eventId = '0b9f6c1e-2a3d-4e5f-8a9b-0c1d2e3f4a5b';

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly body: string;
}
let server: Server;
let url: string;
const seen: Seen[] = [];
let reply: (req: Seen) => { status: number; body: unknown } = () => ({ status: 500, body: {} });

const read = (req: IncomingMessage) =>
  new Promise<string>((resolve) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => resolve(body));
  });

beforeAll(async () => {
  server = createServer(async (req, res) => {
    const request = { method: req.method ?? '', url: req.url ?? '', body: await read(req) };
    seen.push(request);
    const { status, body } = reply(request);
    res.writeHead(status, { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

beforeEach(() => {
  seen.length = 0;
});

async function run(argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(['--url', url, ...argv], {
    fetch: globalThis.fetch,
    sleep: async () => {},
    env: {},
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  });
  return { code, stdout, stderr };
}

const listed = (n: number, status = 'pending_review') => ({
  taskId: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
  title: `A rather long title for task number ${n}, longer than the room an 80-column table has`,
  assignee: 'alice',
  status,
  version: 1,
  createdAt: '2026-05-04T10:00:00.000Z',
  updatedAt: '2026-05-04T10:05:00.000Z',
});

describe('tasks list', () => {
  it('GETs /tasks with the filters given and prints id, status and title within 80 columns', async () => {
    reply = () => ({ status: 200, body: { tasks: [listed(1), listed(2)], nextCursor: 'eyJrIjoxfQ' } });

    const r = await run(['tasks', 'list', '--status', 'pending', '--limit', '2']);

    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual(['GET /tasks?status=pending&limit=2']);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^task\s+status\s+title$/);
    // The title is cut, with an ellipsis, to what 80 columns leave it.
    expect(lines[1]).toBe(`${listed(1).taskId}  pending_review  A rather long title for t…`);
    expect(lines[1]).toHaveLength(80);
    expect(lines.every((l) => l.length <= 80)).toBe(true);
    expect(lines.slice(-2)).toEqual(['next page: add --cursor', 'eyJrIjoxfQ']);
  });

  it('--cursor asks for the next page; --wide shows every field; -o json prints the answer', async () => {
    const page = { tasks: [listed(3, 'rejected')], nextCursor: null };
    reply = () => ({ status: 200, body: page });

    const wide = await run(['tasks', 'list', '--cursor', 'eyJrIjoxfQ', '--wide']);
    const json = await run(['tasks', 'list', '-o', 'json']);

    expect(seen.map((s) => s.url)).toEqual(['/tasks?cursor=eyJrIjoxfQ', '/tasks']);
    expect(wide.stdout).toMatch(/^task\s+status\s+version\s+assignee\s+created\s+updated\s+title$/m);
    expect(wide.stdout).toContain(`rejected  1        alice     2026-05-04T10:00:00.000Z`);
    expect(wide.stdout).toContain('than the room an 80-column table has\n');
    expect(wide.stdout).not.toContain('next page');
    expect(JSON.parse(json.stdout)).toEqual(page);
  });

  it('says so when there is nothing to list', async () => {
    reply = () => ({ status: 200, body: { tasks: [], nextCursor: null } });

    expect((await run(['tasks', 'list', '--status', 'rejected'])).stdout).toBe('no rejected tasks\n');
    expect((await run(['tasks', 'list'])).stdout).toBe('no tasks\n');
  });

  it('--status takes pending_review, the name every output and the API use, and pending as its alias', async () => {
    reply = () => ({ status: 200, body: { tasks: [listed(1)], nextCursor: null } });

    const named = await run(['tasks', 'list', '--status', 'pending_review']);
    const alias = await run(['tasks', 'list', '--status', 'pending']);
    const help = await run(['tasks', 'list', '--help']);

    expect(named).toMatchObject({ code: 0, stderr: '' });
    expect(alias).toMatchObject({ code: 0, stderr: '' });
    expect(seen.map((s) => s.url)).toEqual(['/tasks?status=pending_review', '/tasks?status=pending']);
    expect(named.stdout).toContain(`${listed(1).taskId}  pending_review  `);
    expect(help.stdout.replace(/\s+/g, ' ')).toContain(
      '(choices: "pending_review", "pending", "approved", "withdrawn", "rejected")',
    );
  });

  it.each([
    [['--limit', '0'], '--limit "0" is not a whole number from 1 to 100'],
    [['--limit', '101'], '--limit "101" is not a whole number from 1 to 100'],
    [['--status', 'published'], "option '--status <s>' argument 'published' is invalid."],
  ])('%j is refused with exit 2 before any request', async (args, message) => {
    const r = await run(['tasks', 'list', ...args]);

    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`pipeline: ${message}`);
    expect(seen).toEqual([]);
  });

  it("a 400 from the server exits 1 with the server's words", async () => {
    reply = () => ({ status: 400, body: { error: 'invalid cursor' } });

    const r = await run(['tasks', 'list', '--cursor', 'forged']);

    expect(r.code).toBe(1);
    expect(r.stderr).toBe('pipeline: GET /tasks?cursor=forged failed: 400 invalid cursor\n');
  });
});

describe('tasks reject', () => {
  it('POSTs the reason and prints the new version and event', async () => {
    reply = () => ({ status: 200, body: { taskId, status: 'rejected', version: 2, eventId } });

    const r = await run(['tasks', 'reject', taskId, '--reason', 'off brand']);

    expect(r).toEqual({
      code: 0,
      stdout: `rejected task ${taskId} (version 2, event ${eventId})\n`,
      stderr: '',
    });
    expect(seen).toEqual([
      { method: 'POST', url: `/tasks/${taskId}/reject`, body: JSON.stringify({ reason: 'off brand' }) },
    ]);
  });

  it('a 409 exits 1 naming the current status; a 404 exits 1 too', async () => {
    reply = () => ({ status: 409, body: { error: 'task is not pending review', currentStatus: 'approved' } });
    const conflict = await run(['tasks', 'reject', taskId, '--reason', 'late']);
    reply = () => ({ status: 404, body: { error: `no task ${taskId}` } });
    const missing = await run(['tasks', 'reject', taskId, '--reason', 'late']);

    expect(conflict.code).toBe(1);
    expect(conflict.stderr).toContain('409 task is not pending review (current status: approved)');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`404 no task ${taskId}`);
  });

  it.each([
    [['--reason', ''], '--reason must be 1 to 1000 characters'],
    [['--reason', 'x'.repeat(1001)], '--reason must be 1 to 1000 characters'],
    [[], "required option '--reason <r>' not specified"],
  ])('%j is refused with exit 2 before any request', async (args, message) => {
    const r = await run(['tasks', 'reject', taskId, ...args]);

    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`pipeline: ${message}`);
    expect(seen).toEqual([]);
  });
});
