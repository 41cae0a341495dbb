// @ts-check
/*
 * The local dashboard's code. The server (infra/ops-tools/dashboard/page.ts) inlines this file as the
 * page's one module script, allowed by its sha256 hash in the Content-Security-Policy, so nothing
 * else runs. It never assigns markup: every value becomes a text node or an attribute, so a title
 * holding markup shows as text. Type-checked by ./tsconfig.json (DOM lib), linted by Biome.
 *
 * The chart helpers at the top are pure and exported for test/unit/dashboard-chart.test.ts. Below
 * them come the page's helpers, then its parts, each a function drawing one thing the page shows
 * (the status panels, the chart, the pending tasks and latest events, the dead lists, the task
 * trace, the refresh loop and its error banner), and startDashboard, which wires them together.
 * The page itself starts only where there is a document.
 */

/**
 * One reading of `GET /ops/status`: the two counters whose increase the chart draws, and the
 * oldest pending age as it was.
 * @typedef {{ at: number, approved: number, delivered: number, oldestPendingAgeSeconds: number }} Sample
 */

/**
 * What the chart draws, one value per bucket, oldest first; null where no reading fell in the
 * bucket (the page was not open, or the status could not be read), so no line is drawn there.
 * @typedef {{ approvals: (number | null)[], deliveries: (number | null)[], oldestAge: (number | null)[] }} ChartSeries
 */

/**
 * The chart's window: the last hour, in 60 buckets of a minute. The runtime keeps that hour of
 * readings (`GET /ops/history`), so a page opened or reloaded now draws the same chart.
 */
export const chartWindowMs = 60 * 60_000;
export const chartBuckets = 60;

/**
 * @param {unknown} v
 * @returns {number} v when it is a finite number, else 0 (the page shows what it is sent, never NaN)
 */
function num(v) {
  return typeof v === 'number' && Number.isFinite(v) ? v : 0;
}

/**
 * @param {unknown} v
 * @returns {Record<string, unknown>} v when it is an object, else an empty one
 */
function obj(v) {
  return v && typeof v === 'object' ? /** @type {Record<string, unknown>} */ (v) : {};
}

/**
 * The sample a status answer gives, read defensively: a missing figure counts as 0.
 * @param {unknown} status
 * @param {number} at
 * @returns {Sample}
 */
export function sampleOf(status, at) {
  const s = obj(status);
  const outbox = obj(s.outbox);
  return {
    at,
    approved: num(obj(s.tasks).approved),
    delivered: num(outbox.delivered),
    oldestPendingAgeSeconds: num(outbox.oldestPendingAgeSeconds),
  };
}

/**
 * The samples with `sample` appended, dropping those that fell out of the window. One bucket more
 * than the window is kept, so the oldest bucket shown still has the reading before it to count from.
 * @param {readonly Sample[]} samples oldest first
 * @param {Sample} sample
 * @param {number} windowMs
 * @param {number} buckets
 * @returns {Sample[]}
 */
export function addSample(samples, sample, windowMs, buckets) {
  const keepFrom = sample.at - windowMs - windowMs / buckets;
  return [...samples.filter((s) => s.at >= keepFrom && s.at < sample.at), sample];
}

/**
 * The series the chart draws over the `buckets` buckets ending with the one holding `now`.
 * Buckets are aligned to absolute time, so a reading stays in its bucket from one poll to the
 * next and the chart scrolls by whole buckets. Approvals and deliveries are how much their
 * counters rose between consecutive readings, counted in the later reading's bucket; a counter
 * that falls (delivered rows purged past retention, an approved task withdrawn) adds nothing.
 * The age is the largest oldest-pending age read in the bucket.
 * @param {readonly Sample[]} samples oldest first
 * @param {number} now
 * @param {number} windowMs
 * @param {number} buckets
 * @returns {ChartSeries}
 */
export function chartSeries(samples, now, windowMs, buckets) {
  const bucketMs = windowMs / buckets;
  const first = Math.floor(now / bucketMs) - buckets + 1;
  /** @returns {(number | null)[]} */
  const empty = () => Array.from({ length: buckets }, () => null);
  const series = { approvals: empty(), deliveries: empty(), oldestAge: empty() };
  samples.forEach((s, i) => {
    const b = Math.floor(s.at / bucketMs) - first;
    if (b < 0 || b >= buckets) return;
    series.oldestAge[b] = Math.max(series.oldestAge[b] ?? 0, s.oldestPendingAgeSeconds);
    const before = samples[i - 1];
    if (!before) return; // the first reading has nothing to count from
    series.approvals[b] = (series.approvals[b] ?? 0) + Math.max(0, s.approved - before.approved);
    series.deliveries[b] = (series.deliveries[b] ?? 0) + Math.max(0, s.delivered - before.delivered);
  });
  return series;
}

/**
 * The top of a chart's scale: the smallest 1, 2 or 5 times a power of ten that holds `value`,
 * at least 1, so a line of zeros lies on the baseline and small counts fill the height.
 * @param {number} value
 * @returns {number}
 */
export function niceCeiling(value) {
  if (!(value > 1)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  const step = [1, 2, 5].find((m) => m * power >= value);
  return (step ?? 10) * power;
}

/** Scale tops for an age, in seconds: the round figures a clock reads (30s, 2m, 15m, 1h...). */
const ageSteps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];

/**
 * The top of an age chart's scale: the smallest round age that holds `seconds`; past an hour,
 * a nice number of hours.
 * @param {number} seconds
 * @returns {number}
 */
export function niceAgeCeiling(seconds) {
  return ageSteps.find((step) => step >= seconds) ?? niceCeiling(seconds / 3600) * 3600;
}

/**
 * An SVG path through `values` across `width` x `height` (y grows downwards), `max` at the top.
 * A null value breaks the line; a point with no neighbour is drawn as a dot (a zero-length
 * segment, which a round line cap renders).
 * @param {readonly (number | null)[]} values
 * @param {number} max
 * @param {number} width
 * @param {number} height
 * @returns {string}
 */
export function linePath(values, max, width, height) {
  const step = values.length > 1 ? width / (values.length - 1) : 0;
  const round = (/** @type {number} */ n) => Math.round(n * 10) / 10;
  /** @type {string[]} */
  const parts = [];
  values.forEach((v, i) => {
    if (v === null || v === undefined) return;
    const x = round(i * step);
    const y = round(height - (Math.min(Math.max(v, 0), max) / max) * height);
    const joined = i > 0 && values[i - 1] !== null && values[i - 1] !== undefined;
    const alone = !joined && (values[i + 1] === null || values[i + 1] === undefined);
    parts.push(`${joined ? 'L' : 'M'}${x} ${y}${alone ? 'h0' : ''}`);
  });
  return parts.join(' ');
}

/**
 * @param {readonly (number | null)[]} values
 * @returns {number} the sum of the values, nulls counting 0
 */
export function total(values) {
  let sum = 0;
  for (const v of values) sum += v ?? 0;
  return sum;
}

/**
 * The readings of a `GET /ops/history` answer, oldest first, read defensively: an entry without
 * a numeric time is dropped, a missing figure counts 0.
 * @param {unknown} history
 * @returns {Sample[]}
 */
export function historySamples(history) {
  const list = obj(history).samples;
  if (!Array.isArray(list)) return [];
  return list
    .map((raw) => {
      const r = obj(raw);
      return {
        at: num(r.at),
        approved: num(r.approved),
        delivered: num(r.delivered),
        oldestPendingAgeSeconds: num(r.oldestPendingAgeSeconds),
      };
    })
    .filter((sample) => sample.at > 0)
    .sort((a, b) => a.at - b.at);
}

/**
 * The header's verdict when `GET /ops/status` could not be read: no figure is known, so nothing
 * is OK and nothing is known to be in alarm.
 * @param {string} why
 * @returns {{ text: string, ok: boolean, unknown: true }}
 */
export function unknownSummary(why) {
  return { text: `unknown: ${why}`, ok: false, unknown: true };
}

/**
 * One read of a refresh that failed: its message, and when no answer came at all (the server
 * stopped, the network down), the browser's reason.
 * @typedef {{ message: string, unreachable?: string }} ReadFailure
 */

/**
 * The error banner's text for the reads of one refresh that failed. With the server gone every
 * read fails alike, so that is said once, with its reason (once per distinct reason), not once
 * per read; each failure that came with an answer (a 500 of one route) is listed as it is.
 * @param {readonly ReadFailure[]} failures at least one
 * @param {number} refreshMs
 * @returns {string}
 */
export function failureBanner(failures, refreshMs) {
  const retrying = `Retrying every ${refreshMs / 1000} s.`;
  /** @type {string[]} */
  const reasons = [];
  /** @type {string[]} */
  const answered = [];
  let unanswered = 0;
  for (const f of failures) {
    if (f.unreachable === undefined) {
      if (!answered.includes(f.message)) answered.push(f.message);
      continue;
    }
    unanswered += 1;
    if (!reasons.includes(f.unreachable)) reasons.push(f.unreachable);
  }
  const why = reasons.join('; ');
  if (answered.length === 0) {
    return `The pipeline is unreachable (${why}): what is shown may be stale. ${retrying}`;
  }
  return [
    `Some figures could not be read; they may be stale. ${retrying}`,
    ...(unanswered > 0 ? [`${unanswered} of the requests got no answer (${why})`] : []),
    ...answered,
  ].join('\n');
}

/**
 * The header's one-line verdict on a status answer: the components down first (their figures
 * and alarms cannot be read meanwhile), then the alarms not OK. Never "all OK" while a component
 * is down or an alarm has no data.
 * @param {unknown} status
 * @returns {{ text: string, ok: boolean }}
 */
export function healthSummary(status) {
  const s = obj(status);
  const down = Object.keys(obj(s.components)).filter((n) => obj(obj(s.components)[n]).up === false);
  const alarms = obj(s.alarms);
  const names = Object.keys(alarms);
  const firing = names.filter((n) => alarms[n] === 'ALARM').length;
  const noData = names.filter((n) => alarms[n] !== 'ALARM' && alarms[n] !== 'OK').length;
  /** @type {string[]} */
  const parts = [];
  if (down.length > 0) parts.push(`${down.join(', ')} down`);
  if (s.alarms === null || s.alarms === undefined) parts.push('alarms unknown');
  if (firing > 0) parts.push(`${firing} in ALARM`);
  if (noData > 0) parts.push(`${noData} without data`);
  if (parts.length > 0) return { text: parts.join(', '), ok: false };
  return { text: names.length === 0 ? 'no alarms' : 'all OK', ok: true };
}

/**
 * @param {unknown} seconds
 * @returns {string} an age as people read it: 42s, 6m 40s, 2h 05m
 */
function age(seconds) {
  const s = Math.max(0, Math.floor(num(seconds)));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** @typedef {{ consumers: string[], effectLabels: Record<string, string | undefined>, routes: Record<string, string[] | undefined>, refreshMs: number, uuidPattern: { source: string, flags: string } }} DashboardConfig */
/** @typedef {Node | string | number | null | undefined | Child[]} Child */
/** @typedef {Record<string, string | number | null | undefined>} Attrs */
/** @typedef {{ label: string, num?: boolean }} Column */

/** Rows a paged list shows at a time: fewer on a phone, where each row stacks its cells. */
const pageSizeWide = 10;
const pageSizeNarrow = 5;
const narrowQuery = '(max-width: 700px)';

/** An ops API answer other than 2xx; loadTrace clears the trace on a 404 only. */
class RequestError extends Error {
  /**
   * @param {string} message
   * @param {number} status
   */
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

/** An ops API request that got no answer: the server stopped, or the network is down. */
class UnreachableError extends Error {
  /**
   * @param {string} request its method and path
   * @param {string} reason what the browser said (Chromium: "Failed to fetch")
   */
  constructor(request, reason) {
    super(`${request}: the pipeline is unreachable (${reason})`);
    this.reason = reason;
  }
}

/**
 * @param {unknown} e
 * @returns {string}
 */
function messageOf(e) {
  return e instanceof Error ? e.message : String(e);
}

/**
 * @param {unknown} v
 * @returns {string} v as text, '-' when absent
 */
function text(v) {
  return v === null || v === undefined || v === '' ? '-' : String(v);
}

/**
 * @param {unknown} v
 * @returns {string} a timestamp in the reader's locale, '-' when absent
 */
function when(v) {
  if (v === null || v === undefined || v === '') return '-';
  const d = new Date(/** @type {string | number} */ (v));
  return Number.isNaN(d.getTime()) ? String(v) : d.toLocaleString();
}

/**
 * @param {string} id
 * @returns {HTMLElement} the page's element with that id; the page is static, so a missing one is a bug
 */
function $(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el;
}

/**
 * @param {Element} el
 * @param {Child} children
 */
function append(el, children) {
  if (children === undefined || children === null) return;
  if (Array.isArray(children)) {
    for (const c of children) append(el, c);
    return;
  }
  el.appendChild(typeof children === 'object' ? children : document.createTextNode(String(children)));
}

/**
 * An element with attributes (`class`, `testid` for data-testid, any other by name) and children,
 * strings becoming text nodes.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs} [attrs]
 * @param {Child} [children]
 * @returns {HTMLElementTagNameMap[K]}
 */
function h(tag, attrs = {}, children = null) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === 'class') el.className = String(v);
    else if (k === 'testid') el.setAttribute('data-testid', String(v));
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

/**
 * @param {string} label
 * @param {string | number} value
 * @param {string} testid
 * @param {boolean} [bad]
 */
function stat(label, value, testid, bad) {
  return h('div', { class: 'stat' }, [
    h('span', {}, label),
    h('span', { class: `value${bad ? ' bad' : ''}`, testid }, value),
  ]);
}

/**
 * @param {(string | Column)[]} headers
 * @param {HTMLTableRowElement[]} rows
 * @param {string} emptyText
 * @param {string} testid
 */
function table(headers, rows, emptyText, testid) {
  const head = h(
    'tr',
    {},
    headers.map((c) =>
      typeof c === 'string' ? h('th', {}, c) : h('th', { class: c.num ? 'num' : null }, c.label),
    ),
  );
  // Each cell names its column, which a narrow screen shows beside it (style.css stacks the rows).
  const labels = headers.map((c) => (typeof c === 'string' ? c : c.label));
  for (const row of rows) {
    Array.from(row.cells).forEach((cell, i) => {
      cell.setAttribute('data-label', labels[i] ?? '');
    });
  }
  const body =
    rows.length > 0
      ? rows
      : [h('tr', {}, h('td', { colspan: headers.length, class: 'muted empty' }, emptyText))];
  return h(
    'div',
    { class: 'table-wrap' },
    h('table', { testid }, [h('thead', {}, head), h('tbody', {}, body)]),
  );
}

/**
 * @param {unknown} body
 * @param {string} raw
 */
function errorText(body, raw) {
  const error = obj(body).error;
  if (typeof error === 'string') return error;
  return raw ? raw.slice(0, 300) : '(empty body)';
}

/**
 * One ops API request; resolves to its JSON, rejects with a message a person can act on.
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<unknown>}
 */
async function call(method, path, body) {
  let res;
  try {
    res = await fetch(path, {
      method,
      cache: 'no-store',
      headers: body === undefined ? { accept: 'application/json' } : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new UnreachableError(`${method} ${path}`, messageOf(e));
  }
  const raw = await res.text();
  let json;
  try {
    json = raw ? JSON.parse(raw) : undefined;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    throw new RequestError(`${method} ${path} failed: ${res.status} ${errorText(json, raw)}`, res.status);
  }
  if (json === undefined) throw new Error(`${method} ${path}: answered without JSON`);
  return json;
}

/*
 * The page's parts, one per thing it shows, then startDashboard, which wires them together.
 * Each part takes what it needs: its config, the consumers known, and what the parts share.
 */

/**
 * The page's paged lists: the page each shows, by its key, kept across the refreshes that redraw
 * it; a page holds fewer rows on a narrow screen.
 * @param {MediaQueryList} narrow
 */
function pagedLists(narrow) {
  /** @type {Map<string, number>} */
  const pages = new Map();
  const pageSize = () => (narrow.matches ? pageSizeNarrow : pageSizeWide);

  /**
   * The rows of list `key` its page shows, and a pager when they do not fit one page.
   * @param {string} key
   * @param {HTMLTableRowElement[]} rows
   * @param {() => void} redraw draws the list again (after a page change)
   * @returns {{ shown: HTMLTableRowElement[], pager: HTMLElement | null }}
   */
  function paged(key, rows, redraw) {
    const size = pageSize();
    const count = Math.max(1, Math.ceil(rows.length / size));
    const page = Math.min(pages.get(key) ?? 0, count - 1);
    pages.set(key, page);
    const shown = rows.slice(page * size, (page + 1) * size);
    if (count <= 1) return { shown, pager: null };
    const from = page * size + 1;
    return {
      shown,
      pager: pager(
        key,
        `${from}-${from + shown.length - 1} of ${rows.length}`,
        page > 0,
        page < count - 1,
        (d) => {
          pages.set(key, page + d);
          redraw();
        },
      ),
    };
  }

  return {
    pageSize,
    paged,
    /** @param {string} key a list shown anew, from its first page */
    forget: (key) => {
      pages.delete(key);
    },
  };
}

/** @typedef {ReturnType<typeof pagedLists>} PagedLists */

/**
 * What the parts share: the paged lists, and what any part may start (a refresh, after a redrive
 * or a page change; a task's trace, from a link).
 * @typedef {PagedLists & { refresh: () => void, showTrace: (id: string) => void }} Shared
 */

/**
 * A pager: previous and next buttons around a label, each button enabled where there is a page.
 * @param {string} key
 * @param {string} label
 * @param {boolean} hasPrevious
 * @param {boolean} hasNext
 * @param {(delta: number) => void} go
 */
function pager(key, label, hasPrevious, hasNext, go) {
  const previous = h('button', { type: 'button', testid: `${key}-prev` }, 'Previous');
  previous.disabled = !hasPrevious;
  previous.addEventListener('click', () => go(-1));
  const next = h('button', { type: 'button', testid: `${key}-next` }, 'Next');
  next.disabled = !hasNext;
  next.addEventListener('click', () => go(1));
  return h('div', { class: 'pager', testid: `${key}-pager` }, [
    previous,
    h('span', { class: 'muted', testid: `${key}-page` }, label),
    next,
  ]);
}

// The status panels: the header's verdict, the component and alarm pills, the figures, the inboxes.

/** The inbox counts a consumer's row shows, by their key in the status, with their column's label. */
const inboxColumns = [
  ['processed', 'processed'],
  ['inProgress', 'in progress'],
  ['failed', 'failed'],
  ['dead', 'dead'],
];

/**
 * The status panels, drawn from each status read; while none can be read, the pills of the
 * components and alarms last read say "unknown".
 * @param {Record<string, string | undefined>} effectLabels
 * @param {string[]} consumers the consumers known: one the status names is added
 */
function statusPanel(effectLabels, consumers) {
  /** Alarm and component names of the last status read: shown as unknown while none can be read. */
  /** @type {string[]} */
  let alarmNames = [];
  /** @type {string[]} */
  let componentNames = [];
  return {
    /** @param {unknown} status */
    render(status) {
      const s = obj(status);
      renderFigures(s, effectLabels);
      for (const c of Object.keys(obj(s.consumers))) if (!consumers.includes(c)) consumers.push(c);
      renderInbox(s);
      alarmNames = Object.keys(obj(s.alarms));
      componentNames = Object.keys(obj(s.components));
      renderPills(s);
    },

    /**
     * The status could not be read: the header and every pill say "unknown", never OK (nor ALARM,
     * which is no more known). The figures below stay as last read, under the error banner.
     * @param {string} why
     */
    renderUnknown(why) {
      const verdict = unknownSummary(why);
      const summary = $('alarm-summary');
      summary.textContent = verdict.text;
      summary.className = 'unknown';
      $('alarms').replaceChildren(
        ...componentNames.map((n) =>
          h(
            'span',
            { class: 'badge unknown', testid: `component-${n}`, 'data-state': 'unknown' },
            `${n}: unknown`,
          ),
        ),
        ...alarmNames.map((n) =>
          h(
            'span',
            { class: 'badge unknown', testid: `alarm-${n}`, 'data-state': 'UNKNOWN' },
            `${n}: unknown`,
          ),
        ),
      );
    },
  };
}

/**
 * The tasks, outbox and relay, and effects cards.
 * @param {Record<string, unknown>} s a status answer
 * @param {Record<string, string | undefined>} effectLabels
 */
function renderFigures(s, effectLabels) {
  const tasks = obj(s.tasks);
  const outbox = obj(s.outbox);
  const relay = obj(s.relay);
  const effects = obj(s.effects);
  const alarms = obj(s.alarms);
  $('tasks').replaceChildren(
    ...Object.keys(tasks).map((k) => stat(k.replace(/_/g, ' '), num(tasks[k]), `tasks-${k}`)),
  );
  $('outbox').replaceChildren(
    stat('pending', num(outbox.pending), 'outbox-pending'),
    stat('delivered', num(outbox.delivered), 'outbox-delivered'),
    stat('dead', num(outbox.dead), 'outbox-dead', num(outbox.dead) > 0),
    stat(
      'oldest pending',
      age(outbox.oldestPendingAgeSeconds),
      'outbox-oldest-pending-age',
      alarms.oldestPendingAge === 'ALARM',
    ),
    stat('relay last run', when(relay.lastRunAt), 'relay-last-run'),
    stat('relay errors', num(relay.errors), 'relay-errors', num(relay.errors) > 0),
  );
  $('effects').replaceChildren(
    ...Object.keys(effects).map((k) => stat(effectLabels[k] ?? k, num(effects[k]), `effects-${k}`)),
    stat('bus dead letters', num(s.deadLetters), 'dead-letters-count', num(s.deadLetters) > 0),
  );
}

/**
 * The consumer inboxes' table: each consumer's counts, ages and undelivered events.
 * @param {Record<string, unknown>} s a status answer
 */
function renderInbox(s) {
  const alarms = obj(s.alarms);
  const inbox = obj(s.consumers);
  const undelivered = obj(obj(s.audit).undelivered);
  /**
   * An age figure of the inbox (null: nothing in that state). One alarm watches it for every
   * consumer: red is the consumer whose age sets it off while it fires.
   * @param {string} c
   * @param {string} key `oldestLeaseSeconds` or `oldestRetryAgeSeconds`
   * @param {string} alarm
   * @param {string} testid
   */
  const ageCell = (c, key, alarm, testid) => {
    const seconds = obj(inbox[c])[key];
    const largest = Math.max(0, ...Object.keys(inbox).map((k) => num(obj(inbox[k])[key])));
    const bad = alarms[alarm] === 'ALARM' && typeof seconds === 'number' && seconds >= largest;
    return h(
      'td',
      { class: `num value${bad ? ' bad' : ''}`, testid: `inbox-${c}-${testid}` },
      seconds === null || seconds === undefined ? '-' : age(seconds),
    );
  };
  $('inbox').replaceChildren(
    table(
      [
        { label: 'consumer' },
        ...inboxColumns.map((c) => ({ label: c[1] ?? '', num: true })),
        { label: 'oldest lease', num: true },
        { label: 'retry age', num: true },
        { label: 'undelivered', num: true },
      ],
      Object.keys(inbox).map((c) => {
        const counts = obj(inbox[c]);
        const missing = num(undelivered[c]);
        return h('tr', {}, [
          h('td', {}, c),
          ...inboxColumns.map(([key]) => {
            const v = num(counts[key ?? '']);
            return h(
              'td',
              { class: `num value${key === 'dead' && v > 0 ? ' bad' : ''}`, testid: `inbox-${c}-${key}` },
              v,
            );
          }),
          ageCell(c, 'oldestLeaseSeconds', 'inbox-oldest-lease', 'oldestLease'),
          ageCell(c, 'oldestRetryAgeSeconds', 'inbox-retry-age', 'retryAge'),
          h(
            'td',
            { class: `num value${missing > 0 ? ' bad' : ''}`, testid: `inbox-${c}-undelivered` },
            missing,
          ),
        ]);
      }),
      'no consumers',
      'inbox-table',
    ),
  );
}

/**
 * The components' and alarms' pills, and the header's verdict.
 * @param {Record<string, unknown>} s a status answer
 */
function renderPills(s) {
  const alarms = obj(s.alarms);
  const components = obj(s.components);
  $('alarms').replaceChildren(
    ...Object.keys(components).map((n) => {
      const c = obj(components[n]);
      const up = c.up !== false;
      return h(
        'span',
        {
          class: `badge ${up ? 'ok' : 'alarm'}`,
          testid: `component-${n}`,
          'data-state': up ? 'up' : 'down',
          title: up ? '' : `${text(c.cause)}${c.since ? ` (since ${text(c.since)})` : ''}`,
        },
        up ? `${n}: up` : `${n}: down: ${text(c.cause)}`,
      );
    }),
    ...Object.keys(alarms).map((n) =>
      h(
        'span',
        {
          class: `badge ${alarms[n] === 'OK' ? 'ok' : 'alarm'}`,
          testid: `alarm-${n}`,
          'data-state': text(alarms[n]),
        },
        `${n}: ${text(alarms[n])}`,
      ),
    ),
  );
  const summary = $('alarm-summary');
  const verdict = healthSummary(s);
  summary.textContent = verdict.text;
  summary.className = verdict.ok ? 'ok' : 'alarm';
}

// The chart of the last hour.

/**
 * The chart: its titles, set once, and its lines, drawn from the runtime's readings and the
 * status of each refresh.
 */
function historyChart() {
  const minutes = chartWindowMs / 60_000;
  $('chart-title').textContent = `Last ${minutes} minutes`;
  for (const el of document.querySelectorAll('.chart-from')) el.textContent = `${minutes} min ago`;
  /** The runtime's readings for the chart (`GET /ops/history`), oldest first. */
  /** @type {Sample[]} */
  let history = [];
  return {
    /** @param {unknown} answer `GET /ops/history` */
    setHistory(answer) {
      history = historySamples(answer);
    },

    /**
     * Draws the chart of the last hour from the runtime's readings and, newest, this refresh's
     * status (when it was read with its counters): a reload draws the same chart.
     * @param {unknown} status null when it could not be read
     */
    render(status) {
      const now = Date.now();
      // A reading without its counters (the database down) is no reading: a 0 would draw a drop.
      const current = obj(status).tasks && obj(status).outbox ? sampleOf(status, now) : null;
      const samples = current ? [...history.filter((x) => x.at < now), current] : history;
      const series = chartSeries(samples, now, chartWindowMs, chartBuckets);
      const per = `per ${chartWindowMs / chartBuckets / 1000} s`;
      drawLine('approvals', series.approvals, niceCeiling, (max) => `max ${max} ${per}`);
      drawLine('deliveries', series.deliveries, niceCeiling, (max) => `max ${max} ${per}`);
      drawLine('oldest-age', series.oldestAge, niceAgeCeiling, (max) => `max ${age(max)}`);
      $('chart-approvals-total').textContent = String(total(series.approvals));
      $('chart-deliveries-total').textContent = String(total(series.deliveries));
      const latest = samples[samples.length - 1];
      $('chart-oldest-age-now').textContent = latest ? age(latest.oldestPendingAgeSeconds) : '-';
    },
  };
}

/**
 * Draws one line of the chart: its path across its SVG's viewBox, the values as data (what
 * the browser test reads) and the top of its scale.
 * @param {string} id
 * @param {(number | null)[]} values
 * @param {(value: number) => number} ceiling the top of the scale that holds a value
 * @param {(max: number) => string} scaleLabel
 */
function drawLine(id, values, ceiling, scaleLabel) {
  const path = document.querySelector(`path#chart-${id}`);
  const box = path?.closest('svg')?.viewBox.baseVal;
  if (!path || !box) throw new Error(`the page has no chart line #chart-${id}`);
  const max = ceiling(Math.max(0, ...values.map((v) => v ?? 0)));
  path.setAttribute('d', linePath(values, max, box.width, box.height));
  path.setAttribute('data-values', values.map((v) => (v === null ? '' : String(v))).join(','));
  $(`chart-${id}-max`).textContent = scaleLabel(max);
}

// The tasks pending review, and the latest events.

/**
 * The tasks pending review, a page of `GET /tasks` at a time (keyset pages, newest first).
 * @param {Shared} shared
 */
function pendingList(shared) {
  /** Cursors of the pending tasks' pages (`GET /tasks` keyset pages): [0] is the first page's. */
  /** @type {(string | null)[]} */
  let pendingCursors = [null];
  let pendingPage = 0;
  return {
    /** The path that reads the page shown. */
    path() {
      const cursor = pendingCursors[pendingPage];
      const after = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
      return `/tasks?status=pending&limit=${shared.pageSize()}${after}`;
    },

    /** @param {unknown} answer `GET /tasks?status=pending` */
    render(answer) {
      const a = obj(answer);
      const tasks = Array.isArray(a.tasks) ? a.tasks : [];
      if (tasks.length === 0 && pendingPage > 0) {
        // The page emptied (its tasks were decided): start again from the newest. This is drawn
        // within a refresh, so the refresh asked for here follows it at once.
        pendingPage = 0;
        pendingCursors = [null];
        shared.refresh();
        return;
      }
      const next = typeof a.nextCursor === 'string' ? a.nextCursor : null;
      pendingCursors[pendingPage + 1] = next;
      const rows = tasks.map((raw) => {
        const t = obj(raw);
        const id = text(t.taskId);
        const link = h('button', {
          type: 'button',
          class: 'link title',
          testid: `pending-task-${id}`,
          title: 'show the trace of this task',
        });
        link.textContent = text(t.title);
        link.addEventListener('click', () => shared.showTrace(id));
        return h('tr', { testid: 'pending-row' }, [
          h('td', {}, link),
          h('td', {}, text(t.assignee)),
          h('td', { title: text(t.createdAt) }, when(t.createdAt)),
          h('td', { class: 'mono' }, id),
        ]);
      });
      const size = shared.pageSize();
      const from = pendingPage * size + 1;
      const pages =
        pendingPage > 0 || next
          ? pager(
              'pending',
              `${from}-${from + rows.length - 1}${next ? ', more' : ''}`,
              pendingPage > 0,
              next !== null,
              (d) => {
                pendingPage = Math.max(0, pendingPage + d);
                shared.refresh();
              },
            )
          : null;
      $('pending').replaceChildren(
        table(
          ['title', 'assignee', 'created', 'task'],
          rows,
          'no task is waiting for review',
          'pending-table',
        ),
        ...(pages ? [pages] : []),
      );
    },
  };
}

/**
 * The latest events, each linking to its task's trace.
 * @param {unknown} list `GET /ops/events`
 * @param {Shared} shared
 */
function renderEvents(list, shared) {
  const rows = (Array.isArray(list) ? list : []).map((raw) => {
    const e = obj(raw);
    const named = typeof e.title === 'string' && e.title !== '';
    const link = h('button', {
      type: 'button',
      class: named ? 'link title' : 'link',
      testid: `event-task-${text(e.eventId)}`,
      title: 'show the trace of this task',
    });
    link.textContent = named ? String(e.title) : text(e.taskId);
    link.addEventListener('click', () => shared.showTrace(String(e.taskId)));
    return h('tr', { testid: 'event-row', 'data-event-id': text(e.eventId) }, [
      h('td', { title: text(e.createdAt) }, when(e.createdAt)),
      h('td', {}, text(e.eventType)),
      h('td', {}, [
        link,
        named
          ? h('div', { class: 'mono muted', testid: `event-task-id-${text(e.eventId)}` }, text(e.taskId))
          : null,
      ]),
      h('td', { class: 'num' }, text(e.version)),
      h('td', { class: e.status === 'dead' ? 'bad' : null }, text(e.status)),
      h('td', { class: 'num' }, num(e.attempts)),
      h('td', {}, when(e.deliveredAt)),
      h('td', { class: 'err' }, e.lastError ? String(e.lastError) : ''),
    ]);
  });
  const { shown, pager: pages } = shared.paged('events', rows, () => renderEvents(list, shared));
  $('events').replaceChildren(
    table(
      [
        'created',
        'type',
        'task',
        { label: 'version', num: true },
        'outbox',
        { label: 'attempts', num: true },
        'delivered',
        'last error',
      ],
      shown,
      'no events yet',
      'events-table',
    ),
    ...(pages ? [pages] : []),
  );
}

// The dead lists and their redrive buttons: the outbox's, each consumer inbox's, the bus's dead
// letters, and the delivery audit's undelivered events.

/**
 * @param {string} message
 * @param {boolean} failed
 */
function notice(message, failed) {
  const el = $('notice');
  el.textContent = message;
  el.className = `banner${failed ? ' failed' : ''}`;
  el.hidden = false;
}

/**
 * @param {string} label
 * @param {string} testid
 * @param {string} path
 * @param {Record<string, unknown>} body
 * @param {string} what
 * @param {() => void} refresh
 */
function redriveButton(label, testid, path, body, what, refresh) {
  const button = h('button', { type: 'button', testid });
  button.textContent = label;
  button.addEventListener('click', async () => {
    if (body.all && !window.confirm(`Redrive ${what}?`)) return;
    button.disabled = true;
    try {
      const result = obj(await call('POST', path, body));
      const more = result.complete === false ? ' More are left: press it again.' : '';
      notice(`Redrove ${what}: ${num(result.redriven)} redriven.${more}`, false);
    } catch (e) {
      notice(`Redrive of ${what} failed: ${messageOf(e)}`, true);
    }
    refresh();
  });
  return button;
}

/**
 * @param {HTMLElement} container
 * @param {string} listTestid
 * @param {(string | Column)[]} headers
 * @param {HTMLTableRowElement[]} rows
 * @param {string} emptyText
 * @param {HTMLButtonElement} allButton
 * @param {PagedLists} paging
 * @param {() => void} redraw
 */
function deadSection(container, listTestid, headers, rows, emptyText, allButton, paging, redraw) {
  const { shown, pager: pages } = paging.paged(listTestid, rows, redraw);
  // replaceChildren would render a null argument as the text "null": pass only real nodes.
  /** @type {HTMLElement[]} */
  const parts = [
    h('div', { class: 'section-head' }, [
      h('h3', {}, `${container.getAttribute('data-title')} (${rows.length})`),
      rows.length > 0 ? allButton : null,
    ]),
    table(headers, shown, emptyText, listTestid),
  ];
  if (pages) parts.push(pages);
  container.replaceChildren(...parts);
}

/**
 * @param {unknown} list `GET /ops/outbox/dead`
 * @param {Shared} shared
 */
function renderOutboxDead(list, shared) {
  const path = '/ops/outbox/dead/redrive';
  deadSection(
    $('outbox-dead'),
    'outbox-dead-list',
    ['event', 'type', 'task', { label: 'attempts', num: true }, 'created', 'last error', ''],
    (Array.isArray(list) ? list : []).map((raw) => {
      const d = obj(raw);
      const id = text(d.eventId);
      return h('tr', { testid: 'outbox-dead-row' }, [
        h('td', { class: 'mono' }, id),
        h('td', {}, text(d.eventType)),
        h('td', { class: 'mono' }, text(d.aggregateId)),
        h('td', { class: 'num' }, num(d.attempts)),
        h('td', {}, when(d.createdAt)),
        h('td', { class: 'err' }, d.lastError ? String(d.lastError) : ''),
        h(
          'td',
          {},
          redriveButton(
            'Redrive',
            `redrive-outbox-${id}`,
            path,
            { eventId: id },
            `outbox event ${id}`,
            shared.refresh,
          ),
        ),
      ]);
    }),
    'no dead outbox events',
    redriveButton(
      'Redrive all',
      'redrive-all-outbox',
      path,
      { all: true },
      'every dead outbox event',
      shared.refresh,
    ),
    shared,
    () => renderOutboxDead(list, shared),
  );
}

/** @param {Record<string, unknown>} d */
function inboxId(d) {
  return text(d.eventId !== undefined ? d.eventId : d.id);
}

/**
 * @param {string} consumer
 * @returns {HTMLElement} the consumer's dead-list container, made on first use
 */
function inboxDeadContainer(consumer) {
  const found = document.getElementById(`inbox-dead-${consumer}`);
  if (found) return found;
  const made = h('div', { id: `inbox-dead-${consumer}`, 'data-title': `${consumer} inbox` });
  $('inbox-dead').appendChild(made);
  return made;
}

/**
 * @param {string} consumer
 * @param {unknown} list `GET /ops/inbox/{consumer}/dead`
 * @param {Shared} shared
 */
function renderInboxDead(consumer, list, shared) {
  const path = `/ops/inbox/${encodeURIComponent(consumer)}/dead/redrive`;
  deadSection(
    inboxDeadContainer(consumer),
    `inbox-dead-${consumer}-list`,
    ['event', 'type', 'task', { label: 'attempts', num: true }, 'updated', 'last error', ''],
    (Array.isArray(list) ? list : []).map((raw) => {
      const d = obj(raw);
      const id = inboxId(d);
      return h('tr', { testid: `inbox-dead-${consumer}-row` }, [
        h('td', { class: 'mono' }, id),
        h('td', {}, text(d.eventType)),
        h('td', { class: 'mono' }, text(d.taskId)),
        h('td', { class: 'num' }, text(d.attempts)),
        h('td', {}, when(d.updatedAt)),
        h('td', { class: 'err' }, d.lastError ? String(d.lastError) : ''),
        h(
          'td',
          {},
          redriveButton(
            'Redrive',
            `redrive-inbox-${consumer}-${id}`,
            path,
            { eventId: id },
            `${consumer} inbox record ${id}`,
            shared.refresh,
          ),
        ),
      ]);
    }),
    `no dead ${consumer} inbox records`,
    redriveButton(
      'Redrive all',
      `redrive-all-inbox-${consumer}`,
      path,
      { all: true },
      `every dead ${consumer} inbox record`,
      shared.refresh,
    ),
    shared,
    () => renderInboxDead(consumer, list, shared),
  );
}

/**
 * @param {unknown} list `GET /ops/dead-letters`
 * @param {Shared} shared
 */
function renderDeadLetters(list, shared) {
  const path = '/ops/dead-letters/redrive';
  deadSection(
    $('dead-letters'),
    'dead-letters-list',
    ['id', 'consumer', 'rule', { label: 'attempts', num: true }, 'dead at', 'error', ''],
    (Array.isArray(list) ? list : []).map((raw) => {
      const d = obj(raw);
      const id = text(d.id);
      return h('tr', { testid: 'dead-letter-row' }, [
        h('td', { class: 'mono' }, id),
        h('td', {}, text(d.consumer)),
        h('td', {}, text(d.rule)),
        h('td', { class: 'num' }, num(d.attempts)),
        h('td', {}, when(d.deadAt)),
        h('td', { class: 'err' }, d.error ? String(d.error) : ''),
        h(
          'td',
          {},
          redriveButton(
            'Redrive',
            `redrive-dead-letter-${text(d.consumer)}-${id}`,
            path,
            { eventId: id, consumer: d.consumer },
            `dead letter ${id}`,
            shared.refresh,
          ),
        ),
      ]);
    }),
    'no dead letters',
    redriveButton(
      'Redrive all',
      'redrive-all-dead-letters',
      path,
      { all: true },
      'every dead letter',
      shared.refresh,
    ),
    shared,
    () => renderDeadLetters(list, shared),
  );
}

/**
 * @param {unknown} listing `GET /ops/audit`
 * @param {Shared} shared
 */
function renderAudit(listing, shared) {
  const a = obj(listing);
  const path = '/ops/audit/redrive';
  const container = $('audit-findings');
  container.setAttribute(
    'data-title',
    `Undelivered (delivery audit, last run ${when(a.lastRunAt)}, behind ${age(a.behindSeconds)})`,
  );
  deadSection(
    container,
    'audit-list',
    ['event', 'consumer', 'delivered at', 'found at', 're-sent', ''],
    (Array.isArray(a.findings) ? a.findings : []).map((raw) => {
      const f = obj(raw);
      const id = text(f.eventId);
      const consumer = text(f.consumer);
      return h('tr', { testid: 'audit-row' }, [
        h('td', { class: 'mono' }, id),
        h('td', {}, consumer),
        h('td', {}, when(f.deliveredAt)),
        h('td', {}, when(f.foundAt)),
        h('td', {}, f.redrivenAt ? `${when(f.redrivenAt)} (${num(f.redrives)}x)` : ''),
        h(
          'td',
          {},
          redriveButton(
            'Re-send',
            `redrive-audit-${consumer}-${id}`,
            path,
            { eventId: id, consumer },
            `event ${id} to ${consumer}`,
            shared.refresh,
          ),
        ),
      ]);
    }),
    'every audited event reached every consumer its rules route it to',
    redriveButton(
      'Re-send all',
      'redrive-all-audit',
      path,
      { all: true },
      'every undelivered event',
      shared.refresh,
    ),
    shared,
    () => renderAudit(listing, shared),
  );
}

// The task trace.

/** Scrolls the trace into view, the form and its first rows at the top of the window. */
function bringTraceIntoView() {
  $('trace-section').scrollIntoView({ block: 'start' });
}

/**
 * The trace of the task asked for (by the form, a link or the page's hash): its facts and its
 * events through every consumer, read again with each refresh. It is brought into view when
 * asked for, and again once the page above it is drawn.
 * @param {RegExp} uuid a task id goes into the URL path
 * @param {Record<string, string[] | undefined>} routes the consumers each event type is routed to
 * @param {readonly string[]} consumers the consumers known: a column each
 * @param {PagedLists} paging
 * @param {() => boolean} refreshing whether a refresh is under way
 */
function taskTrace(uuid, routes, consumers, paging, refreshing) {
  /** @type {string | null} */
  let traceTaskId = null;
  /** A trace was asked for (a hash, a click, the form): bring it into view once it and the page above it are drawn. */
  let scrollToTrace = false;
  let traceShown = false;

  /**
   * @param {string} id
   * @param {boolean} quiet a background refresh: keeps the last trace shown when a read fails
   */
  async function loadTrace(id, quiet) {
    const out = $('trace');
    const errorEl = $('trace-error');
    if (!uuid.test(id)) {
      errorEl.textContent = `Task id "${id}" is not a UUID.`;
      errorEl.hidden = false;
      out.replaceChildren();
      return;
    }
    if (!quiet) errorEl.hidden = true;
    let task;
    let trace;
    try {
      const both = await Promise.all([call('GET', `/tasks/${id}`), call('GET', `/ops/tasks/${id}/trace`)]);
      task = obj(both[0]);
      trace = obj(both[1]);
    } catch (e) {
      if (id !== traceTaskId) return;
      // The refresh's banner says the pipeline is unreachable, once: the trace stays as last read.
      if (quiet && e instanceof UnreachableError) return;
      errorEl.textContent = messageOf(e);
      errorEl.hidden = false;
      if (!quiet || (e instanceof RequestError && e.status === 404)) out.replaceChildren();
      return;
    }
    if (id !== traceTaskId) return; // another task was asked for meanwhile
    errorEl.hidden = true;
    renderTrace(task, trace);
  }

  /**
   * Draws a task's facts and its events through every consumer, paged; brings it into view when asked.
   * @param {Record<string, unknown>} task
   * @param {Record<string, unknown>} trace
   */
  function renderTrace(task, trace) {
    const out = $('trace');
    const events = Array.isArray(trace.events) ? trace.events : [];
    const columns = consumers.slice();
    for (const e of events) {
      for (const c of Object.keys(obj(obj(e).consumers))) if (!columns.includes(c)) columns.push(c);
    }
    /**
     * @param {string} label
     * @param {unknown} value
     * @param {string} [testid]
     */
    const field = (label, value, testid) => [h('dt', {}, label), h('dd', { testid }, text(value))];
    const facts = h('dl', { class: 'task' }, [
      field('task', task.taskId, 'trace-task-id'),
      field('title', task.title, 'trace-task-title'),
      field('status', `${text(task.status)} (version ${text(task.version)})`, 'trace-task-status'),
      field('assignee', task.assignee),
      field('reviewer', task.reviewer),
      field('updated', when(task.updatedAt)),
    ]);
    const rows = events.map((raw) => {
      const e = obj(raw);
      const states = obj(e.consumers);
      const eventId = text(e.eventId);
      return h('tr', { testid: 'trace-event', 'data-event-id': eventId }, [
        h('td', { class: 'mono' }, eventId),
        h('td', {}, text(e.eventType)),
        h('td', { class: 'num' }, text(e.version)),
        h('td', { class: e.status === 'dead' ? 'bad' : null }, `${text(e.status)} (${num(e.attempts)})`),
        h('td', {}, when(e.deliveredAt)),
        ...columns.map((c) => {
          const cell = traceCell(routes, String(e.eventType), c, states[c]);
          cell.setAttribute('data-testid', `trace-${eventId}-${c}`);
          return cell;
        }),
      ]);
    });
    const { shown, pager: pages } = paging.paged('trace-events', rows, () => renderTrace(task, trace));
    out.replaceChildren(
      facts,
      table(
        ['event', 'type', { label: 'version', num: true }, 'outbox', 'delivered', ...columns],
        shown,
        'no events yet (the task was never approved, rejected or withdrawn)',
        'trace-events',
      ),
      ...(pages ? [pages] : []),
    );
    traceShown = true;
    if (scrollToTrace) {
      bringTraceIntoView();
      // Drawn after the rest of the page: nothing above it will move it again.
      if (!refreshing()) scrollToTrace = false;
    }
  }

  return {
    /** @param {string} asked */
    show(asked) {
      const id = String(asked).trim();
      /** @type {HTMLInputElement} */ ($('trace-input')).value = id;
      traceTaskId = id;
      traceShown = false;
      scrollToTrace = true;
      paging.forget('trace-events');
      if (location.hash !== `#task=${id}`) window.history.replaceState(null, '', `#task=${id}`);
      bringTraceIntoView();
      void loadTrace(id, false);
    },

    /** @returns {Promise<void>[]} a refresh's read of the trace shown, if any */
    reload() {
      return traceTaskId && uuid.test(traceTaskId) ? [loadTrace(traceTaskId, true)] : [];
    },

    /** A refresh drew the sections above the trace: where it is now is where it stays. */
    refreshed() {
      if (scrollToTrace && traceShown) {
        bringTraceIntoView();
        scrollToTrace = false;
      }
    },
  };
}

/**
 * @param {Record<string, string[] | undefined>} routes
 * @param {string} eventType
 * @param {string} consumer
 * @param {unknown} raw
 */
function traceCell(routes, eventType, consumer, raw) {
  const routed = routes[eventType];
  if (raw === null || raw === undefined || typeof raw !== 'object') {
    const label = routed && !routed.includes(consumer) ? 'not routed' : 'not received';
    return h('td', { class: 'muted' }, label);
  }
  const r = obj(raw);
  const status = typeof r.status === 'string' ? r.status : 'UNKNOWN';
  const attempts = typeof r.attempts === 'number' ? ` (${r.attempts})` : '';
  const updated = r.updatedAt === undefined ? '' : when(r.updatedAt);
  return h('td', { title: updated ? `updated ${updated}` : null }, [
    h('span', { class: `state-${status.replace(/[^A-Za-z_]/g, '')}` }, status + attempts),
    r.lastError ? h('div', { class: 'err' }, String(r.lastError)) : null,
  ]);
}

/**
 * Shows the trace a `#task=<id>` hash names: the page's own, and each it changes to (a pasted
 * link, back and forward), as a link opened does; and the trace the form asks for.
 * @param {(id: string) => void} showTrace
 */
function traceRequests(showTrace) {
  $('trace-form').addEventListener('submit', (event) => {
    event.preventDefault();
    showTrace(/** @type {HTMLInputElement} */ ($('trace-input')).value);
  });
  /** The task a `#task=<id>` hash names, if any. */
  const hashTask = () => {
    const found = /^#task=(.+)$/.exec(location.hash);
    return found?.[1] ? decodeURIComponent(found[1]) : null;
  };
  // A link opened, and a hash changed in an open tab (a pasted link, back and forward), alike.
  window.addEventListener('hashchange', () => {
    const id = hashTask();
    if (id !== null) showTrace(id);
  });
  const fromHash = hashTask();
  if (fromHash !== null) showTrace(fromHash);
}

// The refresh loop, and the error banner of the reads that failed.

/**
 * The refresh loop: reads every figure once, then again `refreshMs` after it ends; one refresh at
 * a time, and one asked for meanwhile follows it at once.
 * @param {number} refreshMs
 * @param {() => Promise<() => void>} readAll reads every figure, resolving to what ends the
 *   refresh; that runs with the loop's own end, so a refresh is under way until it is done
 */
function refreshLoop(refreshMs, readAll) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  let running = false;
  let again = false;

  async function refresh() {
    if (running) {
      again = true;
      return;
    }
    running = true;
    clearTimeout(timer);
    const end = await readAll();
    end();
    running = false;
    if (again) {
      again = false;
      void refresh();
      return;
    }
    timer = setTimeout(refresh, refreshMs);
  }

  return { refresh, refreshing: () => running };
}

/**
 * One refresh's reads: each draws its answer, or adds why it could not be read to `failures`.
 */
function refreshReads() {
  /** @type {ReadFailure[]} */
  const failures = [];
  /**
   * @param {string} path
   * @param {(body: unknown) => void} render
   * @returns {Promise<boolean>} whether it was read
   */
  const read = async (path, render) => {
    try {
      render(await call('GET', path));
      return true;
    } catch (e) {
      failures.push(
        e instanceof UnreachableError
          ? { message: e.message, unreachable: e.reason }
          : { message: messageOf(e) },
      );
      return false;
    }
  };
  return { read, failures };
}

/**
 * The error banner of a refresh's reads that failed; when none did, the time it was read.
 * @param {readonly ReadFailure[]} failures
 * @param {number} refreshMs
 */
function showFailures(failures, refreshMs) {
  const banner = $('error-banner');
  if (failures.length > 0) {
    banner.textContent = failureBanner(failures, refreshMs);
    banner.hidden = false;
  } else {
    banner.hidden = true;
    $('last-updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
  }
}

/**
 * The running page: its parts, wired together, and their first reads.
 * @param {DashboardConfig} config
 */
function startDashboard(config) {
  // shared/ids.ts's pattern, served in the config: a task id goes into the URL path.
  const uuid = new RegExp(config.uuidPattern.source, config.uuidPattern.flags);
  /** The topology's consumers, then any a status answer names. */
  const consumers = config.consumers.slice();
  const paging = pagedLists(window.matchMedia(narrowQuery));
  const loop = refreshLoop(config.refreshMs, readAll);
  const trace = taskTrace(uuid, config.routes, consumers, paging, loop.refreshing);
  /** @type {Shared} */
  const shared = { ...paging, refresh: loop.refresh, showTrace: trace.show };
  const figures = statusPanel(config.effectLabels, consumers);
  const chart = historyChart();
  const pending = pendingList(shared);

  /** Reads every figure; resolves to what ends the refresh once all are drawn. */
  async function readAll() {
    const { read, failures } = refreshReads();
    /** @type {unknown} */
    let status = null;
    const [statusRead] = await Promise.all([
      read('/ops/status', (s) => {
        status = s;
        figures.render(s);
      }),
      read('/ops/history', chart.setHistory),
      read(pending.path(), pending.render),
      read('/ops/events?limit=20', (list) => renderEvents(list, shared)),
      read('/ops/outbox/dead', (list) => renderOutboxDead(list, shared)),
      read('/ops/dead-letters', (list) => renderDeadLetters(list, shared)),
      read('/ops/audit', (listing) => renderAudit(listing, shared)),
      ...consumers.map((c) =>
        read(`/ops/inbox/${encodeURIComponent(c)}/dead`, (list) => renderInboxDead(c, list, shared)),
      ),
      ...trace.reload(),
    ]);
    return () => {
      if (!statusRead) figures.renderUnknown('the status could not be read');
      chart.render(status);
      trace.refreshed();
      showFailures(failures, config.refreshMs);
    };
  }

  // One section per consumer, in the topology's order, before any answer arrives.
  for (const c of consumers) inboxDeadContainer(c);
  traceRequests(trace.show);
  void loop.refresh();
}

// Node (the unit test of the helpers above) has no document: only a browser starts the page.
if (typeof document !== 'undefined') {
  startDashboard(/** @type {DashboardConfig} */ (JSON.parse($('config').textContent ?? '{}')));
}
