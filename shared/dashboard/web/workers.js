// The workers view (#/workers): the worker registry (GET /api/worker/pools),
// ours and NoETL's workers, live ones first; busy is the commands a worker
// holds under a live lease over the capacity it declared. It builds DOM nodes
// with the page's helpers (ui), like app.js.
import * as api from '/ui/api.js';

// ago says how long ago a time was, to the second.
function ago(t) {
  if (!t) return '—';
  const s = Math.max(0, Math.round((Date.now() - new Date(t)) / 1000));
  return s < 120 ? `${s} s ago` : `${Math.floor(s / 60)} min ago`;
}

export async function workersView(ui, query) {
  const { h } = ui;
  document.title = 'Workers · noetl';
  const state = query.get('status') || '';
  const stateSel = h('select', { name: 'status', id: 'f-worker-status', onchange: () => {
    location.hash = '#/workers' + (stateSel.value ? '?status=' + encodeURIComponent(stateSel.value) : '');
  } }, ['', 'alive', 'expired', 'offline'].map((s) => h('option', { value: s, selected: s === state }, s || 'any')));
  const summary = h('p', { id: 'workers-summary', role: 'status' });
  const tbody = h('tbody');
  ui.view.replaceChildren(
    h('h1', {}, 'Workers'),
    h('form', { class: 'filters', onsubmit: (ev) => ev.preventDefault() }, h('label', { for: 'f-worker-status' }, 'State', stateSel)),
    summary,
    h('div', { class: 'table-wrap' }, h('table', { id: 'workers' },
      h('thead', {}, h('tr', {}, ['Worker', 'Pool', 'Runtime', 'State', 'Busy', 'Last seen', 'Host'].map((c) => h('th', { scope: 'col' }, c)))),
      tbody)),
    h('p', { class: 'hint' }, 'A worker registers when it starts and beats every 15 s; silent for longer than its TTL (45 s by default) it is expired, deregistered it is offline.'));

  const load = async () => {
    const ws = await api.listWorkers({ state });
    ws.sort((a, b) => (a.alive === b.alive ? a.name.localeCompare(b.name) : (a.alive ? -1 : 1)));
    const alive = ws.filter((w) => w.alive);
    const busy = alive.reduce((n, w) => n + (w.in_flight || 0), 0);
    const slots = alive.reduce((n, w) => n + (w.capacity || 0), 0);
    summary.textContent = `${alive.length} of ${ws.length} workers alive; ${busy} in flight on ${slots} declared slots`;
    tbody.replaceChildren(...ws.map((w) => {
      const cap = w.capacity ?? null;
      const busyCell = h('span', { class: 'busy' },
        cap ? h('meter', { min: 0, max: cap, value: w.in_flight, 'aria-label': `${w.in_flight} of ${cap} slots busy` }) : null,
        `${w.in_flight} / ${cap ?? '?'}`);
      return h('tr', { 'data-worker': w.name, 'data-state': w.status, 'data-alive': String(w.alive), 'data-in-flight': String(w.in_flight),
        class: w.alive ? '' : 'gone' },
      h('th', { scope: 'row' }, w.name),
      h('td', {}, w.pool),
      h('td', {}, (w.runtime && w.runtime.type) || '—'),
      h('td', {}, ui.badge(w.status)),
      h('td', {}, busyCell),
      h('td', { title: ui.fmtTime(w.heartbeat) }, ago(w.heartbeat)),
      h('td', {}, [w.hostname, w.pid].filter((x) => x !== null && x !== undefined && x !== '').join(':') || '—'));
    }));
    if (!ws.length) tbody.append(h('tr', {}, h('td', { colspan: 7 }, state ? `No ${state} workers.` : 'No workers registered.')));
  };
  await load();
  ui.setStop(ui.poll(load, 2000));
}
