import { describe, expect, it } from 'vitest';
import { runCli } from '../../infra/ops-tools/cli/cli';
import type { FetchLike } from '../../infra/ops-tools/cli/cli-client';

// Every command's human output fits 80 columns (a terminal's default), with long ids, times and
// error texts; `--wide` is the way to get one line per row whatever its width.

const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
const when = '2026-05-04T10:00:00.000Z';
const error = 'ThrottlingException: Rate exceeded for the account in this region, try again later please';

const answers: Record<string, unknown> = {
  '/ops/status': {
    tasks: { pending_review: 123456, approved: 987654, rejected: 12, withdrawn: 3456 },
    outbox: { pending: 100000, delivered: 99999999, dead: 12345, oldestPendingAgeSeconds: 86_000 },
    consumers: Object.fromEntries(
      ['index', 'notify', 'archive'].map((c) => [
        c,
        {
          processed: 99999999,
          inProgress: 1234,
          failed: 12345,
          dead: 1234,
          oldestLeaseSeconds: 7_000,
          oldestRetryAgeSeconds: 86_000,
        },
      ]),
    ),
    effects: { indexDocuments: 99999999, notificationsSent: 99999999, archivedObjects: 99999999 },
    deadLetters: 12345,
    audit: {
      undelivered: { index: 1234, notify: 0, archive: 99999 },
      lastRunAt: when,
      behindSeconds: 86_000,
    },
    alarms: { 'inbox-oldest-lease': 'ALARM', 'outbox-oldest-pending-age': 'INSUFFICIENT_DATA' },
    relay: { lastRunAt: when, errors: 12345 },
  },
  [`/tasks/${id(1)}`]: {
    taskId: id(1),
    title:
      'A title of a hundred and twenty characters, as long as a marketing title tends to get when nobody stops it',
    status: 'withdrawn',
    version: 3,
    assignee: 'alice.longname@example.com',
    reviewer: 'arn:aws:sts::123456789012:assumed-role/content-reviewer/rita.longname@example.com',
    withdrawnBy: 'arn:aws:sts::123456789012:assumed-role/content-reviewer/rita.longname@example.com',
    withdrawReason: 'legal hold requested by the legal department until further notice',
    createdAt: when,
    updatedAt: when,
  },
  [`/ops/tasks/${id(1)}/trace`]: {
    events: [
      {
        eventId: id(2),
        eventType: 'content.approved',
        version: 2,
        status: 'delivered',
        attempts: 10,
        createdAt: when,
        deliveredAt: when,
        lastError: error,
        consumers: {
          index: { status: 'PROCESSED', attempts: 1 },
          notify: { status: 'DEAD', attempts: 10, lastError: error },
          archive: { status: 'FAILED', attempts: 3, lastError: error },
        },
      },
    ],
  },
  '/ops/outbox/dead': [
    {
      eventId: id(3),
      eventType: 'content.withdrawn',
      aggregateId: id(1),
      attempts: 10,
      createdAt: when,
      lastError: error,
    },
  ],
  '/ops/inbox/notify/dead': [
    {
      eventId: id(3),
      eventType: 'content.withdrawn',
      taskId: id(1),
      attempts: 10,
      updatedAt: when,
      lastError: error,
    },
  ],
  '/ops/dead-letters': [
    {
      id: id(3),
      consumer: 'archive',
      rule: 'content-withdrawn-to-archive',
      attempts: 185,
      deadAt: when,
      error,
    },
  ],
  '/ops/audit': {
    cursor: { deliveredAt: when, eventId: id(4) },
    lastRunAt: when,
    lastRunAudited: 99999,
    audited: 99999999,
    behindSeconds: 86_000,
    undelivered: { index: 99999, notify: 99999, archive: 99999 },
    findings: [
      {
        eventId: id(4),
        consumer: 'archive',
        deliveredAt: when,
        foundAt: when,
        redrivenAt: when,
        redrives: 12,
      },
    ],
  },
  '/tasks': {
    tasks: [
      {
        taskId: id(1),
        title: 'A title of a hundred and twenty characters, as long as a marketing title gets',
        assignee: 'alice',
        status: 'pending_review',
        version: 1,
        createdAt: when,
        updatedAt: when,
      },
    ],
    nextCursor: 'eyJjcmVhdGVkQXQiOiIyMDI2LTA1LTA0VDEwOjAwOjAwLjAwMFoiLCJ0YXNrSWQiOiIwMCJ9',
  },
};

const fetch: FetchLike = async (url) => {
  const path = new URL(url).pathname;
  if (!(path in answers)) throw new Error(`no answer for ${path}`);
  return new Response(JSON.stringify(answers[path]), { headers: { 'content-type': 'application/json' } });
};

async function run(argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    fetch,
    env: {},
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  });
  return { code, stdout, stderr };
}

const listings: string[][] = [
  ['status'],
  ['tasks', 'show', id(1)],
  ['tasks', 'list'],
  ['outbox', 'dead'],
  ['inbox', 'dead', '--consumer', 'notify'],
  ['dead-letters'],
  ['audit'],
];

describe('output width', () => {
  it.each(listings.map((argv) => [argv.join(' '), argv] as const))('%s fits 80 columns', async (_, argv) => {
    const r = await run([...argv]);

    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const wide = r.stdout.split('\n').filter((l) => l.length > 80);
    expect(wide).toEqual([]);
  });

  it('--wide prints rows as wide as their content', async () => {
    const r = await run(['tasks', 'show', id(1), '--wide']);

    expect(r.code).toBe(0);
    expect(Math.max(...r.stdout.split('\n').map((l) => l.length))).toBeGreaterThan(120);
    expect(r.stdout).toMatch(new RegExp(`^${id(2)}\\s+content.approved\\s+2\\s+delivered \\(10\\)`, 'm'));
  });
});
