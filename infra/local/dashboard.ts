import { createHash } from 'node:crypto';
import { consumerNames, routingTable } from './cli-trace';

/** How often the page reads the ops API again. */
export const dashboardRefreshMs = 2_000;

const style = `
:root { --ok: #1a7f37; --alarm: #cf222e; --warn: #9a6700; --busy: #0969da; --muted: #57606a;
  --border: #d0d7de; --bg: #f6f8fa; --fg: #1f2328; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
  background: var(--bg); }
header { display: flex; align-items: center; gap: 16px; padding: 10px 20px; background: #24292f; color: #fff; }
header h1 { font-size: 17px; margin: 0; font-weight: 600; }
#alarm-summary { padding: 2px 10px; border-radius: 999px; font-size: 12px; font-weight: 600; }
#last-updated { margin-left: auto; font-size: 12px; opacity: 0.85; }
main { padding: 16px 20px; display: grid; gap: 16px; max-width: 1400px; }
.banner { padding: 10px 14px; border-radius: 6px; white-space: pre-line; }
.banner[hidden] { display: none; }
#error-banner { background: #ffebe9; border: 1px solid #ff8182; color: #82071e; }
#notice { background: #ddf4ff; border: 1px solid #54aeff; }
#notice.failed { background: #ffebe9; border-color: #ff8182; color: #82071e; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(230px, 1fr)); gap: 16px; }
section { background: #fff; border: 1px solid var(--border); border-radius: 6px; padding: 12px 16px; min-width: 0; }
h2 { font-size: 12px; margin: 0 0 8px; text-transform: uppercase; letter-spacing: 0.05em; color: var(--muted); }
h3 { font-size: 13px; margin: 12px 0 4px; }
.section-head { display: flex; align-items: baseline; gap: 12px; }
.section-head h2, .section-head h3 { flex: 1; }
.stat { display: flex; justify-content: space-between; gap: 12px; padding: 2px 0; }
.value { font-variant-numeric: tabular-nums; font-weight: 600; }
.bad { color: var(--alarm); }
.alarms { display: flex; flex-wrap: wrap; gap: 8px; }
.badge { padding: 3px 10px; border-radius: 999px; color: #fff; font-weight: 600; font-size: 12px; }
.ok { background: var(--ok); color: #fff; }
.alarm { background: var(--alarm); color: #fff; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #eaeef2; vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: 12px; white-space: nowrap; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
.err { color: var(--alarm); font-size: 12px; overflow-wrap: anywhere; }
.muted { color: var(--muted); }
button { font: inherit; font-size: 12px; padding: 2px 10px; border: 1px solid var(--border); border-radius: 6px;
  background: #f6f8fa; cursor: pointer; }
button:disabled { opacity: 0.5; cursor: default; }
button.link { border: none; background: none; color: var(--busy); padding: 0; text-decoration: underline;
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.state-PROCESSED { color: var(--ok); font-weight: 600; }
.state-DEAD { color: var(--alarm); font-weight: 600; }
.state-FAILED { color: var(--warn); font-weight: 600; }
.state-PROCESSING { color: var(--busy); font-weight: 600; }
form { display: flex; gap: 8px; margin-bottom: 8px; }
input { font: inherit; padding: 3px 8px; border: 1px solid var(--border); border-radius: 6px; flex: 0 1 340px; }
dl.task { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0 0 8px; }
dl.task dt { color: var(--muted); }
dl.task dd { margin: 0; overflow-wrap: anywhere; }
`;

// Plain ES2020 for the browser. It never assigns markup: every value becomes a text node, so a
// title like "<script>" shows as text. No template literals, so this TypeScript string stays plain.
const script = `
'use strict';
(function () {
  var config = JSON.parse(document.getElementById('config').textContent);
  var uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
  var effectLabels = { indexDocuments: 'index documents', notificationsSent: 'notifications sent',
    distinctNotifiedEvents: 'distinct notified events', archivedObjects: 'archived objects' };
  var inboxColumns = [['processed', 'processed'], ['inProgress', 'in progress'], ['failed', 'failed'], ['dead', 'dead']];
  var consumers = config.consumers.slice();
  var traceTaskId = null;
  var timer = null;
  var running = false;
  var again = false;

  function $(id) { return document.getElementById(id); }

  // h('td', { class: 'num', testid: 'x', title: 't' }, 'text' | node | [children])
  function h(tag, attrs, children) {
    var el = document.createElement(tag);
    attrs = attrs || {};
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === undefined || v === null) return;
      if (k === 'class') el.className = v;
      else if (k === 'testid') el.setAttribute('data-testid', v);
      else if (k === 'onclick') el.addEventListener('click', v);
      else el.setAttribute(k, String(v));
    });
    append(el, children);
    return el;
  }
  function append(el, children) {
    if (children === undefined || children === null) return;
    if (Array.isArray(children)) { children.forEach(function (c) { append(el, c); }); return; }
    el.appendChild(typeof children === 'object' ? children : document.createTextNode(String(children)));
  }
  function num(v) { return typeof v === 'number' && isFinite(v) ? v : 0; }
  function obj(v) { return v && typeof v === 'object' ? v : {}; }
  function text(v) { return v === null || v === undefined || v === '' ? '-' : String(v); }
  function when(v) {
    if (v === null || v === undefined || v === '') return '-';
    var d = new Date(v);
    return isNaN(d.getTime()) ? String(v) : d.toLocaleString();
  }
  function age(seconds) {
    var s = Math.max(0, Math.floor(num(seconds)));
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + String(s % 60).padStart(2, '0') + 's';
    return Math.floor(s / 3600) + 'h ' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + 'm';
  }
  function stat(label, value, testid, bad) {
    return h('div', { class: 'stat' }, [h('span', {}, label), h('span', { class: 'value' + (bad ? ' bad' : ''), testid: testid }, value)]);
  }
  function table(headers, rows, emptyText, testid) {
    var head = h('tr', {}, headers.map(function (c) { return h('th', { class: c.num ? 'num' : null }, c.label || c); }));
    var body = rows.length > 0 ? rows : [h('tr', {}, h('td', { colspan: headers.length, class: 'muted' }, emptyText))];
    return h('div', { class: 'table-wrap' }, h('table', { testid: testid }, [h('thead', {}, head), h('tbody', {}, body)]));
  }

  function errorText(body, raw) {
    if (body && typeof body.error === 'string') return body.error;
    return raw ? String(raw).slice(0, 300) : '(empty body)';
  }
  async function call(method, path, body) {
    var res;
    try {
      res = await fetch(path, { method: method, cache: 'no-store',
        headers: body === undefined ? { accept: 'application/json' } : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (e) {
      throw new Error(method + ' ' + path + ': the pipeline is unreachable (' + (e && e.message) + ')');
    }
    var raw = await res.text();
    var json;
    try { json = raw ? JSON.parse(raw) : undefined; } catch (e) { json = undefined; }
    if (!res.ok) {
      var err = new Error(method + ' ' + path + ' failed: ' + res.status + ' ' + errorText(json, raw));
      err.status = res.status;
      throw err;
    }
    if (json === undefined) throw new Error(method + ' ' + path + ': answered without JSON');
    return json;
  }

  function notice(message, failed) {
    var el = $('notice');
    el.textContent = message;
    el.className = 'banner' + (failed ? ' failed' : '');
    el.hidden = false;
  }

  function redriveButton(label, testid, path, body, what) {
    var button = h('button', { type: 'button', testid: testid });
    button.textContent = label;
    button.addEventListener('click', async function () {
      if (body.all && !window.confirm('Redrive ' + what + '?')) return;
      button.disabled = true;
      try {
        var result = await call('POST', path, body);
        var more = obj(result).complete === false ? ' More are left: press it again.' : '';
        notice('Redrove ' + what + ': ' + num(obj(result).redriven) + ' redriven.' + more, false);
      } catch (e) {
        notice('Redrive of ' + what + ' failed: ' + e.message, true);
      }
      refreshNow();
    });
    return button;
  }

  function renderStatus(s) {
    s = obj(s);
    var tasks = obj(s.tasks), outbox = obj(s.outbox), relay = obj(s.relay), effects = obj(s.effects);
    $('tasks').replaceChildren.apply($('tasks'), Object.keys(tasks).map(function (k) {
      return stat(k.replace(/_/g, ' '), num(tasks[k]), 'tasks-' + k);
    }));
    $('outbox').replaceChildren(
      stat('pending', num(outbox.pending), 'outbox-pending'),
      stat('delivered', num(outbox.delivered), 'outbox-delivered'),
      stat('dead', num(outbox.dead), 'outbox-dead', num(outbox.dead) > 0),
      stat('oldest pending', age(outbox.oldestPendingAgeSeconds), 'outbox-oldest-pending-age', obj(s.alarms).oldestPendingAge === 'ALARM'),
      stat('relay last run', when(relay.lastRunAt), 'relay-last-run'),
      stat('relay errors', num(relay.errors), 'relay-errors', num(relay.errors) > 0));
    $('effects').replaceChildren.apply($('effects'), Object.keys(effects).map(function (k) {
      return stat(effectLabels[k] || k, num(effects[k]), 'effects-' + k);
    }).concat([stat('bus dead letters', num(s.deadLetters), 'dead-letters-count', num(s.deadLetters) > 0)]));

    var inbox = obj(s.consumers);
    Object.keys(inbox).forEach(function (c) { if (consumers.indexOf(c) < 0) consumers.push(c); });
    $('inbox').replaceChildren(table(
      [{ label: 'consumer' }].concat(inboxColumns.map(function (c) { return { label: c[1], num: true }; })),
      Object.keys(inbox).map(function (c) {
        var counts = obj(inbox[c]);
        return h('tr', {}, [h('td', {}, c)].concat(inboxColumns.map(function (col) {
          var v = num(counts[col[0]]);
          return h('td', { class: 'num value' + (col[0] === 'dead' && v > 0 ? ' bad' : ''), testid: 'inbox-' + c + '-' + col[0] }, v);
        })));
      }), 'no consumers', 'inbox-table'));

    var alarms = obj(s.alarms);
    var names = Object.keys(alarms);
    var firing = names.filter(function (n) { return alarms[n] !== 'OK'; });
    $('alarms').replaceChildren.apply($('alarms'), names.map(function (n) {
      var ok = alarms[n] === 'OK';
      return h('span', { class: 'badge ' + (ok ? 'ok' : 'alarm'), testid: 'alarm-' + n, 'data-state': text(alarms[n]) },
        n + ': ' + text(alarms[n]));
    }));
    var summary = $('alarm-summary');
    summary.textContent = names.length === 0 ? 'no alarms' : firing.length === 0 ? 'all OK' : firing.length + ' in ALARM';
    summary.className = firing.length === 0 ? 'ok' : 'alarm';
  }

  function renderEvents(list) {
    var rows = (Array.isArray(list) ? list : []).map(function (raw) {
      var e = obj(raw);
      var link = h('button', { type: 'button', class: 'link', testid: 'event-task-' + text(e.eventId), title: 'show the trace of this task' });
      link.textContent = text(e.taskId);
      link.addEventListener('click', function () { showTrace(String(e.taskId)); });
      return h('tr', { testid: 'event-row', 'data-event-id': text(e.eventId) }, [
        h('td', { title: text(e.createdAt) }, when(e.createdAt)),
        h('td', {}, text(e.eventType)),
        h('td', {}, link),
        h('td', { class: 'num' }, text(e.version)),
        h('td', { class: e.status === 'dead' ? 'bad' : null }, text(e.status)),
        h('td', { class: 'num' }, num(e.attempts)),
        h('td', {}, when(e.deliveredAt)),
        h('td', { class: 'err' }, e.lastError ? String(e.lastError) : ''),
      ]);
    });
    $('events').replaceChildren(table(
      ['created', 'type', 'task', { label: 'version', num: true }, 'outbox', { label: 'attempts', num: true }, 'delivered', 'last error'],
      rows, 'no events yet', 'events-table'));
  }

  // A list shows its first rows only: hundreds of rows rebuilt every 2 s would make the page crawl.
  var deadRowsShown = 50;
  function deadSection(container, listTestid, headers, rows, emptyText, allButton, command) {
    var more = rows.length - deadRowsShown;
    // replaceChildren would render a null argument as the text "null": pass only real nodes.
    var parts = [h('div', { class: 'section-head' }, [h('h3', {}, container.getAttribute('data-title') + ' (' + rows.length + ')'), rows.length > 0 ? allButton : null]),
      table(headers, rows.slice(0, deadRowsShown), emptyText, listTestid)];
    if (more > 0) parts.push(h('p', { class: 'muted', testid: listTestid + '-more' }, more + ' more not shown; npx pipeline ' + command + ' lists them all.'));
    container.replaceChildren.apply(container, parts);
  }

  function renderOutboxDead(list) {
    list = Array.isArray(list) ? list : [];
    deadSection($('outbox-dead'), 'outbox-dead-list', ['event', 'type', 'task', { label: 'attempts', num: true }, 'created', 'last error', ''],
      list.map(function (raw) {
        var d = obj(raw), id = text(d.eventId);
        return h('tr', { testid: 'outbox-dead-row' }, [h('td', { class: 'mono' }, id), h('td', {}, text(d.eventType)),
          h('td', { class: 'mono' }, text(d.aggregateId)), h('td', { class: 'num' }, num(d.attempts)), h('td', {}, when(d.createdAt)),
          h('td', { class: 'err' }, d.lastError ? String(d.lastError) : ''),
          h('td', {}, redriveButton('Redrive', 'redrive-outbox-' + id, '/ops/outbox/dead/redrive', { eventId: id }, 'outbox event ' + id))]);
      }), 'no dead outbox events',
      redriveButton('Redrive all', 'redrive-all-outbox', '/ops/outbox/dead/redrive', { all: true }, 'every dead outbox event'),
      'outbox dead');
  }

  function inboxId(d) { return text(d.eventId !== undefined ? d.eventId : d.id); }

  function renderInboxDead(consumer, list) {
    list = Array.isArray(list) ? list : [];
    var container = $('inbox-dead-' + consumer);
    if (!container) {
      container = h('div', { id: 'inbox-dead-' + consumer, 'data-title': consumer + ' inbox' });
      $('inbox-dead').appendChild(container);
    }
    var path = '/ops/inbox/' + encodeURIComponent(consumer) + '/dead/redrive';
    deadSection(container, 'inbox-dead-' + consumer + '-list', ['event', 'type', 'task', { label: 'attempts', num: true }, 'updated', 'last error', ''],
      list.map(function (raw) {
        var d = obj(raw), id = inboxId(d);
        return h('tr', { testid: 'inbox-dead-' + consumer + '-row' }, [h('td', { class: 'mono' }, id), h('td', {}, text(d.eventType)),
          h('td', { class: 'mono' }, text(d.taskId)), h('td', { class: 'num' }, text(d.attempts)), h('td', {}, when(d.updatedAt)),
          h('td', { class: 'err' }, d.lastError ? String(d.lastError) : ''),
          h('td', {}, redriveButton('Redrive', 'redrive-inbox-' + consumer + '-' + id, path, { eventId: id }, consumer + ' inbox record ' + id))]);
      }), 'no dead ' + consumer + ' inbox records',
      redriveButton('Redrive all', 'redrive-all-inbox-' + consumer, path, { all: true }, 'every dead ' + consumer + ' inbox record'),
      'inbox dead --consumer ' + consumer);
  }

  function renderDeadLetters(list) {
    list = Array.isArray(list) ? list : [];
    deadSection($('dead-letters'), 'dead-letters-list', ['id', 'consumer', 'rule', { label: 'attempts', num: true }, 'dead at', 'error', ''],
      list.map(function (raw) {
        var d = obj(raw), id = text(d.id);
        return h('tr', { testid: 'dead-letter-row' }, [h('td', { class: 'mono' }, id), h('td', {}, text(d.consumer)), h('td', {}, text(d.rule)),
          h('td', { class: 'num' }, num(d.attempts)), h('td', {}, when(d.deadAt)), h('td', { class: 'err' }, d.error ? String(d.error) : ''),
          h('td', {}, redriveButton('Redrive', 'redrive-dead-letter-' + text(d.consumer) + '-' + id, '/ops/dead-letters/redrive', { eventId: id, consumer: d.consumer }, 'dead letter ' + id))]);
      }), 'no dead letters',
      redriveButton('Redrive all', 'redrive-all-dead-letters', '/ops/dead-letters/redrive', { all: true }, 'every dead letter'),
      'dead-letters');
  }

  function traceCell(eventType, consumer, raw) {
    var routed = config.routes[eventType];
    if (raw === null || raw === undefined || typeof raw !== 'object') {
      var label = routed && routed.indexOf(consumer) < 0 ? 'not routed' : 'not received';
      return h('td', { class: 'muted' }, label);
    }
    var status = typeof raw.status === 'string' ? raw.status : 'UNKNOWN';
    var attempts = typeof raw.attempts === 'number' ? ' (' + raw.attempts + ')' : '';
    var updated = raw.updatedAt === undefined ? '' : when(raw.updatedAt);
    return h('td', { title: updated ? 'updated ' + updated : null }, [
      h('span', { class: 'state-' + status.replace(/[^A-Za-z_]/g, '') }, status + attempts),
      raw.lastError ? h('div', { class: 'err' }, String(raw.lastError)) : null]);
  }

  async function loadTrace(id, quiet) {
    var out = $('trace');
    var errorEl = $('trace-error');
    if (!uuid.test(id)) {
      errorEl.textContent = 'Task id "' + id + '" is not a UUID.';
      errorEl.hidden = false;
      out.replaceChildren();
      return;
    }
    if (!quiet) { errorEl.hidden = true; }
    var task, trace;
    try {
      var both = await Promise.all([call('GET', '/tasks/' + id), call('GET', '/ops/tasks/' + id + '/trace')]);
      task = obj(both[0]); trace = obj(both[1]);
    } catch (e) {
      if (id !== traceTaskId) return;
      errorEl.textContent = e.message;
      errorEl.hidden = false;
      if (!quiet || e.status === 404) out.replaceChildren();
      return;
    }
    if (id !== traceTaskId) return; // another task was asked for meanwhile
    errorEl.hidden = true;
    var events = Array.isArray(trace.events) ? trace.events : [];
    var columns = consumers.slice();
    events.forEach(function (e) { Object.keys(obj(obj(e).consumers)).forEach(function (c) { if (columns.indexOf(c) < 0) columns.push(c); }); });
    var field = function (label, value, testid) { return [h('dt', {}, label), h('dd', { testid: testid }, text(value))]; };
    var facts = h('dl', { class: 'task' }, [
      field('task', task.taskId, 'trace-task-id'), field('title', task.title, 'trace-task-title'),
      field('status', text(task.status) + ' (version ' + text(task.version) + ')', 'trace-task-status'),
      field('assignee', task.assignee), field('reviewer', task.reviewer), field('updated', when(task.updatedAt))]);
    var rows = events.map(function (raw) {
      var e = obj(raw), states = obj(e.consumers), eventId = text(e.eventId);
      return h('tr', { testid: 'trace-event', 'data-event-id': eventId }, [
        h('td', { class: 'mono' }, eventId), h('td', {}, text(e.eventType)), h('td', { class: 'num' }, text(e.version)),
        h('td', { class: e.status === 'dead' ? 'bad' : null }, text(e.status) + ' (' + num(e.attempts) + ')'),
        h('td', {}, when(e.deliveredAt))].concat(columns.map(function (c) {
          var cell = traceCell(String(e.eventType), c, states[c]);
          cell.setAttribute('data-testid', 'trace-' + eventId + '-' + c);
          return cell;
        })));
    });
    out.replaceChildren(facts, table(['event', 'type', { label: 'version', num: true }, 'outbox', 'delivered'].concat(columns), rows,
      'no events yet (the task was never approved or withdrawn)', 'trace-events'));
  }

  function showTrace(id) {
    id = String(id).trim();
    $('trace-input').value = id;
    traceTaskId = id;
    if (location.hash !== '#task=' + id) history.replaceState(null, '', '#task=' + id);
    $('trace-section').scrollIntoView({ block: 'nearest' });
    loadTrace(id, false);
  }

  async function refresh() {
    if (running) { again = true; return; }
    running = true;
    clearTimeout(timer);
    var failures = [];
    var read = async function (path, render) {
      try { render(await call('GET', path)); } catch (e) { failures.push(e.message); }
    };
    await Promise.all([
      read('/ops/status', renderStatus),
      read('/ops/events?limit=20', renderEvents),
      read('/ops/outbox/dead', renderOutboxDead),
      read('/ops/dead-letters', renderDeadLetters),
    ].concat(consumers.map(function (c) {
      return read('/ops/inbox/' + encodeURIComponent(c) + '/dead', function (list) { renderInboxDead(c, list); });
    })).concat(traceTaskId && uuid.test(traceTaskId) ? [loadTrace(traceTaskId, true)] : []));
    var banner = $('error-banner');
    if (failures.length > 0) {
      banner.textContent = 'Some figures could not be read; they may be stale. Retrying every ' + config.refreshMs / 1000 + ' s.\\n' + failures.join('\\n');
      banner.hidden = false;
    } else {
      banner.hidden = true;
      $('last-updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    }
    running = false;
    if (again) { again = false; refresh(); return; }
    timer = setTimeout(refresh, config.refreshMs);
  }
  function refreshNow() { refresh(); }

  // One section per consumer, in the topology's order, before any answer arrives.
  consumers.forEach(function (c) { $('inbox-dead').appendChild(h('div', { id: 'inbox-dead-' + c, 'data-title': c + ' inbox' })); });
  $('trace-form').addEventListener('submit', function (event) {
    event.preventDefault();
    showTrace($('trace-input').value);
  });
  var fromHash = /^#task=(.+)$/.exec(location.hash);
  if (fromHash) showTrace(decodeURIComponent(fromHash[1]));
  refresh();
})();
`;

// The page's only code and style, allowed by hash: nothing else runs, loads or connects
// anywhere but this origin, even if some value were ever rendered as markup.
const hash = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;
const csp = [
  "default-src 'none'",
  `script-src ${hash(script)}`,
  `style-src ${hash(style)}`,
  "connect-src 'self'",
  'img-src data:',
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

// JSON inside <script type="application/json">: `<` escaped so no value can close the element.
const config = JSON.stringify({
  consumers: consumerNames,
  routes: routingTable(),
  refreshMs: dashboardRefreshMs,
}).replace(/</g, '\\u003c');

const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<title>content-pipeline</title>
<link rel="icon" href="data:,">
<style>${style}</style>
</head>
<body>
<header>
  <h1>content-pipeline</h1>
  <span id="alarm-summary" data-testid="alarm-summary"></span>
  <span id="last-updated" data-testid="last-updated">loading…</span>
</header>
<main>
  <div id="error-banner" class="banner" role="alert" data-testid="error-banner" hidden></div>
  <div id="notice" class="banner" role="status" aria-live="polite" data-testid="notice" hidden></div>
  <section>
    <h2>Alarms</h2>
    <div id="alarms" class="alarms" data-testid="alarms"></div>
  </section>
  <div class="cards">
    <section><h2>Tasks</h2><div id="tasks"></div></section>
    <section><h2>Outbox and relay</h2><div id="outbox"></div></section>
    <section><h2>Effects</h2><div id="effects"></div></section>
  </div>
  <section><h2>Consumer inboxes</h2><div id="inbox"></div></section>
  <section id="dead">
    <h2>Dead</h2>
    <div id="outbox-dead" data-title="Outbox"></div>
    <div id="inbox-dead"></div>
    <div id="dead-letters" data-title="Bus dead letters"></div>
  </section>
  <section><h2>Latest events</h2><div id="events"></div></section>
  <section id="trace-section">
    <h2>Task trace</h2>
    <form id="trace-form">
      <input id="trace-input" data-testid="trace-input" placeholder="task id (UUID)" autocomplete="off" spellcheck="false">
      <button type="submit" data-testid="trace-submit">Show trace</button>
    </form>
    <div id="trace-error" class="banner err" data-testid="trace-error" hidden></div>
    <div id="trace" data-testid="trace"></div>
  </section>
</main>
<script type="application/json" id="config">${config}</script>
<script>${script}</script>
</body>
</html>
`;

/**
 * The local dashboard (`GET /`): one self-contained page that reads the ops API every 2 s and
 * shows what `GET /ops/status` does, the dead lists with redrive buttons, the latest events and
 * one task's trace. Its Content-Security-Policy allows only its own inline script and style
 * (by hash) and same-origin fetches, so it loads nothing from anywhere else.
 */
export function dashboardHtml(): string {
  return page;
}
