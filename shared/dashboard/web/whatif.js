// The what-if (#/whatif?path=&version=&executions= or &status=&since=&limit=):
// what a playbook version would have done on recorded executions (POST
// /api/whatif), answered from their recorded results without running a tool.
// whatIfAction is the "What if…" action of a failed execution's page. Both
// build DOM nodes with the page's helpers (ui), like app.js.
import * as api from '/ui/api.js';

const OUTCOMES = {
  same: 'same',
  would_complete: 'would complete',
  would_fail: 'would fail',
  needs_live: 'needs a live run',
};

// versionsOf lists a path's registered versions, newest first.
async function versionsOf(path) {
  const { entries } = await api.listCatalog({ path, limit: 100 });
  return entries.filter((e) => e.path === path).sort((a, b) => b.version - a.version);
}

// whatIfAction is the "What if…" button of an execution's page: it opens a
// picker of the playbook's versions and runs the what-if of the one picked
// over this execution.
export function whatIfAction(ui, exec) {
  const { h } = ui;
  const pick = h('select', { id: 'whatif-version', 'aria-label': 'Version to try' });
  const go = h('button', { type: 'button', class: 'primary', id: 'whatif-run', onclick: () => {
    const q = new URLSearchParams({ path: exec.path, version: pick.value, executions: String(exec.execution_id) });
    location.hash = '#/whatif?' + q;
  } }, 'Run what-if');
  const picker = h('span', { class: 'whatif-picker', hidden: true }, h('label', { for: 'whatif-version' }, 'with version '), pick, go);
  const open = h('button', { type: 'button', id: 'whatif', onclick: async () => {
    try {
      const vs = await versionsOf(exec.path);
      pick.replaceChildren(...vs.map((e) => h('option', { value: e.version, selected: e.version === Math.max(...vs.map((v) => v.version)) },
        `v${e.version}` + (e.version === exec.version ? ' (this run\'s)' : ''))));
      picker.hidden = false;
      open.hidden = true;
      pick.focus();
    } catch (e) { ui.report(e); }
  } }, 'What if…');
  return h('span', { class: 'whatif-action', id: 'whatif-action' }, open, picker);
}

// whatIfView runs the what-if the query names and shows the report: the
// summary, then per execution its outcome, the step where it diverges and
// each step's verdict.
export async function whatIfView(ui, query) {
  const { h, badge, execLink } = ui;
  document.title = 'What if · noetl';
  const path = query.get('path') || '';
  const version = query.get('version') || '';
  const ids = (query.get('executions') || '').split(',').map((s) => s.trim()).filter(Boolean);
  const status = query.get('status') || '';
  const since = query.get('since') || '';
  const limit = query.get('limit') || '';

  const pathIn = h('input', { id: 'wi-path', name: 'path', value: path, placeholder: 'examples/demo', required: true });
  const versionSel = h('select', { id: 'wi-version', name: 'version' });
  const statusSel = h('select', { id: 'wi-status', name: 'status' },
    ['', 'FAILED', 'COMPLETED', 'CANCELLED', 'RUNNING'].map((s) => h('option', { value: s, selected: s === status }, s || 'any')));
  const sinceIn = h('input', { id: 'wi-since', name: 'since', value: since, placeholder: '24h', size: 8 });
  const form = h('form', { class: 'filters', id: 'whatif-form', onsubmit: (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams({ path: pathIn.value.trim(), version: versionSel.value });
    if (statusSel.value) q.set('status', statusSel.value);
    if (sinceIn.value.trim()) q.set('since', sinceIn.value.trim());
    location.hash = '#/whatif?' + q;
  } },
  h('label', { for: 'wi-path' }, 'Playbook', pathIn),
  h('label', { for: 'wi-version' }, 'New version', versionSel),
  h('label', { for: 'wi-status' }, 'Recorded status', statusSel),
  h('label', { for: 'wi-since' }, 'Started since', sinceIn),
  h('button', { type: 'submit', class: 'primary' }, 'Run what-if'));
  const summary = h('div', { class: 'whatif-summary', id: 'whatif-summary', role: 'status' });
  const tbody = h('tbody');
  ui.view.replaceChildren(
    h('h1', {}, 'What if'),
    h('p', { class: 'hint' }, 'Runs a version over recorded executions, answering each command from the recorded result of the same command: no tool runs and nothing is written.'),
    form, summary,
    h('div', { class: 'table-wrap' }, h('table', { id: 'whatif-report' },
      h('thead', {}, h('tr', {}, ['Execution', 'Recorded', 'Outcome', 'Diverges at', 'Steps'].map((c) => h('th', { scope: 'col' }, c)))),
      tbody)));

  let tried = version;
  if (path) {
    const vs = await versionsOf(path);
    if (!tried && vs.length) tried = String(vs[0].version); // the latest
    versionSel.replaceChildren(...vs.map((e) => h('option', { value: e.version, selected: String(e.version) === tried }, `v${e.version}`)));
  }
  if (!path || !tried) {
    summary.textContent = 'Pick a playbook and a version to try.';
    return;
  }
  summary.textContent = 'Running…';
  const req = { path, version: Number(tried) };
  if (ids.length) req.executions = ids;
  else req.select = { status: status || undefined, since: since || undefined, limit: limit ? Number(limit) : undefined };
  const rep = await api.whatIf(req);
  const s = rep.summary;
  const n = rep.executions.length;
  summary.replaceChildren(
    h('strong', {}, `${rep.path} v${rep.version} over ${n} recorded execution${n === 1 ? '' : 's'}: `),
    ...Object.entries(OUTCOMES).map(([k, label]) => h('span', { class: `badge wi-${k}`, 'data-outcome': k }, `${s[k]} ${label}`)));
  tbody.replaceChildren(...rep.executions.map((e) => h('tr', { 'data-execution': e.execution_id, 'data-outcome': e.outcome },
    h('td', {}, execLink(e.execution_id)),
    h('td', {}, badge(e.recorded_status), ` v${e.recorded_version}`),
    h('td', {}, h('span', { class: `badge wi-${e.outcome}` }, OUTCOMES[e.outcome] || e.outcome),
      e.error ? h('div', { class: 'hint wi-error' }, e.error) : null),
    h('td', { class: 'wi-diverges' }, e.diverges_at || '—'),
    h('td', { class: 'wi-steps' }, e.steps.map((st) => h('span', {
      class: `wi-step wi-v-${st.verdict}` + (st.step === e.diverges_at ? ' wi-at' : ''),
      'data-step': st.step, 'data-verdict': st.verdict, title: st.diff || st.verdict,
    }, st.step, h('small', {}, ` ${st.verdict.replace('_', ' ')}`),
      // The diff of the step where it diverges is spelled out; the others' on hover.
      st.diff && st.step === e.diverges_at ? h('span', { class: 'wi-diff' }, st.diff) : null))))));
  if (!n) tbody.append(h('tr', {}, h('td', { colspan: 5 }, 'No recorded executions match.')));
}
