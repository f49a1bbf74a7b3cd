// The schedules views: the list with each schedule's next and last run, and
// one schedule with its log of runs (each linking its execution) and skipped
// due times. They build DOM nodes with the page's helpers (ui), like app.js.
import * as api from '/ui/api.js';

function when(s) {
  if (s.interval_seconds) return `every ${s.interval_seconds} s`;
  return `cron ${s.cron} (${s.timezone})`;
}

function state(ui, s) {
  return s.enabled ? ui.badge('enabled') : ui.h('span', { class: 'badge st-skipped' }, 'paused');
}

// scheduleListView: #/schedules
export async function scheduleListView(ui) {
  const { h } = ui;
  document.title = 'Schedules · noetl';
  const tbody = h('tbody');
  ui.view.replaceChildren(
    h('h1', {}, 'Schedules'),
    h('p', { class: 'hint' }, 'Playbooks started on a cron or an interval, once per due time. Create them with noetl schedules create or POST /api/schedules.'),
    h('div', { class: 'table-wrap' }, h('table', { id: 'schedules' },
      h('thead', {}, h('tr', {}, ['Schedule', 'Playbook', 'When', 'State', 'Next run', 'Last run', 'Last execution', 'Status'].map((c) => h('th', { scope: 'col' }, c)))),
      tbody)));
  const load = async () => {
    const page = await api.listSchedules();
    tbody.replaceChildren(...page.schedules.map((s) => h('tr', { 'data-schedule': s.schedule_id },
      h('td', {}, h('a', { href: `#/schedules/${s.schedule_id}` }, s.schedule_id)),
      h('td', {}, h('a', { href: `#/executions?path=${encodeURIComponent(s.playbook_path)}` }, s.playbook_path)),
      h('td', {}, when(s)),
      h('td', {}, state(ui, s)),
      h('td', { class: 'next-run' }, s.enabled ? ui.fmtTime(s.next_run_at) : '—'),
      h('td', { class: 'last-run' }, ui.fmtTime(s.last_scheduled_at)),
      h('td', {}, ui.execLink(s.last_execution_id)),
      h('td', {}, s.last_status ? ui.badge(s.last_status) : '—'))));
    if (!page.schedules.length) tbody.append(h('tr', {}, h('td', { colspan: 8 }, 'No schedules.')));
  };
  await load();
  ui.setStop(ui.poll(load, 2000));
}

// scheduleView: #/schedules/{id}
export async function scheduleView(ui, id) {
  const { h } = ui;
  document.title = `Schedule ${id} · noetl`;
  let s = await api.getSchedule(id);
  const title = h('h1');
  const meta = h('dl', { class: 'kv', id: 'schedule-meta' });
  const msg = h('p', { role: 'status', id: 'schedule-msg' });
  const toggle = h('button', { type: 'button', id: 'toggle', onclick: async () => {
    toggle.disabled = true;
    try { s = await api.setScheduleEnabled(id, !s.enabled); await load(); } catch (e) { ui.report(e); }
    toggle.disabled = false;
  } });
  const trigger = h('button', { type: 'button', class: 'primary', id: 'trigger', onclick: async () => {
    trigger.disabled = true;
    try {
      const r = await api.triggerSchedule(id);
      msg.textContent = r.outcome === 'started' ? `Started execution ${r.execution_id}.` : `${r.outcome}: ${r.reason || 'waits for the running one'}`;
      await load();
    } catch (e) { ui.report(e); }
    trigger.disabled = false;
  } }, 'Run now');
  const tbody = h('tbody');
  ui.view.replaceChildren(title, h('div', { class: 'actions' }, toggle, trigger, h('a', { href: '#/schedules' }, 'All schedules')), msg,
    h('section', { class: 'panel' }, meta),
    h('h2', {}, 'Runs'),
    h('div', { class: 'table-wrap' }, h('table', { id: 'runs' },
      h('thead', {}, h('tr', {}, ['Due', 'Outcome', 'Origin', 'Execution', 'Status', 'Note'].map((c) => h('th', { scope: 'col' }, c)))),
      tbody)));

  async function load() {
    s = await api.getSchedule(id);
    const page = await api.scheduleRuns(id);
    title.replaceChildren(`Schedule ${id} `, state(ui, s));
    toggle.textContent = s.enabled ? 'Pause' : 'Resume';
    const kv = (k, v) => [h('dt', {}, k), h('dd', {}, v)];
    meta.replaceChildren(...kv('playbook', s.playbook_path + (s.playbook_version ? ` v${s.playbook_version}` : ' (latest)')),
      ...kv('when', when(s)), ...kv('overlap', s.overlap), ...kv('catch-up', `${s.catchup_seconds} s`),
      ...kv('next run', s.enabled ? ui.fmtTime(s.next_run_at) : 'paused'),
      ...kv('last run', s.last_execution_id ? [ui.fmtTime(s.last_scheduled_at), ' — ', ui.execLink(s.last_execution_id)] : '—'),
      ...(s.backfill ? kv('backfill', `next ${ui.fmtTime(s.backfill.next)}, through ${ui.fmtTime(s.backfill.to)}`) : []),
      ...kv('input', JSON.stringify(s.input_payload || {})));
    tbody.replaceChildren(...page.runs.map((r) => h('tr', { 'data-due': r.scheduled_at, 'data-outcome': r.outcome },
      h('td', {}, ui.fmtTime(r.scheduled_at)),
      h('td', {}, ui.badge(r.outcome)),
      h('td', {}, r.origin),
      h('td', {}, ui.execLink(r.execution_id)),
      h('td', {}, r.status ? ui.badge(r.status) : '—'),
      h('td', {}, [r.count > 1 ? `${r.count} due times through ${ui.fmtTime(r.through)}. ` : '', r.reason || '']))));
    if (!page.runs.length) tbody.append(h('tr', {}, h('td', { colspan: 6 }, 'No runs yet.')));
  }
  await load();
  ui.setStop(ui.poll(load, 2000));
}
