import { existsSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { dashboardHtml } from '../../infra/ops-tools/dashboard/page';
import { deliveryBoundMs, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { everyCounter, perConsumer, subscriberNames } from '../support/topology-expectations';

/*
 * The dashboard page in headless Chromium against a fake ops server: node http serving
 * `dashboardHtml()` and /ops/* JSON that each test sets, recording every request. The fake
 * answers exactly what runtime.ts's routes answer (shapes from ops.ts, outbox-store.ts,
 * local-bus.ts), so the page is tested on the contract, independent of the other runtime parts.
 */

const chromiumPath = '/usr/bin/chromium';
const haveChromium = existsSync(chromiumPath);
if (!haveChromium) {
  console.warn(
    `dashboard browser tests skipped: ${chromiumPath} is missing (install it: apt-get install -y chromium)`,
  );
}

const taskId = '3f1c2b7e-8d4a-4c1e-9b0a-5e6f7a8b9c0d';
const approvedEvent = '0b9f6c1e-2a3d-4e5f-8a9b-0c1d2e3f4a5b';
const withdrawnEvent = '7d8e9f0a-1b2c-4d3e-9f4a-5b6c7d8e9f0a';
const deadOutboxEvent = 'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d';
const deadInboxEvent = 'c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f';
const deadLetterId = 'e5f6a7b8-c9d0-4e1f-9a2b-3c4d5e6f7a8b';

type Entry = Record<string, unknown>;

interface Fake {
  status: unknown;
  events: unknown[];
  outboxDead: Entry[];
  inboxDead: Record<string, Entry[]>;
  deadLetters: Entry[];
  audit: Entry & { findings: Entry[] };
  tasks: Record<string, unknown>;
  traces: Record<string, unknown>;
  failStatus: boolean;
  /** The runtime's chart readings, each `agoMs` before the request that reads them. */
  history: { agoMs: number; approved: number; delivered: number; oldestPendingAgeSeconds: number }[];
  /** What `GET /tasks?status=pending` pages through, newest first. */
  pending: Entry[];
}

const now = new Date('2026-05-04T10:00:00Z').toISOString();

/*
 * The fake's figures are the page's: one entry per consumer of the topology, as the ops API
 * answers (the page is configured with the topology's consumers). Three of them have figures of
 * their own that the tests read (notify's dead record and lease, archive's retry and missing
 * delivery); every other consumer is a healthy one.
 */
const healthyConsumer: Entry = {
  processed: 7,
  inProgress: 0,
  failed: 0,
  dead: 0,
  oldestLeaseSeconds: null,
  oldestRetryAgeSeconds: null,
};
const consumerFigures: Record<string, Entry> = {
  index: { processed: 8 },
  notify: { processed: 6, inProgress: 1, dead: 1, oldestLeaseSeconds: 200 },
  archive: { processed: 7, failed: 1, oldestRetryAgeSeconds: 90 },
};
/** Each counter's figure: 7 where the tests read none of its own. */
const effectFigures = { ...everyCounter(7), indexDocuments: 7, notificationsSent: 6, archivedObjects: 7 };
/** The consumer whose delivery the audit found missing (one). */
const undelivered = () => perConsumer((c) => (c === 'archive' ? 1 : 0));

function freshFake(): Fake {
  return {
    status: {
      tasks: { pending_review: 4, approved: 7, rejected: 0, withdrawn: 1 },
      outbox: { pending: 3, delivered: 8, dead: 1, oldestPendingAgeSeconds: 400 },
      consumers: perConsumer((c) => ({ ...healthyConsumer, ...consumerFigures[c] })),
      effects: { ...effectFigures },
      deadLetters: 1,
      audit: { undelivered: undelivered(), lastRunAt: now, behindSeconds: 0 },
      alarms: {
        oldestPendingAge: 'ALARM',
        outboxDead: 'ALARM',
        relayErrors: 'OK',
        relaySilent: 'OK',
        deadLetters: 'ALARM',
        'inbox-dead': 'ALARM',
        'inbox-oldest-lease': 'ALARM',
      },
      relay: { lastRunAt: now, errors: 0 },
    },
    events: [
      {
        eventId: withdrawnEvent,
        eventType: 'content.withdrawn',
        taskId,
        title: 'Spring campaign copy',
        version: 3,
        status: 'pending',
        attempts: 0,
        createdAt: now,
        deliveredAt: null,
        lastError: null,
      },
      {
        eventId: approvedEvent,
        eventType: 'content.approved',
        taskId,
        title: 'Spring campaign copy',
        version: 2,
        status: 'delivered',
        attempts: 1,
        createdAt: now,
        deliveredAt: now,
        lastError: null,
      },
    ],
    outboxDead: [
      {
        eventId: deadOutboxEvent,
        eventType: 'content.approved',
        aggregateId: taskId,
        attempts: 10,
        lastError: 'ThrottlingException: Rate exceeded',
        createdAt: now,
      },
    ],
    inboxDead: perConsumer<Entry[]>((c) =>
      c === 'notify'
        ? [
            {
              eventId: deadInboxEvent,
              eventType: 'content.approved',
              taskId,
              status: 'DEAD',
              attempts: 5,
              lastError: 'SNS publish failed',
              updatedAt: Date.parse(now),
            },
          ]
        : [],
    ),
    deadLetters: [
      {
        id: deadLetterId,
        consumer: 'archive',
        rule: 'content-approved',
        attempts: 7,
        error: 'Error: injected invoke failure',
        deadAt: now,
      },
    ],
    audit: {
      cursor: null,
      lastRunAt: now,
      lastRunAudited: 8,
      audited: 8,
      behindSeconds: 0,
      undelivered: undelivered(),
      findings: [
        {
          eventId: approvedEvent,
          consumer: 'archive',
          deliveredAt: now,
          foundAt: now,
          redrivenAt: null,
          redrives: 0,
        },
      ],
    },
    tasks: {
      [taskId]: {
        taskId,
        title: 'Spring campaign copy',
        body: null,
        assignee: 'alice',
        status: 'withdrawn',
        version: 3,
        reviewer: 'rita',
        createdAt: now,
        updatedAt: now,
      },
    },
    traces: {
      [taskId]: {
        taskId,
        events: [
          {
            eventId: approvedEvent,
            eventType: 'content.approved',
            taskId,
            version: 2,
            status: 'delivered',
            attempts: 1,
            createdAt: now,
            deliveredAt: now,
            lastError: null,
            consumers: perConsumer<Entry | null>(
              (c) =>
                ({
                  index: { status: 'PROCESSED', attempts: 1, lastError: null, updatedAt: Date.parse(now) },
                  notify: { status: 'DEAD', attempts: 5, lastError: 'SNS publish failed', updatedAt: now },
                })[c] ?? null,
            ),
          },
          {
            eventId: withdrawnEvent,
            eventType: 'content.withdrawn',
            taskId,
            version: 3,
            status: 'pending',
            attempts: 0,
            createdAt: now,
            deliveredAt: null,
            lastError: null,
            consumers: perConsumer(null),
          },
        ],
      },
    },
    failStatus: false,
    history: [],
    pending: [],
  };
}

let fake = freshFake();
const requests: { method: string; path: string; body: unknown }[] = [];

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks).toString('utf8');
  return raw === '' ? undefined : JSON.parse(raw);
}

function route(method: string, path: string, body: unknown, query: URLSearchParams): [number, unknown] {
  const id = (body as { eventId?: string } | undefined)?.eventId;
  const all = (body as { all?: boolean } | undefined)?.all === true;
  const redrive = (list: Entry[], key: string): [Entry[], [number, unknown]] => {
    const rest = all ? [] : list.filter((d) => d[key] !== id);
    const redriven = list.length - rest.length;
    return [rest, redriven === 0 ? [404, { error: `nothing dead with id ${id}` }] : [200, { redriven }]];
  };
  const inbox = /^\/ops\/inbox\/([^/]+)\/dead(\/redrive)?$/.exec(path);
  const trace = /^\/ops\/tasks\/([^/]+)\/trace$/.exec(path);
  const task = /^\/tasks\/([^/]+)$/.exec(path);
  if (method === 'GET' && path === '/ops/status') {
    return fake.failStatus ? [500, { error: 'internal error' }] : [200, fake.status];
  }
  if (method === 'GET' && path === '/ops/events') return [200, fake.events];
  if (method === 'GET' && path === '/ops/history') {
    const at = Date.now();
    const samples = fake.history.map(({ agoMs, ...figures }) => ({ at: at - agoMs, ...figures }));
    return [200, { periodSeconds: 10, windowSeconds: 3600, samples }];
  }
  if (method === 'GET' && path === '/tasks') {
    // The tasks API's contract: keyset pages, newest first; the fake's cursor is an offset.
    const limit = Number(query.get('limit') ?? 20);
    const from = Number(query.get('cursor') ?? 0);
    if (query.get('status') !== 'pending') return [400, { error: 'the page asks for pending tasks only' }];
    const tasks = fake.pending.slice(from, from + limit);
    const more = from + limit < fake.pending.length;
    return [200, { tasks, nextCursor: more ? String(from + limit) : null }];
  }
  if (method === 'GET' && path === '/ops/outbox/dead') return [200, fake.outboxDead];
  if (method === 'POST' && path === '/ops/outbox/dead/redrive') {
    const [rest, answer] = redrive(fake.outboxDead, 'eventId');
    fake.outboxDead = rest;
    return answer;
  }
  if (inbox) {
    const consumer = inbox[1] ?? '';
    const list = fake.inboxDead[consumer];
    if (!list) return [400, { error: `unknown consumer "${consumer}"` }];
    if (!inbox[2]) return [200, list];
    const [rest, answer] = redrive(list, 'eventId');
    fake.inboxDead[consumer] = rest;
    return answer;
  }
  if (method === 'GET' && path === '/ops/dead-letters') return [200, fake.deadLetters];
  if (method === 'POST' && path === '/ops/dead-letters/redrive') {
    const [rest, answer] = redrive(fake.deadLetters, 'id');
    fake.deadLetters = rest;
    return answer;
  }
  if (method === 'GET' && path === '/ops/audit') return [200, fake.audit];
  if (method === 'POST' && path === '/ops/audit/redrive') {
    const hit = fake.audit.findings.filter((f) => all || f.eventId === id);
    for (const f of hit) Object.assign(f, { redrivenAt: now, redrives: 1 });
    return hit.length === 0
      ? [404, { error: `no finding ${id}` }]
      : [200, { redriven: hit.length, complete: true }];
  }
  if (trace) {
    const found = fake.traces[trace[1] ?? ''];
    return found ? [200, found] : [404, { error: `no task ${trace[1]}` }];
  }
  if (task) {
    const found = fake.tasks[task[1] ?? ''];
    return found ? [200, found] : [404, { error: 'task not found' }];
  }
  return [404, { error: `no route for ${method} ${path}` }];
}

let server: Server;
let origin = '';
let browser: Browser;
let page: Page;

// The page renders and refreshes (every 2 s) on its own timers in another process: each
// expect.poll below reads it until it shows what the test expects, within vitest.config's poll
// bound (a minute: a page that never shows it), or the delivery bound for the live runtime.
async function open(hash = ''): Promise<void> {
  await page.goto(`${origin}/${hash}`);
  // The page's first refresh reads every list on its own request and says when it has
  // rendered them all: the status figures alone showing may leave the dead lists unread.
  await expect.poll(() => page.getByTestId('last-updated').textContent()).toMatch(/^updated /);
  expect(await page.getByTestId('outbox-pending').textContent()).toBe('3');
}

const testid = (id: string) => page.getByTestId(id);

/** The background colour of an element as [r, g, b]. */
async function background(id: string): Promise<number[]> {
  // Found and read in one step in the page: the page re-renders the pills on every refresh, and
  // a pill found first and read after (a locator's evaluate) may be detached by then, when its
  // computed colour is "" (a run on a loaded machine read no colour at all).
  // tsconfig has no DOM lib (this is a Node project): the browser's globals are typed by hand.
  const css = await page.evaluate((testId) => {
    const g = globalThis as unknown as {
      document: { querySelector(s: string): unknown };
      getComputedStyle(e: unknown): { backgroundColor: string };
    };
    const el = g.document.querySelector(`[data-testid="${testId}"]`);
    return el ? g.getComputedStyle(el).backgroundColor : `no element ${testId}`;
  }, id);
  const rgb = (css.match(/\d+/g) ?? []).slice(0, 3).map(Number);
  if (rgb.length < 3) throw new Error(`${id}: no colour in "${css}"`);
  return rgb;
}

/** Headless Chromium from the Debian package, with nothing of its own phoning home. */
function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

describe.skipIf(!haveChromium)(
  haveChromium
    ? 'dashboard page in headless Chromium, against a fake ops server'
    : 'dashboard page against a fake ops server (skipped: chromium not installed)',
  () => {
    beforeAll(async () => {
      server = createServer((req, res) => {
        const url = new URL(req.url ?? '/', 'http://x');
        const method = req.method ?? 'GET';
        readBody(req).then((body) => {
          requests.push({ method, path: url.pathname, body });
          if (method === 'GET' && url.pathname === '/') {
            res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(dashboardHtml());
            return;
          }
          const [status, json] = route(method, url.pathname, body, url.searchParams);
          res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
        });
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      browser = await launchChromium();
    });

    afterAll(async () => {
      await browser?.close();
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    });

    beforeEach(async () => {
      fake = freshFake();
      requests.length = 0;
      page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    });

    afterEach(async () => {
      await page?.close();
    });

    it('shows the figures of /ops/status and each alarm in its colour', async () => {
      await open();

      expect(await testid('tasks-approved').textContent()).toBe('7');
      expect(await testid('tasks-pending_review').textContent()).toBe('4');
      expect(await testid('outbox-delivered').textContent()).toBe('8');
      expect(await testid('outbox-dead').textContent()).toBe('1');
      expect(await testid('outbox-oldest-pending-age').textContent()).toBe('6m 40s');
      expect(await testid('outbox-oldest-pending-age').getAttribute('class')).toContain('bad'); // its alarm fires
      expect(await testid('inbox-notify-dead').textContent()).toBe('1');
      expect(await testid('inbox-archive-failed').textContent()).toBe('1');
      expect(await testid('inbox-index-processed').textContent()).toBe('8');
      expect(await testid('effects-archivedObjects').textContent()).toBe('7');
      expect(await testid('dead-letters-count').textContent()).toBe('1');
      expect(await testid('alarm-oldestPendingAge').textContent()).toContain('oldestPendingAge');
      expect(await testid('alarm-summary').textContent()).toBe('5 in ALARM');
      const [ar, ag] = await background('alarm-oldestPendingAge');
      const [or, og] = await background('alarm-relayErrors');
      expect(ar).toBeGreaterThan(150); // red
      expect(ag).toBeLessThan(80);
      expect(og).toBeGreaterThan(100); // green
      expect(or).toBeLessThan(80);
      // One inbox-dead alarm for every consumer; the inbox table says whose (notify's count in red).
      expect(await testid('alarm-inbox-dead').getAttribute('data-state')).toBe('ALARM');
      expect(await testid('inbox-notify-dead').getAttribute('class')).toContain('bad');
      expect(await testid('inbox-index-dead').getAttribute('class')).not.toContain('bad');
      expect(await testid('outbox-dead-list').textContent()).toContain('ThrottlingException');
      expect(await testid('inbox-dead-notify-list').textContent()).toContain('SNS publish failed');
      expect(await testid('dead-letters-list').textContent()).toContain('injected invoke failure');
      expect(await testid('events-table').textContent()).toContain('content.withdrawn');
      // The design's three inbox figures and the audit's, per consumer: red where an alarm fires.
      expect(await testid('inbox-notify-oldestLease').textContent()).toBe('3m 20s');
      expect(await testid('inbox-notify-oldestLease').getAttribute('class')).toContain('bad');
      expect(await testid('inbox-archive-retryAge').textContent()).toBe('1m 30s');
      expect(await testid('inbox-archive-retryAge').getAttribute('class')).not.toContain('bad');
      expect(await testid('inbox-index-oldestLease').textContent()).toBe('-');
      expect(await testid('inbox-archive-undelivered').textContent()).toBe('1');
      expect(await testid('inbox-archive-undelivered').getAttribute('class')).toContain('bad');
      expect(await testid('audit-list').textContent()).toContain(approvedEvent);
      // Every read answered (the audit's too): the page says when, and shows no error.
      await expect.poll(() => testid('last-updated').textContent()).toMatch(/^updated /);
      expect(await testid('error-banner').isHidden()).toBe(true);

      const screenshot = process.env.DASHBOARD_SCREENSHOT;
      if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
    });

    it("clicking a task id in the latest events shows the task's events and each consumer's inbox state", async () => {
      await open();

      await testid(`event-task-${approvedEvent}`).click();

      await expect.poll(() => testid('trace-task-title').textContent()).toBe('Spring campaign copy');
      expect(await testid('trace-task-status').textContent()).toBe('withdrawn (version 3)');
      expect(await testid(`trace-${approvedEvent}-index`).textContent()).toBe('PROCESSED (1)');
      expect(await testid(`trace-${approvedEvent}-notify`).textContent()).toBe('DEAD (5)SNS publish failed');
      expect(await testid(`trace-${approvedEvent}-archive`).textContent()).toBe('not received');
      // content.withdrawn goes to the index only (topology rules): notify never sees it.
      expect(await testid(`trace-${withdrawnEvent}-index`).textContent()).toBe('not received');
      expect(await testid(`trace-${withdrawnEvent}-notify`).textContent()).toBe('not routed');
      expect(await testid('trace-input').inputValue()).toBe(taskId);
      expect(new URL(page.url()).hash).toBe(`#task=${taskId}`);
      expect(requests.some((r) => r.path === `/ops/tasks/${taskId}/trace`)).toBe(true);

      const screenshot = process.env.DASHBOARD_SCREENSHOT;
      if (screenshot)
        await page.screenshot({ path: screenshot.replace(/(\.png)?$/, '-trace.png'), fullPage: true });
    });

    it('names the task of each latest event by its title, its id beneath, and by its id alone when untitled', async () => {
      (fake.events[0] as Entry).title = null;
      await open();

      expect(await testid(`event-task-${approvedEvent}`).textContent()).toBe('Spring campaign copy');
      expect(await testid(`event-task-id-${approvedEvent}`).textContent()).toBe(taskId);
      expect(await testid(`event-task-${withdrawnEvent}`).textContent()).toBe(taskId);
      expect(await testid(`event-task-id-${withdrawnEvent}`).count()).toBe(0);
    });

    it("charts the runtime's last hour, the same after a reload, and the lines move after an approval", async () => {
      const violations: string[] = [];
      page.on('console', (m) => {
        if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
      });
      // Readings the runtime took before the page opened: 2 approvals and 2 deliveries between
      // 30 and 20 minutes ago, an oldest pending age of 400 s then.
      fake.history = [
        { agoMs: 30 * 60_000, approved: 5, delivered: 6, oldestPendingAgeSeconds: 0 },
        { agoMs: 20 * 60_000, approved: 7, delivered: 8, oldestPendingAgeSeconds: 400 },
      ];
      await open();
      const values = async (line: string) =>
        ((await testid(`chart-${line}`).getAttribute('data-values')) ?? '').split(',');
      const counted = async (line: string) => (await values(line)).filter((v) => v !== '').map(Number);

      expect(await values('approvals')).toHaveLength(60); // an hour in one-minute buckets
      await expect.poll(() => testid('chart-approvals-total').textContent()).toBe('2');
      expect(await testid('chart-deliveries-total').textContent()).toBe('2');
      expect((await counted('approvals')).filter((v) => v !== 0)).toEqual([2]);
      expect(await counted('oldest-age')).toContain(400);
      expect(await testid('chart-approvals-max').textContent()).toBe('max 2 per 60 s');
      expect(await page.locator('#chart-title').textContent()).toBe('Last 60 minutes');
      const drawn = await testid('chart-approvals').getAttribute('d');

      await page.reload();
      await expect.poll(() => testid('last-updated').textContent()).toMatch(/^updated /);
      expect(await testid('chart-approvals-total').textContent()).toBe('2');
      expect(await testid('chart-approvals').getAttribute('d')).toBe(drawn);

      // A task is approved and delivered; its event leaves the outbox's pending list.
      const status = fake.status as { tasks: Entry; outbox: Entry };
      fake.status = {
        ...status,
        tasks: { ...status.tasks, pending_review: 3, approved: 8 },
        outbox: { ...status.outbox, delivered: 9, oldestPendingAgeSeconds: 0 },
      };

      await expect.poll(() => testid('chart-approvals-total').textContent()).toBe('3');
      expect(await testid('chart-deliveries-total').textContent()).toBe('3');
      expect((await counted('approvals')).filter((v) => v !== 0)).toEqual([2, 1]);
      expect(await testid('chart-approvals').getAttribute('d')).not.toBe(drawn);
      expect(await testid('chart-oldest-age-now').textContent()).toBe('0s');
      expect(violations).toEqual([]);
    });

    it('the trace input looks a task up and says so when there is no such task', async () => {
      await open();
      const missing = '99999999-9999-4999-8999-999999999999';

      await testid('trace-input').fill(missing);
      await testid('trace-submit').click();

      await expect.poll(() => testid('trace-error').textContent()).toContain('404');
      expect(await testid('trace-error').isVisible()).toBe(true);
      expect(await testid('trace').textContent()).toBe('');
    });

    it.each([
      {
        list: 'outbox',
        button: `redrive-outbox-${deadOutboxEvent}`,
        path: '/ops/outbox/dead/redrive',
        id: deadOutboxEvent,
        body: { eventId: deadOutboxEvent },
        rows: 'outbox-dead-row',
      },
      {
        list: 'notify inbox',
        button: `redrive-inbox-notify-${deadInboxEvent}`,
        path: '/ops/inbox/notify/dead/redrive',
        id: deadInboxEvent,
        body: { eventId: deadInboxEvent },
        rows: 'inbox-dead-notify-row',
      },
      {
        list: 'bus dead letters',
        button: `redrive-dead-letter-archive-${deadLetterId}`,
        path: '/ops/dead-letters/redrive',
        id: deadLetterId,
        // The same event can be dead for two consumers: the button names its own.
        body: { eventId: deadLetterId, consumer: 'archive' },
        rows: 'dead-letter-row',
      },
    ])('the redrive button of a $list entry POSTs its id and the entry leaves the list', async (c) => {
      await open();
      expect(await testid(c.rows).count()).toBe(1);

      await testid(c.button).click();

      await expect.poll(() => testid(c.rows).count()).toBe(0);
      const posts = requests.filter((r) => r.method === 'POST');
      expect(posts).toEqual([{ method: 'POST', path: c.path, body: c.body }]);
      expect(await testid('notice').textContent()).toContain('1 redriven');
    });

    it('the re-send button of an audit finding POSTs its event and consumer, and the finding shows it was re-sent', async () => {
      await open();
      await expect.poll(() => testid('audit-row').count()).toBe(1);

      await testid(`redrive-audit-archive-${approvedEvent}`).click();

      // A finding stays listed until an audit run finds its record: it is now noted as re-sent.
      await expect.poll(() => testid('audit-list').textContent()).toContain('(1x)');
      expect(requests.filter((r) => r.method === 'POST')).toEqual([
        { method: 'POST', path: '/ops/audit/redrive', body: { eventId: approvedEvent, consumer: 'archive' } },
      ]);
      expect(await testid('notice').textContent()).toContain('1 redriven');
    });

    it('a long dead list is paged 10 rows at a time, and Redrive all POSTs {all: true} once confirmed', async () => {
      fake.outboxDead = Array.from({ length: 120 }, (_, i) => ({
        eventId: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
        eventType: 'content.approved',
        attempts: 10,
      }));
      const dialogs: string[] = [];
      page.on('dialog', (d) => {
        dialogs.push(d.message());
        void d.accept();
      });
      await open();
      expect(await testid('outbox-dead-row').count()).toBe(10);
      expect(await testid('outbox-dead-list-page').textContent()).toBe('1-10 of 120');
      expect(await testid('outbox-dead-list-prev').isDisabled()).toBe(true);
      await testid('outbox-dead-list-next').click();
      expect(await testid('outbox-dead-list-page').textContent()).toBe('11-20 of 120');
      expect(await testid('outbox-dead-list').textContent()).toContain(
        '00000000-0000-4000-8000-000000000010',
      );
      expect(await testid('outbox-dead-list').textContent()).not.toContain(
        '00000000-0000-4000-8000-000000000009',
      );

      await testid('redrive-all-outbox').click();

      await expect.poll(() => testid('outbox-dead-row').count()).toBe(0);
      expect(dialogs).toEqual(['Redrive every dead outbox event?']);
      expect(requests.filter((r) => r.method === 'POST')).toEqual([
        { method: 'POST', path: '/ops/outbox/dead/redrive', body: { all: true } },
      ]);
      expect(await testid('notice').textContent()).toBe('Redrove every dead outbox event: 120 redriven.');
    });

    it('a failing /ops/status shows an error banner and the page keeps refreshing until it recovers', async () => {
      await open();
      expect(await testid('error-banner').isVisible()).toBe(false);

      fake.failStatus = true;
      await expect.poll(() => testid('error-banner').isVisible()).toBe(true);
      expect(await testid('error-banner').textContent()).toContain(
        'GET /ops/status failed: 500 internal error',
      );
      expect(await testid('outbox-pending').textContent()).toBe('3'); // the last figures stay
      fake.failStatus = false;
      fake.status = {
        ...(fake.status as object),
        outbox: { pending: 0, delivered: 11, dead: 1, oldestPendingAgeSeconds: 0 },
      };

      await expect.poll(() => testid('error-banner').isVisible()).toBe(false);
      expect(await testid('outbox-pending').textContent()).toBe('0');
    });

    it('says once that the pipeline is unreachable, with its cause, while no request gets an answer', async () => {
      await open(`#task=${taskId}`);
      await expect.poll(() => testid('trace-task-title').textContent()).toBe('Spring campaign copy');
      // The server stopped: every request of the page is refused, as Chromium sees a closed port.
      const refused: string[] = [];
      await page.route(
        (url) => url.pathname !== '/',
        (r) => {
          refused.push(new URL(r.request().url()).pathname);
          return r.abort('connectionrefused');
        },
      );
      // A refresh runs after the one before ended: the third refusal of /ops/status comes after
      // the banner of a refresh that started once the route was in place.
      await expect.poll(() => refused.filter((p) => p === '/ops/status').length).toBeGreaterThanOrEqual(3);

      const banner = (await testid('error-banner').textContent()) ?? '';
      expect(await testid('error-banner').isVisible()).toBe(true);
      expect(banner.match(/unreachable/g), banner).toHaveLength(1);
      expect(banner.match(/Failed to fetch/g), banner).toHaveLength(1); // Chromium's cause, once
      expect(banner).toContain('Retrying every 2 s');
      // Nor does the trace, which stays as last read, say it again.
      expect(await testid('trace-error').isHidden()).toBe(true);
      expect(await testid('trace-task-title').textContent()).toBe('Spring campaign copy');
      expect(await testid('outbox-pending').textContent()).toBe('3'); // the last figures stay

      // It answers again, one route with an error: that failure is listed, the outage is over.
      await page.unrouteAll();
      fake.failStatus = true;
      await expect
        .poll(() => testid('error-banner').textContent())
        .toContain('GET /ops/status failed: 500 internal error');
      expect(await testid('error-banner').textContent()).not.toContain('unreachable');
    });

    it('says "unknown" in the header and on every pill while the status cannot be read, never OK', async () => {
      const status = fake.status as { alarms: Record<string, string> };
      fake.status = {
        ...status,
        alarms: Object.fromEntries(Object.keys(status.alarms).map((n) => [n, 'OK'])),
      };
      await open();
      expect(await testid('alarm-summary').textContent()).toBe('all OK');

      fake.failStatus = true; // the server cannot read its figures

      await expect
        .poll(() => testid('alarm-summary').textContent())
        .toBe('unknown: the status could not be read');
      const pills = await page.locator('[data-testid^="alarm-"]:not([data-testid="alarm-summary"])').all();
      expect(pills).toHaveLength(Object.keys(status.alarms).length);
      for (const pill of pills) {
        expect(await pill.getAttribute('data-state')).toBe('UNKNOWN');
        expect(await pill.textContent()).toMatch(/: unknown$/);
      }
      // Grey, neither the green of OK nor the red of ALARM.
      for (const id of ['alarm-summary', 'alarm-relayErrors']) {
        const rgb = await background(id);
        expect(Math.max(...rgb) - Math.min(...rgb), id).toBeLessThan(30);
      }
      expect(await testid('error-banner').isVisible()).toBe(true);

      fake.failStatus = false;
      await expect.poll(() => testid('alarm-summary').textContent()).toBe('all OK');
      expect(await testid('alarm-relayErrors').getAttribute('data-state')).toBe('OK');
    });

    it('says "unknown" when the status has never been read, not "all OK"', async () => {
      fake.failStatus = true;
      await page.goto(`${origin}/`);

      await expect.poll(() => testid('error-banner').isVisible()).toBe(true);
      expect(await testid('alarm-summary').textContent()).toBe('unknown: the status could not be read');
      expect(await testid('alarm-summary').getAttribute('class')).toBe('unknown');
    });

    it('brings the trace into view: a #task= link on load, a hash changed in the open tab, a click on a title', async () => {
      const other = '5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d';
      fake.tasks[other] = { ...(fake.tasks[taskId] as Entry), taskId: other, title: 'Winter teaser' };
      fake.traces[other] = { taskId: other, events: [] };
      const inView = async () => {
        const box = await page.locator('#trace-section').boundingBox();
        const viewport = page.viewportSize();
        if (!box || !viewport) throw new Error('no trace section or viewport');
        // Its heading and first rows are on screen, not below the fold.
        return box.y >= 0 && box.y < viewport.height - 150;
      };

      await open(`#task=${taskId}`);
      await expect.poll(() => testid('trace-task-title').textContent()).toBe('Spring campaign copy');
      await expect.poll(inView).toBe(true);
      expect(
        await page.evaluate(() => (globalThis as unknown as { scrollY: number }).scrollY),
      ).toBeGreaterThan(0);

      await page.evaluate(() =>
        (globalThis as unknown as { scrollTo(x: number, y: number): void }).scrollTo(0, 0),
      );
      expect(await inView()).toBe(false);
      await page.evaluate((id) => {
        (globalThis as unknown as { location: { hash: string } }).location.hash = `#task=${id}`;
      }, other);
      await expect.poll(() => testid('trace-task-title').textContent()).toBe('Winter teaser');
      await expect.poll(inView).toBe(true);

      await page.evaluate(() =>
        (globalThis as unknown as { scrollTo(x: number, y: number): void }).scrollTo(0, 0),
      );
      await testid(`event-task-${approvedEvent}`).click();
      await expect.poll(() => testid('trace-task-title').textContent()).toBe('Spring campaign copy');
      await expect.poll(inView).toBe(true);
      expect(new URL(page.url()).hash).toBe(`#task=${taskId}`);
    });

    it('pages the latest events 10 at a time, and keeps the page across refreshes', async () => {
      const base = fake.events[1] as Entry;
      fake.events = Array.from({ length: 20 }, (_, i) => ({
        ...base,
        eventId: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
        title: `event ${i}`,
      }));
      await open();
      expect(await testid('event-row').count()).toBe(10);
      expect(await testid('events-page').textContent()).toBe('1-10 of 20');

      await testid('events-next').click();
      const reads = requests.filter((r) => r.path === '/ops/events').length;
      await expect.poll(() => requests.filter((r) => r.path === '/ops/events').length).toBeGreaterThan(reads);

      await expect.poll(() => testid('events-page').textContent()).toBe('11-20 of 20');
      expect(await testid('event-row').count()).toBe(10);
      expect(await testid('events-table').textContent()).toContain('event 19');
      expect(await testid('events-table').textContent()).not.toContain('event 9');
      expect(await testid('events-next').isDisabled()).toBe(true);
    });

    it('lists the tasks pending review from GET /tasks, pages them by cursor, and a title shows its trace', async () => {
      fake.pending = Array.from({ length: 12 }, (_, i) => ({
        taskId: i === 11 ? taskId : `00000000-0000-4000-9000-${String(i).padStart(12, '0')}`,
        title: i === 11 ? 'Spring campaign copy' : `pending ${i}`,
        assignee: 'ana',
        status: 'pending_review',
        version: 1,
        createdAt: now,
        updatedAt: now,
      }));
      await open();
      await expect.poll(() => testid('pending-row').count()).toBe(10);
      expect(requests.some((r) => r.path === '/tasks')).toBe(true);

      await testid('pending-next').click();

      await expect.poll(() => testid('pending-row').count()).toBe(2);
      expect(await testid('pending-page').textContent()).toBe('11-12');
      await testid(`pending-task-${taskId}`).click();
      await expect.poll(() => testid('trace-task-title').textContent()).toBe('Spring campaign copy');
      await testid('pending-prev').click();
      await expect.poll(() => testid('pending-row').count()).toBe(10);
    });

    it('at 390 px every table shows every column on screen, nothing scrolls sideways, and long lists are paged', async () => {
      await page.setViewportSize({ width: 390, height: 844 });
      fake.pending = [
        {
          taskId,
          title: 'Spring campaign copy',
          assignee: 'alice',
          status: 'pending_review',
          version: 1,
          createdAt: now,
          updatedAt: now,
        },
      ];
      const base = fake.events[1] as Entry;
      fake.events = Array.from({ length: 20 }, (_, i) => ({
        ...base,
        eventId: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
        lastError: i === 0 ? 'x'.repeat(300) : null,
      }));
      await open(`#task=${taskId}`);
      await expect.poll(() => testid('trace-task-title').textContent()).toBe('Spring campaign copy');

      // Every cell of every table, as the page lays it out: its box, and the column it names.
      const cells = await page.evaluate(() => {
        const g = globalThis as unknown as {
          document: {
            documentElement: { scrollWidth: number };
            querySelectorAll(s: string): ArrayLike<{
              getBoundingClientRect(): { left: number; right: number; width: number; height: number };
              getAttribute(n: string): string | null;
              closest(s: string): { getAttribute(n: string): string | null } | null;
            }>;
          };
        };
        return {
          scrollWidth: g.document.documentElement.scrollWidth,
          cells: Array.from(g.document.querySelectorAll('td')).map((td) => {
            const r = td.getBoundingClientRect();
            return {
              table: td.closest('table')?.getAttribute('data-testid') ?? '',
              label: td.getAttribute('data-label'),
              left: r.left,
              right: r.right,
              width: r.width,
              height: r.height,
            };
          }),
        };
      });
      expect(cells.scrollWidth).toBeLessThanOrEqual(390);
      const tables = new Set(cells.cells.map((c) => c.table));
      for (const t of ['inbox-table', 'events-table', 'pending-table', 'trace-events', 'outbox-dead-list']) {
        expect(tables, t).toContain(t);
      }
      const offScreen = cells.cells.filter(
        (c) => c.left < 0 || c.right > 390.5 || c.width <= 0 || c.height <= 0,
      );
      expect(offScreen).toEqual([]);
      // The columns the issue found cut off: each inbox row's "dead" and the trace's consumer states.
      const consumerNames: readonly string[] = topology.consumerNames;
      expect(cells.cells.filter((c) => c.table === 'inbox-table' && c.label === 'dead')).toHaveLength(
        consumerNames.length,
      );
      // Two events in the trace, a state for each consumer of the topology.
      expect(
        cells.cells.filter((c) => c.table === 'trace-events' && consumerNames.includes(c.label ?? '')),
      ).toHaveLength(2 * consumerNames.length);
      // The column's name is shown beside each value.
      const deadLabel = await page.evaluate(() => {
        const g = globalThis as unknown as {
          document: { querySelector(s: string): unknown };
          getComputedStyle(e: unknown, pseudo: string): { content: string };
        };
        return g.getComputedStyle(g.document.querySelector('[data-testid="inbox-notify-dead"]'), '::before')
          .content;
      });
      expect(deadLabel).toBe('"dead"');
      // Five events a page on a phone: the list is a screen or two, not thousands of pixels.
      expect(await testid('event-row').count()).toBe(5);
      expect(await testid('events-page').textContent()).toBe('1-5 of 20');
      const events = await testid('events-table').boundingBox();
      expect(events?.height).toBeLessThan(1500);
    });

    it.each([
      { width: 390, titleLines: 2 },
      { width: 1280, titleLines: 1 },
    ])(
      'at $width px a title of ordinary words wraps only between words, and one without spaces still fits',
      async ({ width, titleLines }) => {
        await page.setViewportSize({ width, height: 900 });
        const title = 'Telecommunications partnership agreement renewal';
        const unbroken = 'quarterly_stakeholder_communications_overview_international_distribution_v2';
        fake.pending = [
          {
            taskId,
            title,
            assignee: 'alice',
            status: 'pending_review',
            version: 1,
            createdAt: now,
            updatedAt: now,
          },
        ];
        (fake.events[0] as Entry).title = unbroken;
        (fake.events[1] as Entry).title = title;
        (fake.tasks[taskId] as Entry).title = title;
        await open(`#task=${taskId}`);
        await expect.poll(() => testid('trace-task-title').textContent()).toBe(title);

        // Each word of the element's text as laid out: a word on one line has one box, a word
        // broken across lines one per line. tsconfig has no DOM lib: the globals are typed by hand.
        const layout = (id: string) =>
          page.evaluate((testId) => {
            interface Rect {
              top: number;
            }
            interface Text {
              data: string;
            }
            const g = globalThis as unknown as {
              document: {
                querySelector(s: string): unknown;
                createTreeWalker(root: unknown, show: number): { nextNode(): Text | null };
                createRange(): {
                  setStart(n: Text, o: number): void;
                  setEnd(n: Text, o: number): void;
                  getClientRects(): ArrayLike<Rect>;
                };
              };
            };
            const el = g.document.querySelector(`[data-testid="${testId}"]`);
            if (!el) return { words: [], lines: 0 };
            const walker = g.document.createTreeWalker(el, 4); // NodeFilter.SHOW_TEXT
            const words: { word: string; boxes: number }[] = [];
            const tops = new Set<number>();
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
              for (const m of node.data.matchAll(/\S+/g)) {
                const range = g.document.createRange();
                range.setStart(node, m.index);
                range.setEnd(node, m.index + m[0].length);
                const boxes = Array.from(range.getClientRects());
                for (const b of boxes) tops.add(Math.round(b.top));
                words.push({ word: m[0], boxes: boxes.length });
              }
            }
            return { words, lines: tops.size };
          }, id);

        for (const id of [`pending-task-${taskId}`, `event-task-${approvedEvent}`, 'trace-task-title']) {
          const { words, lines } = await layout(id);
          expect(words.map((w) => w.word).join(' '), id).toBe(title);
          expect(
            words.filter((w) => w.boxes !== 1),
            id,
          ).toEqual([]);
          expect(lines, id).toBeGreaterThanOrEqual(titleLines);
        }
        // The title without spaces is broken where it would leave the screen: every cell, and
        // everything in one, stays on it.
        const cells = await page.evaluate(() => {
          const g = globalThis as unknown as {
            document: {
              documentElement: { scrollWidth: number };
              querySelectorAll(
                s: string,
              ): ArrayLike<{ getBoundingClientRect(): { left: number; right: number } }>;
            };
          };
          return {
            scrollWidth: g.document.documentElement.scrollWidth,
            rights: Array.from(g.document.querySelectorAll('td, td *')).map((el) => {
              const r = el.getBoundingClientRect();
              return r.left < 0 ? -1 : r.right;
            }),
          };
        });
        expect(await testid(`event-task-${withdrawnEvent}`).textContent()).toBe(unbroken);
        expect(cells.scrollWidth).toBeLessThanOrEqual(width);
        expect(cells.rights.filter((right) => right < 0 || right > width + 0.5)).toEqual([]);
      },
    );

    it('renders data as text: markup in a title, an event type or an error never runs or renders', async () => {
      const hostile = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">';
      (fake.tasks[taskId] as { title: string }).title = hostile;
      (fake.events[0] as { eventType: string }).eventType = '<b id="injected">bold</b>';
      (fake.events[1] as { title: string }).title = hostile;
      (fake.outboxDead[0] as { lastError?: string }).lastError = '<img src=x onerror="window.__xss = 3">';
      const errors: string[] = [];
      page.on('pageerror', (err) => errors.push(err.message));

      await open(`#task=${taskId}`);
      await expect.poll(() => testid('trace-task-title').textContent()).toBe(hostile);

      expect(await testid('events-table').textContent()).toContain('<b id="injected">bold</b>');
      expect(await testid(`event-task-${approvedEvent}`).textContent()).toBe(hostile);
      expect(await testid('outbox-dead-list').textContent()).toContain('<img src=x');
      expect(await page.locator('img, b#injected, main script').count()).toBe(0);
      expect(await page.evaluate(() => (globalThis as { __xss?: number }).__xss)).toBeUndefined();
      expect(errors).toEqual([]);
    });

    it('requests nothing but same-origin URLs, and its script runs under its own Content-Security-Policy', async () => {
      const urls: string[] = [];
      page.on('request', (r) => urls.push(r.url()));
      const violations: string[] = [];
      page.on('console', (m) => {
        if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
      });

      await open(`#task=${taskId}`);
      await expect.poll(() => testid('trace-task-title').textContent()).toBe('Spring campaign copy');

      expect(urls.length).toBeGreaterThan(5);
      expect(urls.filter((u) => !u.startsWith(`${origin}/`))).toEqual([]);
      expect(violations).toEqual([]);
    });
  },
);

describe.skipIf(!haveChromium)(
  haveChromium
    ? 'dashboard page in headless Chromium, against the local runtime'
    : 'dashboard page against the local runtime (skipped: chromium not installed)',
  () => {
    let runtime: Runtime;
    let dir: string;
    let ownBrowser: Browser;
    let approved: { taskId: string; eventId: string };
    const title = '<script>window.__xss = 1</script> & "quotes"';
    const post = async (path: string, body: unknown) =>
      (await pipelineClient(runtime.url).call<{ taskId: string; eventId: string }>('POST', path, body)).body;

    beforeAll(async () => {
      dir = tempDataDir('pipeline-dashboard-');
      runtime = await startRuntime({ dataDir: dir, port: 0, sweepMs: 2_000, historyPeriodMs: 1_000 });
      ownBrowser = await launchChromium();
      const created = await post('/tasks', { title, assignee: 'alice' });
      approved = await post(`/tasks/${created.taskId}/approve`, {});
    });

    afterAll(async () => {
      await ownBrowser?.close();
      await runtime?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it("shows the runtime's figures and the approved task's trace through every consumer", async () => {
      const live = await ownBrowser.newPage({ viewport: { width: 1280, height: 900 } });
      const errors: string[] = [];
      live.on('pageerror', (err) => errors.push(err.message));
      const id = (testId: string) => live.getByTestId(testId);

      await live.goto(`${runtime.url}/`);
      // Every consumer of the approval has processed it before its trace is opened.
      const approvedBy = subscriberNames(topology.eventTypes.approved);
      for (const c of approvedBy)
        await expect
          .poll(() => id(`inbox-${c}-processed`).textContent(), { timeout: deliveryBoundMs })
          .toBe('1');
      await id(`event-task-${approved.eventId}`).click();
      await expect.poll(() => id(`trace-${approved.eventId}-notify`).textContent()).toBe('PROCESSED (1)');

      expect(await id('tasks-approved').textContent()).toBe('1');
      expect(await id('outbox-delivered').textContent()).toBe('1');
      expect(await id('effects-archivedObjects').textContent()).toBe('1');
      expect(await id('alarm-outbox-dead').getAttribute('data-state')).toBe('OK');
      expect(await id('trace-task-title').textContent()).toBe(title);
      expect(await id(`event-task-${approved.eventId}`).textContent()).toBe(title);
      for (const c of approvedBy)
        expect(await id(`trace-${approved.eventId}-${c}`).textContent(), c).toBe('PROCESSED (1)');
      expect(await id('error-banner').isVisible()).toBe(false);
      // Empty dead lists render their empty text and nothing else (once a stray "null").
      const deadText = (await live.locator('#dead').textContent()) ?? '';
      expect(deadText).toContain('no dead outbox events');
      expect(deadText).not.toContain('null');
      expect(await live.evaluate(() => (globalThis as { __xss?: number }).__xss)).toBeUndefined();
      expect(errors).toEqual([]);

      const screenshot = process.env.DASHBOARD_SCREENSHOT;
      if (screenshot)
        await live.screenshot({ path: screenshot.replace(/(\.png)?$/, '-runtime.png'), fullPage: true });
      await live.close();
    });

    it('charts the approvals the runtime saw before the page opened, one made while it is open, and the same after a reload', async () => {
      await expect
        .poll(async () => (await pipelineClient(runtime.url).status()).outbox.pending, {
          timeout: deliveryBoundMs,
        })
        .toBe(0);
      const live = await ownBrowser.newPage({ viewport: { width: 1280, height: 900 } });
      const errors: string[] = [];
      live.on('pageerror', (err) => errors.push(err.message));
      const id = (testId: string) => live.getByTestId(testId);
      const counted = async (line: string) =>
        ((await id(`chart-${line}`).getAttribute('data-values')) ?? '')
          .split(',')
          .filter((v) => v !== '')
          .map(Number);
      await live.goto(`${runtime.url}/`);
      // The approval of beforeAll, made before this page existed, from the runtime's history.
      await expect.poll(() => id('chart-approvals-total').textContent()).toBe('1');
      await expect
        .poll(() => id('chart-deliveries-total').textContent(), { timeout: deliveryBoundMs })
        .toBe('1');

      const created = await post('/tasks', { title: 'Chart this approval', assignee: 'alice' });
      const second = await post(`/tasks/${created.taskId}/approve`, {});

      await expect.poll(() => id('chart-approvals-total').textContent()).toBe('2');
      await expect
        .poll(() => id('chart-deliveries-total').textContent(), { timeout: deliveryBoundMs })
        .toBe('2');
      await expect.poll(() => id(`event-task-${second.eventId}`).textContent()).toBe('Chart this approval');
      // Once the runtime has a reading of it, a reload draws the same counts.
      await expect
        .poll(async () => {
          const res = await pipelineClient(runtime.url).call<{
            samples: { approved: number; delivered: number }[];
          }>('GET', '/ops/history');
          const last = res.body.samples[res.body.samples.length - 1];
          return last ? [last.approved, last.delivered] : [];
        })
        .toEqual([2, 2]);
      const before = [await counted('approvals'), await counted('deliveries')];
      await live.reload();
      await expect.poll(() => id('last-updated').textContent()).toMatch(/^updated /);
      expect(await id('chart-approvals-total').textContent()).toBe('2');
      expect(await id('chart-deliveries-total').textContent()).toBe('2');
      expect([await counted('approvals'), await counted('deliveries')]).toEqual(before);
      expect(errors).toEqual([]);
      await live.close();
    });
  },
);
