import { topology } from '../../../functions/topology';
import { countersOf } from '../../../shared/consumers/define-consumer';
import type { ConsumerName } from '../../../shared/topology';
import { consumerNames, type InboxState, inboxState, routedConsumers } from '../trace-view';

/** Colours ALARM/OK when writing to a terminal; plain text otherwise (and with NO_COLOR set). */
export interface Paint {
  ok(text: string): string;
  alarm(text: string): string;
  dim(text: string): string;
}

export function paint(enabled: boolean): Paint {
  const wrap = (code: number) => (text: string) => (enabled ? `\u001b[${code}m${text}\u001b[0m` : text);
  return { ok: wrap(32), alarm: wrap(31), dim: wrap(2) };
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: stripping ANSI colour codes is the point
const ansi = /\u001b\[[0-9;]*m/g;
const width = (s: string) => s.replace(ansi, '').length;

/** One line of a table cell: control characters (a newline in an error) would break the columns. */
export function cell(value: unknown, max = 60): string {
  if (value === null || value === undefined || value === '') return '-';
  // biome-ignore lint/suspicious/noControlCharactersInRegex: replacing control characters is the point
  const s = String(value).replace(/[\u0000-\u001f\u007f]+/g, ' ');
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** The width every human output fits unless `--wide` is given: a terminal's default (80 columns). */
export const narrowWidth = 80;

/** `text` cut to `max` visible columns with an ellipsis; colour codes are dropped from a cut cell. */
export function clip(text: string, max: number): string {
  if (width(text) <= max) return text;
  const plain = text.replace(ansi, '');
  return max <= 1 ? plain.slice(0, Math.max(0, max)) : `${plain.slice(0, max - 1)}…`;
}

/**
 * A left-aligned text table with a header row, columns two spaces apart, at most `maxWidth`
 * columns wide. Too wide, its last column (the free text: an error, a title) is cut first while
 * at least 16 columns of it remain; still too wide, each row is printed as a block of
 * `header value` lines instead (psql's expanded display, `\x auto`), so nothing is cut but long
 * texts. `--wide` passes `Infinity`.
 */
export function table(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  maxWidth = Number.POSITIVE_INFINITY,
): string {
  const widths = headers.map((h, i) => Math.max(width(h), ...rows.map((r) => width(r[i] ?? ''))));
  const render = (cols: readonly number[]) => {
    const line = (cells: readonly string[]) =>
      cells
        .map((c, i) => (i === cells.length - 1 ? c : c + ' '.repeat((cols[i] ?? 0) - width(c))))
        .join('  ')
        .trimEnd();
    return [line(headers), ...rows.map(line)].join('\n');
  };
  const total = widths.reduce((a, b) => a + b, 0) + 2 * (widths.length - 1);
  if (total <= maxWidth) return render(widths);
  const last = widths.length - 1;
  const room = maxWidth - (total - (widths[last] ?? 0));
  if (room >= Math.max(16, width(headers[last] ?? ''))) {
    const cut = rows.map((r) => r.map((c, i) => (i === last ? clip(c, room) : c)));
    return table(headers, cut);
  }
  const label = Math.max(...headers.map(width)) + 2;
  return rows
    .map((r) => headers.map((h, i) => `${h.padEnd(label)}${clip(r[i] ?? '', maxWidth - label)}`).join('\n'))
    .join('\n\n');
}

/** `0s`, `42s`, `5m 03s`, `2h 07m`: the age of the oldest pending event, readable at a glance. */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/**
 * `label` then `parts` three spaces apart, carried on to lines indented under the first part
 * when the next one would pass `maxWidth`: the status and audit lines within 80 columns.
 */
export function labelled(label: string, parts: readonly string[], maxWidth: number): string {
  const indent = 14;
  const lines: string[] = [];
  let line = label.padEnd(indent);
  let empty = true;
  for (const part of parts) {
    if (!empty && width(line) + 3 + width(part) > maxWidth) {
      lines.push(line);
      line = ' '.repeat(indent);
      empty = true;
    }
    line += empty ? part : `   ${part}`;
    empty = false;
  }
  lines.push(line);
  return lines.join('\n');
}

/** A finite number from a JSON value, 0 for anything else. */
export const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
const record = (v: unknown): Record<string, unknown> =>
  v && typeof v === 'object' ? (v as Record<string, unknown>) : {};

/** What each effect counter is called, as the consumer that declares it says. */
const effectLabels: Readonly<Record<string, string>> = Object.fromEntries(
  countersOf(topology.registry).map((c) => [c.name, c.spec.label]),
);

/** `GET /ops/status` as the `status` command prints it. */
export function formatStatus(raw: unknown, p: Paint, maxWidth = narrowWidth): string {
  const s = record(raw);
  const tasks = record(s.tasks);
  const outbox = record(s.outbox);
  const relay = record(s.relay);
  const consumers = record(s.consumers);
  const effects = record(s.effects);
  const alarms = record(s.alarms);
  const audit = record(s.audit);
  const undelivered = record(audit.undelivered);
  const components = record(s.components);
  const out: string[] = [];
  const down = Object.entries(components).filter(([, c]) => record(c).up === false);
  if (down.length > 0) {
    // First: while a component is down, what follows is what could still be read.
    for (const [name, c] of down) {
      const { cause, since } = record(c);
      out.push(
        p.alarm(`${name} DOWN`.padEnd(13)) +
          ` ${typeof cause === 'string' ? cause : 'unknown cause'}${typeof since === 'string' ? ` (since ${since})` : ''}`,
      );
    }
    out.push('');
  }
  const unread = (section: string) => s[section] === null;
  /** A section's line, or that it could not be read (its component is down). */
  const line = (label: string, section: string, parts: () => string[]) =>
    labelled(label, unread(section) ? [p.alarm('not read')] : parts(), maxWidth);
  out.push(line('tasks', 'tasks', () => Object.entries(tasks).map(([k, v]) => `${k} ${num(v)}`)));
  out.push(
    line('outbox', 'outbox', () => [
      `pending ${num(outbox.pending)}`,
      `delivered ${num(outbox.delivered)}`,
      `dead ${num(outbox.dead)}`,
      `oldest pending ${duration(num(outbox.oldestPendingAgeSeconds))}`,
    ]),
  );
  out.push(
    line('relay', 'relay', () => [
      `last run ${typeof relay.lastRunAt === 'string' ? relay.lastRunAt : 'never'}`,
      `errors ${num(relay.errors)}`,
    ]),
  );
  out.push(line('dead letters', 'deadLetters', () => [String(num(s.deadLetters))]));
  // Local only, and only once a start kept a journal line aside: the file is what to look at.
  const journal = record(s.journal);
  if (num(journal.linesKeptAside) > 0) {
    out.push(
      labelled(
        'bus journal',
        [
          p.alarm(`${num(journal.linesKeptAside)} unreadable line(s) kept aside`),
          `in ${String(journal.file)}`,
        ],
        maxWidth,
      ),
    );
  }
  out.push(
    line('audit', 'audit', () => [
      `last run ${typeof audit.lastRunAt === 'string' ? audit.lastRunAt : 'never'}`,
      `behind ${duration(num(audit.behindSeconds))}`,
    ]),
  );
  out.push('');
  // One alarm watches each age for every consumer: the consumer whose age sets it off is painted.
  const largest = (key: string) => Math.max(0, ...Object.values(consumers).map((c) => num(record(c)[key])));
  const flagged = (value: unknown, key: string, alarm: string) => {
    const text = typeof value === 'number' ? duration(value) : '-';
    return alarms[alarm] === 'ALARM' && typeof value === 'number' && value >= largest(key)
      ? p.alarm(text)
      : text;
  };
  out.push(
    table(
      // 'lease age' is the oldest lease's age: the eight columns fit 80.
      ['inbox', 'processed', 'in progress', 'failed', 'dead', 'lease age', 'retry age', 'undelivered'],
      Object.entries(consumers).map(([name, c]) => {
        const r = record(c);
        const dead = num(r.dead);
        const missing = num(undelivered[name]);
        return [
          name,
          String(num(r.processed)),
          String(num(r.inProgress)),
          String(num(r.failed)),
          dead > 0 ? p.alarm(String(dead)) : String(dead),
          flagged(r.oldestLeaseSeconds, 'oldestLeaseSeconds', 'inbox-oldest-lease'),
          flagged(r.oldestRetryAgeSeconds, 'oldestRetryAgeSeconds', 'inbox-retry-age'),
          missing > 0 ? p.alarm(String(missing)) : String(missing),
        ];
      }),
      maxWidth,
    ),
  );
  out.push('');
  out.push(
    table(
      ['effect', 'count'],
      Object.entries(effects).map(([k, v]) => [effectLabels[k] ?? k, String(num(v))]),
      maxWidth,
    ),
  );
  out.push('');
  const firing = Object.values(alarms).filter((a) => a === 'ALARM').length;
  const noData = Object.values(alarms).filter((a) => a !== 'ALARM' && a !== 'OK').length;
  const verdict = [
    ...(unread('alarms') ? ['unknown (not read)'] : []),
    ...(firing > 0 ? [`${firing} in ALARM`] : []),
    ...(noData > 0 ? [`${noData} without data`] : []),
  ].join(', ');
  out.push(
    verdict === '' && down.length === 0
      ? `alarms        all OK`
      : `alarms        ${p.alarm(verdict || 'OK where read')}`,
  );
  for (const [name, state] of Object.entries(alarms)) {
    out.push(`  ${state === 'OK' ? p.ok('OK   ') : p.alarm(String(state).padEnd(5))}  ${name}`);
  }
  return out.join('\n');
}

/**
 * `label` then `text` as whole words on lines of at most `maxWidth` columns, carried on under the
 * text (a word longer than a line is cut across lines): a free text shown in full.
 */
function wrap(label: string, text: string, maxWidth = narrowWidth): string[] {
  const indent = 10;
  const room = Math.max(16, maxWidth - indent);
  // One line of text first, as a cell: a newline in it would break the indent.
  const words = cell(text, Number.POSITIVE_INFINITY).split(' ').filter(Boolean);
  const lines: string[] = [];
  let line = '';
  for (let word of words) {
    while (word.length > room) {
      if (line !== '') lines.push(line);
      lines.push(word.slice(0, room));
      word = word.slice(room);
      line = '';
    }
    if (line === '') line = word;
    else if (line.length + 1 + word.length <= room) line += ` ${word}`;
    else {
      lines.push(line);
      line = word;
    }
  }
  if (line !== '') lines.push(line);
  return lines.map((l, i) => (i === 0 ? label.padEnd(indent) : ' '.repeat(indent)) + l);
}

/** A consumer's column in a trace: its inbox state, or why there is none. */
export function traceCell(state: InboxState | null, routed: boolean): string {
  if (!state) return routed ? 'not received' : 'not routed';
  return state.attempts === null ? state.status : `${state.status} (${state.attempts})`;
}

/**
 * `tasks show`: the task, then each of its events with every consumer's inbox state: one line
 * per event with `--wide`, a block of lines per event within 80 columns.
 */
export function formatTaskTrace(taskRaw: unknown, traceRaw: unknown, maxWidth = narrowWidth): string {
  const t = record(taskRaw);
  const out: string[] = [];
  const field = (label: string, value: unknown) => {
    if (value !== null && value !== undefined && value !== '')
      out.push(`${label.padEnd(10)}${cell(value, Math.min(200, maxWidth - 10))}`);
  };
  field('task', t.taskId);
  field('title', t.title);
  field('status', `${String(t.status)} (version ${String(t.version)})`);
  field('assignee', t.assignee);
  field('reviewer', t.reviewer);
  /** A withdrawal or a rejection: who and when, then the reason, all of them whole (a long ARN too). */
  const ending = (label: string, by: unknown, at: unknown, reason: unknown) => {
    out.push(...wrap(label, `${by ? `by ${String(by)} ` : ''}${at ? `at ${String(at)}` : ''}`, maxWidth));
    if (typeof reason === 'string' && reason !== '') out.push(...wrap('reason', reason, maxWidth));
  };
  // Only a task pending review can be rejected; its rejecter is recorded as its reviewer.
  if (t.withdrawnBy || t.withdrawnAt) ending('withdrawn', t.withdrawnBy, t.withdrawnAt, t.withdrawReason);
  if (t.rejectedAt || t.rejectReason) ending('rejected', t.reviewer, t.rejectedAt, t.rejectReason);
  field('created', t.createdAt);
  field('updated', t.updatedAt);
  const events = Array.isArray(record(traceRaw).events) ? (record(traceRaw).events as unknown[]) : [];
  out.push('');
  if (events.length === 0) {
    out.push('events    none (no approve, reject or withdraw yet)');
    return out.join('\n');
  }
  const names = consumerColumns(events);
  const errors: string[] = [];
  const rows = events.map((raw) => {
    const e = record(raw);
    const routed = routedConsumers(String(e.eventType));
    const states = record(e.consumers);
    if (e.lastError) errors.push(clip(`  ${String(e.eventId)} outbox: ${cell(e.lastError, 300)}`, maxWidth));
    const cells = names.map((c) => {
      const state = inboxState(states[c]);
      if (state?.lastError)
        errors.push(clip(`  ${String(e.eventId)} ${c}: ${cell(state.lastError, 300)}`, maxWidth));
      return traceCell(state, routed.includes(c as ConsumerName));
    });
    return [
      cell(e.eventId),
      cell(e.eventType),
      cell(e.version),
      `${cell(e.status)} (${num(e.attempts)})`,
      cell(e.createdAt),
      cell(e.deliveredAt),
      ...cells,
    ];
  });
  out.push(table(['event', 'type', 'version', 'outbox', 'created', 'delivered', ...names], rows, maxWidth));
  if (errors.length > 0) out.push('', 'last errors', ...errors);
  return out.join('\n');
}

// The topology's consumers first, then any other name the server reports (never hide data).
function consumerColumns(events: readonly unknown[]): string[] {
  const names: string[] = [...consumerNames];
  for (const e of events)
    for (const c of Object.keys(record(record(e).consumers))) if (!names.includes(c)) names.push(c);
  return names;
}

/** Dead outbox events as `outbox dead` lists them. */
export function formatOutboxDead(list: readonly unknown[], maxWidth = narrowWidth): string {
  if (list.length === 0) return 'no dead outbox events';
  return table(
    ['event', 'type', 'task', 'attempts', 'created', 'last error'],
    list.map((raw) => {
      const d = record(raw);
      return [
        cell(d.eventId),
        cell(d.eventType),
        cell(d.aggregateId),
        cell(d.attempts),
        cell(d.createdAt),
        cell(d.lastError),
      ];
    }),
    maxWidth,
  );
}

/** Dead inbox records of one consumer as `inbox dead` lists them. */
export function formatInboxDead(consumer: string, list: readonly unknown[], maxWidth = narrowWidth): string {
  if (list.length === 0) return `no dead ${consumer} inbox records`;
  return table(
    ['event', 'type', 'task', 'attempts', 'updated', 'last error'],
    list.map((raw) => {
      const d = record(raw);
      const state = inboxState(d);
      return [
        cell(inboxEventId(d)),
        cell(d.eventType),
        cell(d.taskId),
        cell(state?.attempts),
        cell(state?.updatedAt),
        cell(state?.lastError),
      ];
    }),
    maxWidth,
  );
}

/** `GET /ops/audit` as the `audit` command prints it: where the walk is, then what is missing. */
export function formatAudit(raw: unknown, maxWidth = narrowWidth): string {
  const a = record(raw);
  const cursor = record(a.cursor);
  const undelivered = record(a.undelivered);
  const findings = Array.isArray(a.findings) ? (a.findings as unknown[]) : [];
  const total = Object.values(undelivered).reduce<number>((n, v) => n + num(v), 0);
  const out = [
    labelled(
      'last run',
      [typeof a.lastRunAt === 'string' ? `${a.lastRunAt} (${num(a.lastRunAudited)} events)` : 'never'],
      maxWidth,
    ),
    labelled(
      'audited',
      [
        `${num(a.audited)} events, up to ${typeof cursor.deliveredAt === 'string' ? `delivered ${cursor.deliveredAt}` : 'none yet'}`,
        `behind ${duration(num(a.behindSeconds))}`,
      ],
      maxWidth,
    ),
    labelled(
      'undelivered',
      Object.entries(undelivered).map(([c, n]) => `${c} ${num(n)}`),
      maxWidth,
    ),
    '',
  ];
  if (total === 0) {
    out.push('every audited event reached every consumer its rules route it to');
    return out.join('\n');
  }
  out.push(
    table(
      ['event', 'consumer', 'delivered at', 'found at', 're-sent'],
      findings.map((raw) => {
        const f = record(raw);
        return [
          cell(f.eventId),
          cell(f.consumer),
          cell(f.deliveredAt),
          cell(f.foundAt),
          f.redrivenAt ? `${cell(f.redrivenAt)} (${num(f.redrives)}x)` : '-',
        ];
      }),
      maxWidth,
    ),
  );
  if (findings.length < total) out.push(`(the first ${findings.length} of ${total})`);
  return out.join('\n');
}

/** Bus dead letters as `dead-letters` lists them. */
export function formatDeadLetters(list: readonly unknown[], maxWidth = narrowWidth): string {
  if (list.length === 0) return 'no dead letters';
  return table(
    ['id', 'consumer', 'rule', 'attempts', 'dead at', 'error'],
    list.map((raw) => {
      const d = record(raw);
      return [cell(d.id), cell(d.consumer), cell(d.rule), cell(d.attempts), cell(d.deadAt), cell(d.error)];
    }),
    maxWidth,
  );
}

/** The event id of an inbox record, whichever name the consumer side gives it. */
export function inboxEventId(raw: unknown): string {
  const d = record(raw);
  const id = d.eventId ?? d.id;
  return typeof id === 'string' ? id : '';
}

/** One task of `GET /tasks` as `tasks list` shows it. */
const listedTask = (raw: unknown) => {
  const t = record(raw);
  return {
    taskId: cell(t.taskId),
    status: cell(t.status),
    version: cell(t.version),
    assignee: cell(t.assignee),
    createdAt: cell(t.createdAt),
    updatedAt: cell(t.updatedAt),
    title: cell(t.title, 200),
  };
};

/**
 * `tasks list`: newest first, the id an operator needs for every other command, then the title
 * (cut to fit 80 columns; `--wide` adds version, assignee and times), then how to get the next page.
 */
export function formatTaskList(raw: unknown, maxWidth = narrowWidth, status?: string): string {
  const answer = record(raw);
  const tasks = (Array.isArray(answer.tasks) ? answer.tasks : []).map(listedTask);
  const out: string[] = [];
  if (tasks.length === 0) out.push(status ? `no ${status} tasks` : 'no tasks');
  else if (maxWidth === Number.POSITIVE_INFINITY) {
    out.push(
      table(
        ['task', 'status', 'version', 'assignee', 'created', 'updated', 'title'],
        tasks.map((t) => [t.taskId, t.status, t.version, t.assignee, t.createdAt, t.updatedAt, t.title]),
      ),
    );
  } else {
    out.push(
      table(
        ['task', 'status', 'title'],
        tasks.map((t) => [t.taskId, t.status, t.title]),
        maxWidth,
      ),
    );
  }
  if (typeof answer.nextCursor === 'string' && answer.nextCursor !== '') {
    // The cursor on a line of its own: it is opaque and may be long.
    out.push('', 'next page: add --cursor', answer.nextCursor);
  }
  return out.join('\n');
}
