import { describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { runCli } from '../../infra/ops-tools/cli/cli';
import type { FetchLike } from '../../infra/ops-tools/cli/cli-client';
import { type EventType, ruleNameOf } from '../../shared/events/event-types';

// Each command against a fake fetch: the requests it makes (method, URL, body) and what it prints.

interface Call {
  readonly method: string;
  readonly url: string;
  readonly path: string;
  readonly body: unknown;
  readonly headers: Record<string, string>;
}
type Reply = { status?: number; body?: unknown };

function fakeApi(answer: (call: Call) => Reply) {
  const calls: Call[] = [];
  const fetch: FetchLike = async (url, init) => {
    const u = new URL(url);
    const call = {
      method: init?.method ?? 'GET',
      url,
      path: u.pathname + u.search,
      body: init?.body === undefined ? undefined : JSON.parse(String(init.body)),
      headers: Object.fromEntries(new Headers(init?.headers).entries()),
    };
    calls.push(call);
    const reply = answer(call);
    return new Response(JSON.stringify(reply.body ?? {}), {
      status: reply.status ?? 200,
      headers: { 'content-type': 'application/json' },
    });
  };
  return { fetch, calls };
}

async function run(
  argv: string[],
  fetch: FetchLike,
  opts: { env?: Record<string, string>; tty?: boolean } = {},
) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    fetch,
    sleep: async () => {},
    env: opts.env ?? {},
    stdout: { write: (s: string) => (stdout += s), isTTY: opts.tty },
    stderr: { write: (s: string) => (stderr += s), isTTY: opts.tty },
  });
  return { code, stdout, stderr };
}

const taskId = '3f1c2b7e-8d4a-4c1e-9b0a-5e6f7a8b9c0d';
const eventA = '0b9f6c1e-2a3d-4e5f-8a9b-0c1d2e3f4a5b';
const eventW = '7d8e9f0a-1b2c-4d3e-9f4a-5b6c7d8e9f0a';

const status = {
  tasks: { pending_review: 2, approved: 5, rejected: 0, withdrawn: 1 },
  outbox: { pending: 1, delivered: 6, dead: 1, oldestPendingAgeSeconds: 125 },
  consumers: {
    index: {
      processed: 6,
      inProgress: 0,
      failed: 0,
      dead: 0,
      oldestLeaseSeconds: null,
      oldestRetryAgeSeconds: null,
    },
    notify: {
      processed: 4,
      inProgress: 0,
      failed: 0,
      dead: 1,
      oldestLeaseSeconds: null,
      oldestRetryAgeSeconds: null,
    },
    archive: {
      processed: 5,
      inProgress: 2,
      failed: 1,
      dead: 0,
      oldestLeaseSeconds: 190,
      oldestRetryAgeSeconds: 7500,
    },
  },
  effects: { indexDocuments: 5, notificationsSent: 4, archivedObjects: 5 },
  deadLetters: 0,
  audit: {
    undelivered: { index: 0, notify: 0, archive: 3 },
    lastRunAt: '2026-05-04T10:01:00.000Z',
    behindSeconds: 0,
  },
  alarms: { oldestPendingAge: 'OK', outboxDead: 'ALARM', 'inbox-dead': 'ALARM', deadLetters: 'OK' },
  relay: { lastRunAt: '2026-05-04T10:00:00.000Z', errors: 0 },
};

describe('status', () => {
  it('reads a blank PORT as unset, as npm start does: port 3000', async () => {
    for (const blank of ['', '  ']) {
      const api = fakeApi(() => ({ body: status }));

      const r = await run(['status'], api.fetch, { env: { PORT: blank } });

      expect(r.code, JSON.stringify(blank)).toBe(0);
      expect(api.calls.map((c) => c.url)).toEqual(['http://127.0.0.1:3000/ops/status']);
    }
  });

  it('reads /ops/status on 127.0.0.1:$PORT and prints the figures and each alarm', async () => {
    const api = fakeApi(() => ({ body: status }));

    const r = await run(['status'], api.fetch, { env: { PORT: '4123' } });

    expect(r.code).toBe(0);
    expect(api.calls).toMatchObject([
      { method: 'GET', url: 'http://127.0.0.1:4123/ops/status', path: '/ops/status', body: undefined },
    ]);
    expect(r.stdout).toContain('tasks         pending_review 2   approved 5   rejected 0   withdrawn 1');
    expect(r.stdout).toContain('outbox        pending 1   delivered 6   dead 1   oldest pending 2m 05s');
    expect(r.stdout).toMatch(/notify\s+4\s+0\s+0\s+1\s+-\s+-\s+0/);
    // The design's three inbox figures per consumer, and what the audit found missing.
    expect(r.stdout).toMatch(
      /inbox\s+processed\s+in progress\s+failed\s+dead\s+lease age\s+retry age\s+undelivered/,
    );
    expect(r.stdout).toMatch(/archive\s+5\s+2\s+1\s+0\s+3m 10s\s+2h 05m\s+3/);
    expect(r.stdout).toContain('audit         last run 2026-05-04T10:01:00.000Z   behind 0s');
    expect(r.stdout).toMatch(/archived objects\s+5/);
    expect(r.stdout).toContain('alarms        2 in ALARM');
    expect(r.stdout).toContain('  ALARM  outboxDead');
    expect(r.stdout).toContain('  OK     oldestPendingAge');
    expect(r.stdout).not.toContain('\u001b['); // no colour when stdout is not a terminal
    expect(r.stderr).toBe('');
  });

  it('names each effect counter by the label its consumer declares', async () => {
    const counters = topology.registry.flatMap((c) => Object.entries(c.counters));
    const effects = Object.fromEntries(counters.map(([name], i) => [name, 100 + i]));
    const api = fakeApi(() => ({ body: { ...status, effects } }));

    const r = await run(['status'], api.fetch);

    expect(counters.length).toBeGreaterThan(0);
    for (const [name, counter] of counters) {
      expect(r.stdout).toMatch(new RegExp(`\\n\\s*${counter.label}\\s+${effects[name]}\\n`));
      expect(r.stdout).not.toContain(name);
    }
  });

  it('names a component that is down first, with its cause, and what could not be read', async () => {
    const partial = {
      ...status,
      components: {
        postgres: { up: true },
        dynamo: { up: false, cause: 'the DynamoDB engine exited (1)', since: '2026-05-04T10:02:00.000Z' },
        bus: { up: true },
      },
      consumers: null,
      effects: null,
      alarms: { oldestPendingAge: 'OK', 'inbox-dead-index': 'INSUFFICIENT_DATA' },
    };
    const api = fakeApi(() => ({ body: partial }));

    const r = await run(['status'], api.fetch);

    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe(
      'dynamo DOWN   the DynamoDB engine exited (1) (since 2026-05-04T10:02:00.000Z)',
    );
    expect(r.stdout).toContain('tasks         pending_review 2');
    expect(r.stdout).toContain('alarms        1 without data');
    expect(r.stdout).not.toContain('all OK');
  });

  it('says how many bus journal lines a start kept aside, and where, only when there are some', async () => {
    const kept = { ...status, journal: { linesKeptAside: 2, file: '/data/bus/journal.damaged.jsonl' } };
    const none = { ...status, journal: { linesKeptAside: 0, file: '/data/bus/journal.damaged.jsonl' } };

    const withLines = await run(['status'], fakeApi(() => ({ body: kept })).fetch);
    const without = await run(['status'], fakeApi(() => ({ body: none })).fetch);

    expect(withLines.stdout).toMatch(
      /bus journal\s+2 unreadable line\(s\) kept aside\s+in \/data\/bus\/journal\.damaged\.jsonl/,
    );
    expect(without.stdout).not.toContain('bus journal');
  });

  it('--json prints the server document as one JSON document; --url replaces the default', async () => {
    const api = fakeApi(() => ({ body: status }));

    const r = await run(['--url', 'http://pipeline.test:8080/', 'status', '--json'], api.fetch);

    expect(r.code).toBe(0);
    expect(api.calls.map((c) => c.url)).toEqual(['http://pipeline.test:8080/ops/status']);
    expect(JSON.parse(r.stdout)).toEqual(status);
  });

  it('colours ALARM red and OK green on a terminal, unless NO_COLOR is set', async () => {
    const api = fakeApi(() => ({ body: status }));

    const tty = await run(['status'], api.fetch, { tty: true });
    const noColor = await run(['status'], api.fetch, { tty: true, env: { NO_COLOR: '1' } });

    expect(tty.stdout).toContain('\u001b[31mALARM\u001b[0m  outboxDead');
    expect(tty.stdout).toContain('\u001b[32mOK   \u001b[0m  oldestPendingAge');
    expect(noColor.stdout).not.toContain('\u001b[');
  });
});

describe('tasks', () => {
  it('create POSTs the title, body and assignee and prints the new id', async () => {
    const api = fakeApi(() => ({ status: 201, body: { taskId, status: 'pending_review', version: 1 } }));

    const r = await run(
      ['tasks', 'create', '--title', 'Hello', '--body', 'text', '--assignee', 'alice'],
      api.fetch,
    );

    expect(r.code).toBe(0);
    expect(api.calls).toMatchObject([
      { method: 'POST', path: '/tasks', body: { title: 'Hello', body: 'text', assignee: 'alice' } },
    ]);
    expect(r.stdout).toBe(`created task ${taskId} (pending_review, version 1)\n`);
  });

  it('create sends an Idempotency-Key of its own, and repeats it on its retries only', async () => {
    let answers = 0;
    // The first create is answered 503, then made; the second is made at once.
    const api = fakeApi(() =>
      answers++ === 0
        ? { status: 503, body: { error: 'the database is unavailable; try again later' } }
        : { status: 201, body: { taskId, status: 'pending_review', version: 1 } },
    );

    const first = await run(['tasks', 'create', '--title', 'Hello'], api.fetch);
    const second = await run(['tasks', 'create', '--title', 'Hello'], api.fetch);

    expect([first.code, second.code]).toEqual([0, 0]);
    const keys = api.calls.map((c) => c.headers['idempotency-key']);
    expect(keys).toHaveLength(3);
    expect(keys[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // The retry of the first create sent its key again; the second create is a new one.
    expect(keys[1]).toBe(keys[0]);
    expect(keys[2]).not.toBe(keys[0]);
  });

  it('create sends only the options given, and --json prints the created task', async () => {
    const created = { taskId, status: 'pending_review', version: 1 };
    const api = fakeApi(() => ({ status: 201, body: created }));

    const r = await run(['tasks', 'create', '--title=Only a title', '--json'], api.fetch);

    expect(api.calls[0]?.body).toEqual({ title: 'Only a title' });
    expect(JSON.parse(r.stdout)).toEqual(created);
  });

  it('approve POSTs an empty body: the reviewer is whoever signs the request', async () => {
    const api = fakeApi(() => ({ body: { taskId, status: 'approved', version: 2, eventId: eventA } }));

    const r = await run(['tasks', 'approve', taskId], api.fetch);

    expect(r.code).toBe(0);
    expect(api.calls).toMatchObject([{ method: 'POST', path: `/tasks/${taskId}/approve`, body: {} }]);
    expect(r.stdout).toBe(`approved task ${taskId} (version 2, event ${eventA})\n`);
  });

  it('withdraw POSTs the reason only: the withdrawer is whoever signs the request', async () => {
    const api = fakeApi(() => ({ body: { taskId, status: 'withdrawn', version: 3, eventId: eventW } }));

    const r = await run(['tasks', 'withdraw', taskId, '--reason', 'legal hold'], api.fetch);

    expect(r.code).toBe(0);
    expect(api.calls).toMatchObject([
      {
        method: 'POST',
        path: `/tasks/${taskId}/withdraw`,
        body: { reason: 'legal hold' },
      },
    ]);
    expect(r.stdout).toContain('withdrew task');
  });

  const task = {
    taskId,
    title: 'Spring copy',
    body: null,
    assignee: 'alice',
    status: 'withdrawn',
    version: 3,
    reviewer: 'rita',
    createdAt: '2026-05-04T10:00:00.000Z',
    updatedAt: '2026-05-04T10:05:00.000Z',
  };
  // Each event's inbox states, one per consumer of the topology: those given, and for the others
  // "not received" where a rule routes the event to them, "not routed" where none does.
  const routedTo = (type: EventType) =>
    topology.rules.find((r) => r.name === ruleNameOf(type))?.targets ?? [];
  const approvedStates = { index: 'PROCESSED (1)', notify: 'DEAD (5)' } as Record<string, string>;
  const statesOf = (type: EventType, given: Record<string, string>) =>
    topology.consumerNames.map(
      (c) => [c, given[c] ?? (routedTo(type).includes(c) ? 'not received' : 'not routed')] as const,
    );
  const approved = statesOf(topology.eventTypes.approved, approvedStates);
  const withdrawn = statesOf(topology.eventTypes.withdrawn, {});
  const escaped = (text: string) => text.replace(/[()]/g, '\\$&');
  const trace = {
    taskId,
    events: [
      {
        eventId: eventA,
        eventType: 'content.approved',
        taskId,
        version: 2,
        status: 'delivered',
        attempts: 1,
        createdAt: '2026-05-04T10:01:00.000Z',
        deliveredAt: '2026-05-04T10:01:01.000Z',
        lastError: null,
        consumers: {
          ...Object.fromEntries(topology.consumerNames.map((c) => [c, null])),
          index: { status: 'PROCESSED', attempts: 1, lastError: null, updatedAt: 1777888861000 },
          notify: { status: 'DEAD', attempts: 5, lastError: 'SNS publish failed' },
        },
      },
      {
        eventId: eventW,
        eventType: 'content.withdrawn',
        taskId,
        version: 3,
        status: 'pending',
        attempts: 0,
        createdAt: '2026-05-04T10:05:00.000Z',
        deliveredAt: null,
        lastError: null,
        consumers: Object.fromEntries(topology.consumerNames.map((c) => [c, null])),
      },
    ],
  };

  it("show --wide reads the task and its trace and prints each event with every consumer's inbox state on one line", async () => {
    const api = fakeApi((c) => ({ body: c.path.startsWith('/ops/') ? trace : task }));

    const r = await run(['tasks', 'show', taskId, '--wide'], api.fetch);

    expect(r.code).toBe(0);
    expect(api.calls.map((c) => `${c.method} ${c.path}`)).toEqual([
      `GET /tasks/${taskId}`,
      `GET /ops/tasks/${taskId}/trace`,
    ]);
    expect(r.stdout).toContain('title     Spring copy');
    expect(r.stdout).toContain('status    withdrawn (version 3)');
    const lines = r.stdout.split('\n');
    expect(lines.find((l) => l.startsWith('event '))).toMatch(
      new RegExp(`${topology.consumerNames.join('\\s+')}$`),
    );
    expect(lines.find((l) => l.startsWith(eventA))).toMatch(
      new RegExp(`${approved.map(([, s]) => escaped(s)).join('\\s+')}$`),
    );
    // content.withdrawn is routed to the index only: the others are "not routed", not "missing".
    expect(lines.find((l) => l.startsWith(eventW))).toMatch(
      new RegExp(`pending \\(0\\).*${withdrawn.map(([, s]) => s).join('\\s+')}$`),
    );
    expect(r.stdout).toContain(`${eventA} notify: SNS publish failed`);
  });

  it('show fits 80 columns: each event is a block of `label value` lines', async () => {
    const api = fakeApi((c) => ({ body: c.path.startsWith('/ops/') ? trace : task }));

    const r = await run(['tasks', 'show', taskId], api.fetch);

    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(Math.max(...lines.map((l) => l.length))).toBeLessThanOrEqual(80);
    expect(r.stdout).toContain(`event      ${eventA}\ntype       content.approved\nversion    2\n`);
    const block = (states: readonly (readonly [string, string])[]) =>
      states.map(([c, s]) => `${c.padEnd(11)}${s}`).join('\n');
    expect(r.stdout).toContain(block(approved));
    expect(r.stdout).toContain(block(withdrawn));
    expect(r.stdout).toContain(`${eventA} notify: SNS publish failed`);
  });

  it('show of a rejected task says who rejected it, when, and the whole reason, as for a withdrawal', async () => {
    const reason =
      "Off brand: the banner uses last year's palette and the headline promises a discount that legal has not cleared";
    const rejected = {
      ...task,
      status: 'rejected',
      version: 2,
      rejectedAt: '2026-05-04T10:05:00.000Z',
      rejectReason: reason,
    };
    const withdrawn = {
      ...task,
      withdrawnBy: 'wes',
      withdrawnAt: '2026-05-04T10:06:00.000Z',
      withdrawReason: 'legal hold',
    };
    const noEvents = { taskId, events: [] };
    const api = fakeApi((c) => ({ body: c.path.startsWith('/ops/') ? noEvents : rejected }));
    const other = fakeApi((c) => ({ body: c.path.startsWith('/ops/') ? noEvents : withdrawn }));

    const r = await run(['tasks', 'show', taskId], api.fetch);
    const w = await run(['tasks', 'show', taskId], other.fetch);

    expect(r.code).toBe(0);
    // The GET /tasks/{id} answer names the rejecter as the reviewer.
    expect(r.stdout).toContain(
      'rejected  by rita at 2026-05-04T10:05:00.000Z\n' +
        "reason    Off brand: the banner uses last year's palette and the headline\n" +
        '          promises a discount that legal has not cleared\n',
    );
    expect(Math.max(...r.stdout.split('\n').map((l) => l.length))).toBeLessThanOrEqual(80);
    expect(w.stdout).toContain('withdrawn by wes at 2026-05-04T10:06:00.000Z\nreason    legal hold\n');
  });

  it('show --json prints the task and the trace as one document', async () => {
    const api = fakeApi((c) => ({ body: c.path.startsWith('/ops/') ? trace : task }));

    const r = await run(['tasks', 'show', taskId, '--json'], api.fetch);

    expect(JSON.parse(r.stdout)).toEqual({ task, trace });
  });
});

describe('dead lists', () => {
  const outboxDead = [
    {
      eventId: eventA,
      eventType: 'content.approved',
      aggregateId: taskId,
      attempts: 10,
      lastError: 'ThrottlingException:\nRate exceeded',
      createdAt: '2026-05-04T10:00:00.000Z',
    },
  ];

  it('outbox dead --wide lists the dead events as a table, one line each', async () => {
    const api = fakeApi(() => ({ body: outboxDead }));

    const r = await run(['outbox', 'dead', '--wide'], api.fetch);

    expect(api.calls.map((c) => `${c.method} ${c.path}`)).toEqual(['GET /ops/outbox/dead']);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^event\s+type\s+task\s+attempts\s+created\s+last error$/);
    expect(lines[1]).toContain('ThrottlingException: Rate exceeded');
  });

  it('inbox dead reads the named consumer, dead-letters the bus, both as JSON with --json', async () => {
    const inbox = [
      { eventId: eventA, eventType: 'content.approved', taskId, attempts: 5, lastError: 'boom' },
    ];
    const letters = [{ id: eventA, consumer: 'archive', rule: 'content-approved', attempts: 3, error: 'x' }];
    const api = fakeApi((c) => ({ body: c.path.startsWith('/ops/inbox/') ? inbox : letters }));

    const a = await run(['inbox', 'dead', '--consumer', 'notify', '--json'], api.fetch);
    const b = await run(['dead-letters', '--json'], api.fetch);
    const c = await run(['inbox', 'dead', '--consumer', 'notify', '--wide'], api.fetch);

    expect(api.calls.map((x) => x.path)).toEqual([
      '/ops/inbox/notify/dead',
      '/ops/dead-letters',
      '/ops/inbox/notify/dead',
    ]);
    expect(JSON.parse(a.stdout)).toEqual(inbox);
    expect(JSON.parse(b.stdout)).toEqual(letters);
    expect(c.stdout).toMatch(
      new RegExp(`^${eventA}\\s+content.approved\\s+${taskId}\\s+5\\s+-\\s+boom$`, 'm'),
    );
  });

  it('says so when a list is empty', async () => {
    const api = fakeApi(() => ({ body: [] }));

    expect((await run(['outbox', 'dead'], api.fetch)).stdout).toBe('no dead outbox events\n');
    expect((await run(['inbox', 'dead', '--consumer', 'index'], api.fetch)).stdout).toBe(
      'no dead index inbox records\n',
    );
    expect((await run(['dead-letters'], api.fetch)).stdout).toBe('no dead letters\n');
  });

  it.each([
    [['outbox', 'dead'], '/ops/outbox/dead/redrive'],
    [['inbox', 'dead', '--consumer', 'archive'], '/ops/inbox/archive/dead/redrive'],
    [['dead-letters'], '/ops/dead-letters/redrive'],
  ])('%j --redrive <id> POSTs that one id', async (command, path) => {
    const api = fakeApi(() => ({ body: { redriven: 1 } }));

    const r = await run([...command, '--redrive', eventA], api.fetch);

    expect(r.code).toBe(0);
    expect(api.calls).toMatchObject([
      { method: 'POST', url: `http://127.0.0.1:3000${path}`, path, body: { eventId: eventA } },
    ]);
    expect(r.stdout).toBe(`redrove ${eventA} (1 redriven)\n`);
  });
});

describe('--all', () => {
  /** A server whose dead list shrinks as entries are redriven, listing at most `cap` at a time. */
  function deadServer(ids: string[], opts: { cap?: number; fail?: (id: string) => Reply | undefined } = {}) {
    let dead = [...ids];
    return fakeApi((c) => {
      // Each entry as every list names it: outbox and inbox by eventId, dead letters by id and consumer.
      const entry = (eventId: string) => ({ eventId, id: eventId, consumer: 'notify' });
      if (c.method === 'GET') return { body: dead.slice(0, opts.cap ?? 500).map(entry) };
      const id = (c.body as { eventId: string }).eventId;
      const failure = opts.fail?.(id);
      if (failure) return failure;
      dead = dead.filter((d) => d !== id);
      return { body: { redriven: 1 } };
    });
  }
  const ids = Array.from({ length: 45 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);

  it('redrives one id at a time, lists again past the server cap, and shows progress on stderr', async () => {
    const api = deadServer(ids, { cap: 20 });

    const r = await run(['outbox', 'dead', '--all'], api.fetch);

    expect(r.code).toBe(0);
    const posts = api.calls.filter((c) => c.method === 'POST');
    expect(posts.map((c) => (c.body as { eventId: string }).eventId)).toEqual(ids);
    expect(posts.every((c) => c.path === '/ops/outbox/dead/redrive')).toBe(true);
    expect(api.calls.filter((c) => c.method === 'GET')).toHaveLength(4); // 20 + 20 + 5 + the empty list
    expect(r.stderr).toContain('redriving 1/20\n');
    expect(r.stderr).toContain('redriving 45/45\n');
    expect(r.stdout).toBe('redrove 45 of 45 dead outbox events\n');
  });

  it('rewrites one progress line on a terminal, and --json prints the summary', async () => {
    const api = deadServer(ids.slice(0, 3));

    const r = await run(['dead-letters', '--all', '--json'], api.fetch, { tty: true });

    expect(r.stderr).toBe('\rredriving 1/3\rredriving 2/3\rredriving 3/3\n');
    expect(JSON.parse(r.stdout)).toEqual({ redriven: 3, total: 3, skipped: [] });
  });

  it('skips an entry someone else redrove meanwhile (404) and reports it', async () => {
    const gone = ids[1] as string;
    const api = deadServer(ids.slice(0, 3), {
      fail: (id) =>
        id === gone ? { status: 404, body: { error: `no dead outbox event ${id}` } } : undefined,
    });

    const r = await run(['inbox', 'dead', '--consumer', 'index', '--all'], api.fetch);

    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      `redrove 2 of 3 dead index inbox records (1 skipped, no longer dead or not redrivable: ${gone})\n`,
    );
  });

  it('skips a record the server cannot redrive (409, a truncated stored event) and goes on', async () => {
    const truncated = ids[0] as string;
    const api = deadServer(ids.slice(0, 3), {
      fail: (id) => (id === truncated ? { status: 409, body: { error: 'truncated' } } : undefined),
    });

    const r = await run(['inbox', 'dead', '--consumer', 'index', '--all', '--json'], api.fetch);

    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ redriven: 2, total: 3, skipped: [truncated] });
  });

  it('dead-letters --all names the consumer of each letter, so each redrive takes only that one', async () => {
    const api = deadServer(ids.slice(0, 2));

    await run(['dead-letters', '--all'], api.fetch);

    const bodies = api.calls.filter((c) => c.method === 'POST').map((c) => c.body);
    expect(bodies).toEqual(ids.slice(0, 2).map((eventId) => ({ eventId, consumer: 'notify' })));
  });

  it('stops at the first failure, says how far it got, and exits 1', async () => {
    const api = deadServer(ids.slice(0, 5), {
      fail: (id) => (id === ids[2] ? { status: 500, body: { error: 'internal error' } } : undefined),
    });

    const r = await run(['outbox', 'dead', '--all'], api.fetch);

    expect(r.code).toBe(1);
    // The failing one was tried four times (a 5xx is retried), the ones after it never.
    expect(api.calls.filter((c) => c.method === 'POST')).toHaveLength(2 + 4);
    expect(r.stderr).toContain('stopped after 2 of 5 dead outbox events redriven');
    expect(r.stderr).toContain('pipeline: POST /ops/outbox/dead/redrive failed: 500 internal error');
    expect(r.stdout).toBe('');
  });

  it('has nothing to do on an empty list', async () => {
    const api = deadServer([]);

    const r = await run(['outbox', 'dead', '--all'], api.fetch);

    expect(r.code).toBe(0);
    expect(api.calls).toHaveLength(1);
    expect(r.stdout).toBe('no dead outbox events to redrive\n');
  });
});

describe('audit', () => {
  const listing = {
    cursor: { deliveredAt: '2026-05-04 10:00:00.123456+00', eventId: eventW },
    lastRunAt: '2026-05-04T10:06:00.000Z',
    lastRunAudited: 12,
    audited: 40,
    behindSeconds: 0,
    undelivered: { index: 0, notify: 1, archive: 1 },
    findings: [
      {
        eventId: eventA,
        consumer: 'notify',
        deliveredAt: '2026-05-04T09:58:00.000Z',
        foundAt: '2026-05-04T10:06:00.000Z',
        redrivenAt: null,
        redrives: 0,
      },
      {
        eventId: eventA,
        consumer: 'archive',
        deliveredAt: '2026-05-04T09:58:00.000Z',
        foundAt: '2026-05-04T10:06:00.000Z',
        redrivenAt: '2026-05-04T10:07:00.000Z',
        redrives: 1,
      },
    ],
  };

  it('lists what the audit found missing: event id, consumer, delivered at', async () => {
    const api = fakeApi(() => ({ body: listing }));

    const r = await run(['audit', '--wide'], api.fetch);

    expect(r.code).toBe(0);
    expect(api.calls.map((c) => `${c.method} ${c.path}`)).toEqual(['GET /ops/audit']);
    expect(r.stdout).toContain('undelivered   index 0   notify 1   archive 1');
    expect(r.stdout).toMatch(/event\s+consumer\s+delivered at\s+found at\s+re-sent/);
    expect(r.stdout).toMatch(new RegExp(`${eventA}\\s+notify\\s+2026-05-04T09:58:00.000Z`));
    expect(r.stdout).toContain('2026-05-04T10:07:00.000Z (1x)');
  });

  it('says so when nothing is missing, and filters by --consumer', async () => {
    const api = fakeApi(() => ({
      body: { ...listing, undelivered: { index: 0, notify: 0, archive: 0 }, findings: [] },
    }));

    const r = await run(['audit', '--consumer', 'index'], api.fetch);

    expect(api.calls.map((c) => c.path)).toEqual(['/ops/audit?consumer=index']);
    expect(r.stdout).toContain('every audited event reached every consumer its rules route it to');
    expect((await run(['audit', '--consumer', 'nope'], api.fetch)).code).toBe(2);
  });

  it('--redrive alone re-sends every finding, asking again while the server answers complete: false', async () => {
    const replies = [
      { redriven: 100, skipped: 0, complete: false },
      { redriven: 20, skipped: 1, complete: true },
    ];
    const api = fakeApi(() => ({ body: replies.shift() }));

    const r = await run(['audit', '--redrive'], api.fetch);

    expect(r.code).toBe(0);
    expect(api.calls).toMatchObject([
      { method: 'POST', path: '/ops/audit/redrive', body: { all: true } },
      { method: 'POST', path: '/ops/audit/redrive', body: { all: true } },
    ]);
    expect(r.stdout).toContain('re-sent 120 missing deliveries (1 skipped');
    expect(r.stderr).toBe('re-sent 100 so far\n');
    // Before another option it stands alone too.
    const json = await run(
      ['audit', '--redrive', '--json'],
      fakeApi(() => ({ body: { redriven: 0, skipped: 0 } })).fetch,
    );
    expect(JSON.parse(json.stdout)).toEqual({ redriven: 0, skipped: 0 });
  });

  it("--redrive re-sends each finding once per call: later requests carry the first answer's since, and a request that moves nothing ends it", async () => {
    // A server whose findings outlast the grace period: without since each request re-sends the
    // same three again and answers complete: false, for as long as it is asked.
    const since = '2026-05-04T10:00:00.000000Z';
    const api = fakeApi((call) => {
      if (api.calls.length > 20) return { status: 500, body: { error: 'asked too often' } };
      const body = call.body as { since?: string };
      return body.since === since
        ? { body: { redriven: 0, skipped: 0, complete: false, since } }
        : { body: { redriven: 3, skipped: 0, complete: false, since } };
    });

    const r = await run(['audit', '--redrive', '--json'], api.fetch);

    expect(api.calls.map((c) => c.body)).toEqual([{ all: true }, { all: true, since }]);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toEqual({ redriven: 3, skipped: 0, complete: false });
    expect(r.stderr).toContain('the server re-sent nothing more');
  });

  it('--redrive <eventId> re-sends that event (to one --consumer when given); a bad id is refused before any request', async () => {
    const api = fakeApi(() => ({ body: { redriven: 1, skipped: 0, complete: true } }));

    const r = await run(['audit', '--redrive', eventA, '--consumer', 'archive'], api.fetch);

    expect(r.code).toBe(0);
    expect(api.calls).toMatchObject([
      { method: 'POST', path: '/ops/audit/redrive', body: { eventId: eventA, consumer: 'archive' } },
    ]);
    expect(r.stdout).toContain(`re-sent ${eventA} to 1 consumer(s)`);
    const bad = await run(['audit', '--redrive', 'nope'], api.fetch);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('event id "nope" is not a UUID');
    expect(api.calls).toHaveLength(1);
  });
});
