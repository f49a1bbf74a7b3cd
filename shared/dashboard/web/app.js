// The dashboard: views over the API, chosen by the URL fragment so that every
// view has its own address (#/executions/1024 can be bookmarked and shared).
// Views build DOM nodes, never HTML strings, so no value from an execution
// can inject markup.
import * as api from '/ui/api.js';
import { StepGraph, STATES, stateLabel } from '/ui/graph.js';
import { scheduleListView, scheduleView } from '/ui/schedules.js';
import { workersView } from '/ui/workers.js';
import { whatIfAction, whatIfView } from '/ui/whatif.js';

const view = document.getElementById('view');
const banner = document.getElementById('banner');
const tokenForm = document.getElementById('token-form');
const authState = document.getElementById('auth-state');
const TERMINAL = new Set(['COMPLETED', 'FAILED', 'CANCELLED']);
// How much of a log the page holds: far past real executions (a 1,000-step
// loop writes about 5,000 events); the list renders only the rows in sight.
const MAX_EVENTS = 100000;
const EVENT_ROW = 26;

let dagre = null;
let auth = 'unknown';
// stop ends the current view's polling when the route changes.
let stop = () => {};

function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

// nodes flattens what a view builds (arrays from conditionals, nulls) into
// what replaceChildren takes.
function nodes(...items) {
  return items.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false);
}

function say(msg, isError) {
  banner.hidden = !msg;
  banner.textContent = msg || '';
  banner.classList.toggle('error', !!isError);
}

function json(v) { return JSON.stringify(v, null, 2); }
function fmtTime(t) { return t ? new Date(t).toLocaleString() : '—'; }
function duration(a, b) {
  if (!a) return '—';
  const ms = (b ? new Date(b) : new Date()) - new Date(a);
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}
function badge(status) {
  const s = String(status || 'unknown').toLowerCase();
  return h('span', { class: `badge st-${s}` }, status || 'unknown');
}
function execLink(id) { return id ? h('a', { href: `#/executions/${id}` }, id) : '—'; }

// Polling: a chain of timeouts that the next route cancels.
function poll(fn, ms) {
  let live = true;
  let timer = null;
  const tick = async () => {
    if (!live) return;
    let again = true;
    try { again = await fn(); } catch (e) { report(e); }
    if (live && again !== false) timer = setTimeout(tick, ms);
  };
  timer = setTimeout(tick, ms);
  return () => { live = false; clearTimeout(timer); };
}

function report(e) {
  if (e instanceof api.ApiError && e.status === 401) return; // the token form says it
  say(e.message || String(e), true);
}

// ---- auth ----

api.onAuthRequired(() => askToken('The token was refused or is missing: enter a valid API token.'));

function askToken(why) {
  if (api.token()) api.setToken('');
  auth = 'needed';
  stop();
  document.getElementById('token-why').textContent = why;
  tokenForm.hidden = false;
  authState.textContent = 'token required';
  view.replaceChildren(h('p', {}, 'Enter an API token to see this stack.'));
  document.getElementById('token-input').focus();
}

tokenForm.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const input = document.getElementById('token-input');
  api.setToken(input.value.trim());
  input.value = '';
  await start();
});

async function start() {
  try {
    auth = await api.probeAuth();
  } catch (e) {
    say('Cannot reach the API: ' + e.message, true);
    return;
  }
  if (auth === 'needed') {
    askToken(api.token() ? 'The token was refused: enter a valid API token.' : 'This stack requires an API token.');
    return;
  }
  tokenForm.hidden = true;
  if (auth === 'open') {
    authState.textContent = 'open: no token';
    say('This stack is open: no API token is configured, so anyone who can reach it can read and run playbooks.');
  } else {
    say('');
    authState.replaceChildren('token set ', h('button', { type: 'button', onclick: () => { api.setToken(''); start(); } }, 'Forget token'));
  }
  route();
}

// ---- routing ----

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/executions';
  const [path, qs] = raw.split('?');
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(qs || '') };
}

function route() {
  if (auth === 'needed' || auth === 'unknown') return;
  stop();
  stop = () => {};
  const { parts, query } = parseHash();
  for (const a of document.querySelectorAll('[data-nav]')) {
    a.toggleAttribute('aria-current', a.dataset.nav === parts[0]);
    if (a.dataset.nav === parts[0]) a.setAttribute('aria-current', 'page');
  }
  if (banner.classList.contains('error')) say(auth === 'open' ? '' : '');
  if (auth === 'open') say('This stack is open: no API token is configured, so anyone who can reach it can read and run playbooks.');
  const fail = (e) => report(e);
  if (parts[0] === 'executions' && parts[1]) executionView(parts[1]).catch(fail);
  else if (parts[0] === 'catalog' && parts[1]) catalogEntryView(parts[1]).catch(fail);
  else if (parts[0] === 'catalog') catalogView(query).catch(fail);
  else if (parts[0] === 'workers') workersView(ui, query).catch(fail);
  else if (parts[0] === 'schedules' && parts[1]) scheduleView(ui, parts[1]).catch(fail);
  else if (parts[0] === 'schedules') scheduleListView(ui).catch(fail);
  else if (parts[0] === 'whatif') whatIfView(ui, query).catch(fail);
  else executionsView(query).catch(fail);
}

window.addEventListener('hashchange', route);

// ui is what the views of other modules (schedules.js) build with.
const ui = { view, h, badge, fmtTime, execLink, poll, report, setStop: (fn) => { stop = fn; } };

// ---- executions list ----

async function executionsView(query) {
  const filters = { status: query.get('status') || '', path: query.get('path') || '', parent: query.get('parent') || '' };
  const cursor = query.get('cursor') || '';
  document.title = 'Executions · noetl';
  const tbody = h('tbody');
  const next = h('a', { class: 'next', hidden: true }, 'Next page →');
  const statusSel = h('select', { name: 'status', id: 'f-status' },
    ['', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED'].map((s) => h('option', { value: s, selected: s === filters.status }, s || 'any')));
  const pathIn = h('input', { name: 'path', id: 'f-path', value: filters.path, placeholder: 'examples/demo' });
  const form = h('form', { class: 'filters', onsubmit: (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    if (statusSel.value) q.set('status', statusSel.value);
    if (pathIn.value.trim()) q.set('path', pathIn.value.trim());
    if (filters.parent) q.set('parent', filters.parent);
    location.hash = '#/executions' + (q.toString() ? '?' + q : '');
  } },
  h('label', { for: 'f-status' }, 'Status', statusSel),
  h('label', { for: 'f-path' }, 'Path', pathIn),
  h('button', { type: 'submit' }, 'Filter'));
  // Executions nothing will move (GET /api/doctor), above the list.
  const stalledRows = h('tbody');
  const stalled = h('section', { id: 'stalled', class: 'stalled', hidden: true, 'aria-labelledby': 'stalled-title' },
    h('h2', { id: 'stalled-title' }, 'Stalled executions'),
    h('p', { class: 'hint' }, 'Running, with nothing that will move them, or waiting on a scheduled drain that is not running (noetl doctor).'),
    h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, ['Execution', 'Status', 'Path', 'Why'].map((c) => h('th', { scope: 'col' }, c)))),
      stalledRows)));
  view.replaceChildren(
    h('h1', {}, filters.parent ? `Children of execution ${filters.parent}` : 'Executions'),
    stalled,
    form,
    h('div', { class: 'table-wrap' }, h('table', { id: 'executions' },
      h('thead', {}, h('tr', {}, ['Execution', 'Status', 'Path', 'Version', 'Started', 'Duration', 'Parent'].map((c) => h('th', { scope: 'col' }, c)))),
      tbody)),
    h('div', { class: 'pager' }, cursor ? h('a', { href: '#/executions?' + withoutCursor(query) }, '← First page') : null, next));

  const load = async () => {
    const [page, stuck] = await Promise.all([api.listExecutions({ ...filters, cursor }), api.doctor()]);
    stalledRows.replaceChildren(...stuck.map((s) => h('tr', { 'data-stalled': s.execution_id },
      h('td', {}, execLink(s.execution_id)),
      h('td', {}, badge(s.status)),
      h('td', {}, s.path),
      h('td', { class: 'reason' }, s.reason))));
    stalled.hidden = stuck.length === 0;
    tbody.replaceChildren(...page.executions.map((e) => h('tr', { 'data-execution': e.execution_id },
      h('td', {}, execLink(e.execution_id)),
      h('td', {}, badge(e.status)),
      h('td', {}, h('a', { href: `#/executions?path=${encodeURIComponent(e.path)}` }, e.path)),
      h('td', {}, e.version),
      h('td', {}, fmtTime(e.started_at)),
      h('td', {}, duration(e.started_at, e.completed_at)),
      h('td', {}, execLink(e.parent_execution_id)))));
    if (!page.executions.length) tbody.append(h('tr', {}, h('td', { colspan: 7 }, 'No executions.')));
    if (page.next) {
      const q = new URLSearchParams(query);
      q.set('cursor', page.next);
      next.setAttribute('href', '#/executions?' + q);
      next.hidden = false;
    } else next.hidden = true;
  };
  await load();
  // The first page follows new executions; a later page stays put (its
  // cursor pins where it starts).
  if (!cursor) stop = poll(async () => { await load(); }, 2000);
}

function withoutCursor(query) {
  const q = new URLSearchParams(query);
  q.delete('cursor');
  return q.toString();
}

// ---- one execution ----

// stepStates maps the live view's or a replay's steps to graph states.
function stepStates(steps, loops) {
  const out = {};
  for (const [name, s] of Object.entries(steps || {})) {
    let st = String(s.status || '').toLowerCase();
    if (st === 'pending' && !s.visits) continue; // not reached
    if (!STATES.includes(st)) st = st === 'pending' || st === 'entered' || st === 'claimed' ? 'running' : st;
    if (!STATES.includes(st)) st = 'running';
    out[name] = { state: st, attempts: s.attempts || 0 };
  }
  // The latest visit's loop counts, one node per loop whatever its size.
  const best = {};
  for (const l of Object.values(loops || {})) {
    const v = Number(l.visit) || 0;
    if (!best[l.step_name] || v >= best[l.step_name].v) best[l.step_name] = { v, done: l.done || 0, total: l.total || 0, cursor: !!l.cursor };
  }
  for (const [name, l] of Object.entries(best)) {
    out[name] = out[name] || { state: 'running', attempts: 0 };
    // A cursor loop's total is the rows claimed so far: it counts rows.
    out[name].progress = { done: l.done, total: l.total, unit: l.cursor ? 'rows' : 'iterations' };
  }
  return out;
}

async function executionView(id) {
  document.title = `Execution ${id} · noetl`;
  let exec = await api.getExecution(id);
  const entry = await api.getCatalog(exec.catalog_id);
  const outline = entry.graph || { steps: [] };
  const hasLoops = outline.steps.some((s) => s.loop);
  let loops = hasLoops ? (await api.replay(id, { projection: 'loop' })).loops : {};
  let evs = [];
  let nextSeq = 0;
  let selected = null;
  let asOf = null; // null: live
  let asOfState = null; // the replay at asOf

  const title = h('h1', {}, `Execution ${id}`);
  const meta = h('div', { class: 'meta' });
  const cancelBtn = h('button', { type: 'button', class: 'danger', id: 'cancel', onclick: async () => {
    cancelBtn.disabled = true;
    try { await api.cancel(id, 'cancelled from the dashboard'); await refresh(); } catch (e) { report(e); cancelBtn.disabled = false; }
  } }, 'Cancel');
  const rerunBtn = h('button', { type: 'button', id: 'rerun', onclick: async () => {
    // The API serves secret-named workload values masked: sending them back
    // would start a run with the mask as its password.
    if (JSON.stringify(exec.workload || {}).includes('[REDACTED]')) {
      say('This execution\'s workload holds masked secrets ([REDACTED]): start it from its playbook\'s page with the secret values.', true);
      return;
    }
    try {
      const nid = await api.execute({ catalog_id: exec.catalog_id, payload: exec.workload || {} });
      location.hash = `#/executions/${nid}`;
    } catch (e) { report(e); }
  } }, 'Run again');
  // Redrive (issue 31): a FAILED or CANCELLED execution continues in place,
  // under its version or a newer one of its playbook; the page is drawn
  // again after it (the version's graph may differ).
  const redriveVersion = h('select', { id: 'redrive-version', 'aria-label': 'Version to redrive under' });
  const redriveBtn = h('button', { type: 'button', class: 'primary', id: 'redrive', onclick: async () => {
    redriveBtn.disabled = true;
    try {
      const r = await api.redrive(id, Number(redriveVersion.value) || undefined);
      route();
      say(`Execution ${id} redriven under version ${r.version}: ${r.commands} command(s) issued; the steps that completed keep their results.`);
    } catch (e) { report(e); redriveBtn.disabled = false; }
  } }, 'Redrive');
  const redriveBox = h('span', { class: 'redrive', id: 'redrive-box', hidden: true,
    title: 'Continue this execution in place: steps that completed keep their results and do not run again' },
  h('label', {}, 'under ', redriveVersion), redriveBtn);
  let versionsFor = null;
  async function loadVersions() {
    if (versionsFor === exec.catalog_id) return;
    versionsFor = exec.catalog_id;
    const page = await api.listCatalog({ path: exec.path, limit: 200 });
    const versions = page.entries.filter((e) => e.path === exec.path && e.version >= exec.version)
      .map((e) => e.version).sort((a, b) => b - a);
    if (!versions.includes(exec.version)) versions.push(exec.version);
    redriveVersion.replaceChildren(...versions.map((v) => h('option', { value: v, selected: v === versions[0] },
      v === exec.version ? `v${v} (its own)` : `v${v}`)));
  }
  const verifyBadge = h('span', { class: 'badge', id: 'verify' }, 'verify: not yet');
  const whatIf = whatIfAction(ui, exec);
  const graphBox = h('div', { class: 'graph-wrap', id: 'graph' });
  const direction = h('select', { id: 'direction', 'aria-label': 'Graph direction' },
    h('option', { value: 'auto' }, 'fit the pane'), h('option', { value: 'LR' }, 'left to right'), h('option', { value: 'TB' }, 'top down'));
  const slider = h('input', { type: 'range', id: 'travel', min: 1, max: 1, value: 1, 'aria-label': 'Event log position' });
  const travelLabel = h('span', { id: 'travel-label', 'aria-live': 'polite' }, 'live');
  const liveBtn = h('button', { type: 'button', id: 'live' }, 'Live');
  const ctxPre = h('pre', { id: 'context' });
  const details = h('div', { id: 'step-details' }, h('p', { class: 'hint' }, 'Select a step in the graph to see its commands, inputs, result and error.'));
  const eventsBox = h('div', { class: 'events', id: 'events', role: 'list', 'aria-label': 'Event timeline' });
  const eventsSpacer = h('div');
  eventsBox.append(eventsSpacer);
  const eventsCount = h('span', { class: 'hint' });

  view.replaceChildren(
    title, meta,
    h('div', { class: 'actions' }, cancelBtn, redriveBox, rerunBtn, whatIf, verifyBadge,
      h('a', { href: `#/executions?parent=${id}` }, 'Children'),
      h('a', { href: `#/catalog/${exec.catalog_id}` }, 'Playbook')),
    h('div', { class: 'exec-grid' },
      h('section', { class: 'panel', 'aria-label': 'Step graph' },
        h('div', { class: 'actions' }, h('h2', {}, 'Steps'), h('label', {}, 'Layout ', direction)),
        graphBox,
        h('div', { class: 'legend', 'aria-label': 'Legend' }, STATES.map((s) => h('span', { class: `badge st-${s}` }, stateLabel(s)))),
        h('div', { class: 'travel' }, h('label', { for: 'travel' }, 'Time travel'), slider, travelLabel, liveBtn),
        h('h2', {}, 'Context'), ctxPre),
      h('section', { class: 'panel', 'aria-label': 'Details' },
        h('h2', {}, 'Step'), details,
        h('h2', {}, 'Events ', eventsCount), eventsBox)));

  let graph = null;
  const drawGraph = () => {
    graph = new StepGraph(graphBox, outline, { dagre, direction: direction.value, onSelect: (n) => { selected = n; render(); } });
  };
  direction.addEventListener('change', () => { drawGraph(); render(); });
  drawGraph();

  const lastSeq = () => (evs.length ? evs[evs.length - 1].seq : 0);

  function render() {
    const terminal = TERMINAL.has(exec.status);
    title.replaceChildren(`Execution ${id} `, badge(exec.status));
    meta.replaceChildren(...nodes(
      h('span', {}, 'Playbook ', h('a', { href: `#/catalog/${exec.catalog_id}` }, `${exec.path} v${exec.version}`)),
      h('span', {}, 'Started ', fmtTime(exec.started_at)),
      h('span', {}, 'Duration ', duration(exec.started_at, exec.completed_at)),
      h('span', {}, 'Parent ', execLink(exec.parent_execution_id)),
      exec.schedule_id ? h('span', { id: 'exec-schedule' }, 'Started by ', h('a', { href: `#/schedules/${exec.schedule_id}` }, `schedule ${exec.schedule_id}`),
        ' for ', fmtTime(exec.scheduled_at)) : null));
    // A finished execution offers no Cancel; a failed or cancelled one, Redrive.
    cancelBtn.hidden = terminal;
    const redrivable = exec.status === 'FAILED' || exec.status === 'CANCELLED';
    redriveBox.hidden = !redrivable;
    if (redrivable) loadVersions().catch(report);
    whatIf.hidden = exec.status !== 'FAILED';
    const states = asOf === null ? stepStates(exec.steps, loops) : stepStates(asOfState.steps, asOfState.loops);
    graph.update(states, selected);
    graphBox.dataset.asOf = asOf === null ? 'live' : String(asOf); // what the graph shows
    slider.max = Math.max(1, lastSeq());
    if (asOf === null) slider.value = slider.max;
    travelLabel.textContent = asOf === null ? `live (event ${lastSeq()})` : `as of event ${asOf} of ${lastSeq()}`;
    ctxPre.textContent = json(asOf === null ? (exec.context || {}) : contextAt(asOf));
    renderDetails(states);
    renderEvents();
  }

  // The durable context at a position: the workload, then each ctx.updated.
  function contextAt(pos) {
    const ctx = {};
    for (const e of evs) {
      if (e.seq > pos) break;
      if (e.event_type === 'ctx.updated' && e.context && e.context.values) Object.assign(ctx, e.context.values);
    }
    return ctx;
  }

  function renderDetails(states) {
    if (!selected) return;
    const live = (exec.steps || {})[selected] || {};
    const st = states[selected] || { state: 'notreached' };
    const cut = asOf === null ? Infinity : asOf;
    const cmds = new Map();
    for (const e of evs) {
      if (e.seq > cut) break;
      if (e.node_name !== selected || !e.command_id) continue;
      const c = cmds.get(e.command_id) || { id: e.command_id, attempts: 0 };
      const m = e.meta || {};
      if (e.event_type === 'command.issued') { c.issued = e.created_at; c.input = e.context; c.iteration = m.iteration_index; }
      if (e.event_type === 'command.claimed') { c.attempts = Math.max(c.attempts, m.attempt || 1); c.worker = e.worker_id; c.lease = m.lease_expires_at; c.claimed = e.created_at; }
      if (e.event_type === 'command.completed' || e.event_type === 'command.failed' || e.event_type === 'command.cancelled' || e.event_type === 'command.expired') {
        c.status = e.event_type.split('.')[1]; c.done = e.created_at; if (e.error) c.error = e.error;
      }
      cmds.set(e.command_id, c);
    }
    const list = [...cmds.values()];
    const shown = list.slice(0, 50);
    const stepDef = outline.steps.find((s) => s.name === selected) || {};
    details.replaceChildren(...nodes(
      h('h3', {}, selected, ' ', badge(stateLabel(st.state))),
      h('dl', { class: 'kv' },
        h('dt', {}, 'tool'), h('dd', {}, stepDef.tool + (stepDef.loop ? ` (loop, ${stepDef.loop})` : '')),
        st.progress ? [h('dt', {}, 'iterations'), h('dd', {}, `${st.progress.done}/${st.progress.total}`)] : null,
        h('dt', {}, 'attempts'), h('dd', {}, String(st.attempts || live.attempts || 0)),
        asOf === null ? [h('dt', {}, 'visits'), h('dd', {}, String(live.visits ?? 0)),
          h('dt', {}, 'started'), h('dd', {}, fmtTime(live.started_at)),
          h('dt', {}, 'completed'), h('dd', {}, fmtTime(live.completed_at))] : null),
      h('h4', {}, `Commands (${list.length})`),
      list.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'commands' },
        h('thead', {}, h('tr', {}, ['command', 'iteration', 'worker', 'attempts', 'lease until', 'took', 'outcome'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, shown.map((c) => h('tr', {},
          h('td', {}, c.id), h('td', {}, c.iteration ?? '—'), h('td', {}, c.worker || '—'), h('td', {}, c.attempts || '—'),
          h('td', {}, c.lease ? fmtTime(c.lease) : '—'), h('td', {}, c.done ? duration(c.claimed || c.issued, c.done) : '—'),
          h('td', {}, c.status || 'open')))))) : h('p', { class: 'hint' }, 'No commands yet.'),
      list.length > shown.length ? h('p', { class: 'hint' }, `and ${list.length - shown.length} more`) : null,
      shown.length && shown[0].input ? [h('h4', {}, 'Rendered input (first command)'), h('pre', { class: 'input' }, json(shown[0].input))] : null,
      asOf === null ? [h('h4', {}, 'Result'), h('pre', { class: 'result', id: 'step-result' }, json(live.result ?? null))] : null,
      (asOf === null ? live.error : null) ? [h('h4', {}, 'Error'), h('pre', { class: 'error-text' }, json(live.error))] : null));
  }

  // The timeline renders only the rows in sight: a long log stays cheap.
  let lastRange = '';
  function renderEvents(force) {
    eventsCount.textContent = `(${evs.length}${nextSeq !== null && evs.length >= MAX_EVENTS ? '+' : ''})`;
    eventsSpacer.style.height = `${evs.length * EVENT_ROW}px`;
    const first = Math.max(0, Math.floor(eventsBox.scrollTop / EVENT_ROW) - 5);
    const last = Math.min(evs.length, first + Math.ceil((eventsBox.clientHeight || 320) / EVENT_ROW) + 10);
    const key = `${first}:${last}:${evs.length}:${asOf}`;
    if (key === lastRange && !force) return;
    lastRange = key;
    const rows = [];
    for (let i = first; i < last; i++) {
      const e = evs[i];
      const cls = 'row' + (asOf !== null && e.seq > asOf ? ' future' : '') + (asOf === e.seq ? ' at' : '');
      const row = h('div', { class: cls, role: 'listitem', tabindex: 0, 'data-seq': e.seq,
        title: 'Travel to this event', onclick: () => travel(e.seq).catch(report), onkeydown: (ev) => { if (ev.key === 'Enter') travel(e.seq).catch(report); } },
      `${e.seq}  ${e.event_type}  ${e.node_name || ''}  ${e.status || ''}`);
      row.style.top = `${i * EVENT_ROW}px`; // CSSOM: the CSP allows no style attributes
      rows.push(row);
    }
    eventsBox.replaceChildren(eventsSpacer, ...rows);
  }
  eventsBox.addEventListener('scroll', () => renderEvents());

  async function loadEvents() {
    while (nextSeq !== null && evs.length < MAX_EVENTS) {
      const page = await api.events(id, nextSeq, 1000);
      evs.push(...page.events);
      if (page.events.length) nextSeq = page.events[page.events.length - 1].seq;
      if (page.next === null) break;
      nextSeq = page.next;
    }
  }

  let travelToken = 0;
  async function travel(pos) {
    const n = ++travelToken;
    if (pos >= lastSeq() && TERMINAL.has(exec.status)) pos = lastSeq();
    const r = await api.replay(id, { asOf: pos });
    if (n !== travelToken) return; // a later move won
    asOf = pos;
    asOfState = r;
    slider.value = pos;
    render();
  }
  let debounce = null;
  slider.addEventListener('input', () => {
    clearTimeout(debounce);
    const pos = Number(slider.value);
    travelLabel.textContent = `as of event ${pos} of ${lastSeq()}`;
    debounce = setTimeout(() => travel(pos).catch(report), 120);
  });
  liveBtn.addEventListener('click', () => { travelToken++; asOf = null; asOfState = null; render(); });

  async function verify() {
    const r = await api.replay(id, { verify: true, projection: 'execution' });
    const v = r.verify || {};
    verifyBadge.className = 'badge ' + (v.consistent ? 'st-completed' : 'st-failed');
    verifyBadge.textContent = v.consistent ? 'verify: replay matches' : `verify: ${(v.differences || []).length} differences`;
    verifyBadge.title = v.consistent ? 'The fold of the event log equals the live state' : json(v.differences || []);
  }

  async function refresh() {
    exec = await api.getExecution(id);
    if (hasLoops) loops = (await api.replay(id, { projection: 'loop' })).loops;
    await loadEvents();
    render();
    if (TERMINAL.has(exec.status)) await verify();
    return !TERMINAL.has(exec.status);
  }

  await loadEvents();
  render();
  if (TERMINAL.has(exec.status)) await verify();
  else stop = poll(refresh, 1000);
}

// ---- catalog ----

async function catalogView(query) {
  document.title = 'Catalog · noetl';
  const cursor = query.get('cursor') || '';
  const page = await api.listCatalog({ cursor, path: query.get('path') || '' });
  const next = page.next ? h('a', { href: '#/catalog?cursor=' + encodeURIComponent(page.next) }, 'Next page →') : null;
  const yaml = h('textarea', { id: 'register-yaml', 'aria-label': 'Playbook YAML', placeholder: 'apiVersion: noetl.io/v2\nkind: Playbook\n…' });
  const out = h('div', { id: 'register-result' });
  view.replaceChildren(
    h('h1', {}, 'Catalog'),
    h('div', { class: 'table-wrap' }, h('table', { id: 'catalog' },
      h('thead', {}, h('tr', {}, ['Path', 'Version', 'Kind', 'Registered'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, page.entries.map((e) => h('tr', {},
        h('td', {}, h('a', { href: `#/catalog/${e.catalog_id}` }, e.path)),
        h('td', {}, e.version), h('td', {}, e.kind), h('td', {}, fmtTime(e.created_at))))))),
    h('div', { class: 'pager' }, cursor ? h('a', { href: '#/catalog' }, '← First page') : null, next),
    h('h2', {}, 'Register a playbook'),
    h('form', { onsubmit: async (ev) => {
      ev.preventDefault();
      try {
        const r = await api.register(yaml.value);
        location.hash = `#/catalog/${r.catalog_id}`;
      } catch (e) {
        if (e.status === 422 && e.body && e.body.problems) {
          out.replaceChildren(h('p', { class: 'error-text' }, e.message.split(':')[0]), yamlWithProblems(yaml.value, e.body.problems.map(parseProblem)));
        } else report(e);
      }
    } }, yaml, h('button', { type: 'submit', class: 'primary' }, 'Register')),
    out);
}

// parseProblem reads the register route's "path: message (line N)".
function parseProblem(p) {
  if (typeof p !== 'string') return p;
  const m = /^(\S+): (.*?)(?: \(line (\d+)\))?$/.exec(p);
  return m ? { severity: 'error', path: m[1], message: m[2], line: Number(m[3]) || 0 } : { severity: 'error', path: '', message: p, line: 0 };
}

// yamlWithProblems shows the source with numbered lines, the lines that
// problems point at marked, and the problems listed with their YAML paths.
function yamlWithProblems(src, problems) {
  const byLine = new Map();
  for (const p of problems) if (p.line) byLine.set(p.line, p);
  const pre = h('pre', { class: 'yaml', id: 'yaml' }, src.split('\n').map((l, i) => {
    const p = byLine.get(i + 1);
    return h('span', { class: p ? (p.severity === 'warning' ? 'warning' : 'problem') : null, title: p ? `${p.path}: ${p.message}` : null, id: `L${i + 1}` }, l || ' ');
  }));
  return h('div', {},
    problems.length ? h('ul', { class: 'problems', id: 'problems' }, problems.map((p) => h('li', {},
      badge(p.severity), ' ', h('code', {}, p.path || '(document)'), ' ', p.message, p.line ? ` (line ${p.line})` : ''))) : null,
    pre);
}

async function catalogEntryView(cid) {
  const e = await api.getCatalog(cid);
  document.title = `${e.path} v${e.version} · noetl`;
  const payload = h('textarea', { id: 'workload', 'aria-label': 'Workload (JSON)' }, '{}');
  const msg = h('p', { role: 'status' });
  const graphBox = h('div', { class: 'graph-wrap' });
  view.replaceChildren(
    h('h1', {}, `${e.path} `, h('span', { class: 'hint' }, `version ${e.version}`)),
    h('div', { class: 'meta' }, h('span', {}, 'Registered ', fmtTime(e.created_at)),
      h('a', { href: `#/executions?path=${encodeURIComponent(e.path)}` }, 'Executions of this path')),
    h('section', { class: 'panel' },
      h('h2', {}, 'Start an execution'),
      h('form', { id: 'start-form', onsubmit: async (ev) => {
        ev.preventDefault();
        let body;
        try { body = JSON.parse(payload.value || '{}'); } catch (err) { msg.textContent = 'The workload is not JSON: ' + err.message; return; }
        if (body === null || typeof body !== 'object' || Array.isArray(body)) { msg.textContent = 'The workload must be a JSON object.'; return; }
        try {
          const id = await api.execute({ catalog_id: e.catalog_id, payload: body });
          location.hash = `#/executions/${id}`;
        } catch (err) { msg.textContent = err.message; }
      } }, h('label', { for: 'workload' }, 'Workload (JSON object; overrides the playbook\'s workload keys)'), payload,
      h('button', { type: 'submit', class: 'primary', id: 'start' }, 'Start'), msg)),
    h('section', { class: 'panel' }, h('h2', {}, 'Steps'), graphBox),
    h('section', { class: 'panel' }, h('h2', {}, 'YAML'), yamlWithProblems(e.content || '', e.problems || [])));
  if (e.graph) new StepGraph(graphBox, e.graph, { dagre, onSelect: () => {} }).update({}, null);
}

// ---- start ----

async function boot() {
  const layout = document.querySelector('meta[name="noetl-layout"]').content;
  if (layout) dagre = (await import('/ui/' + layout)).default;
  else say('The graph layout library is not in this binary (build with make dashboard); steps are shown in a column.');
  await start();
}
boot();
