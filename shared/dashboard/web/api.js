// Every request the dashboard makes goes through this module: the token, the
// error shape and the shapes of the routes are handled here once, so a change
// of the wire format (another list shape, a new field) is an edit here only.

const TOKEN_KEY = 'noetl.token';

// The token lives in sessionStorage: it is gone when the browser tab closes,
// and it is never written into a URL or a cookie.
export function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY);
}

// ApiError carries the HTTP status and the API's own message ({error, status}).
export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

// Listeners hear about 401s, so the page can ask for a token wherever the
// refusal happened.
const authListeners = new Set();
export function onAuthRequired(fn) { authListeners.add(fn); }

async function call(method, path, { query, body } = {}) {
  let url = path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
    }
    const s = q.toString();
    if (s) url += '?' + s;
  }
  const headers = { Accept: 'application/json' };
  const t = token();
  if (t) headers.Authorization = 'Bearer ' + t;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const resp = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!resp.ok) {
    const msg = (data && data.error) || `${method} ${path}: HTTP ${resp.status}`;
    const err = new ApiError(resp.status, msg, data);
    if (resp.status === 401) authListeners.forEach((fn) => fn(err));
    throw err;
  }
  return { data, headers: resp.headers };
}

// probeAuth tells whether the stack wants a token and whether ours is good:
// 'open' (no tokens configured), 'ok' (ours was accepted) or 'needed'.
export async function probeAuth() {
  const headers = { Accept: 'application/json' };
  const t = token();
  if (t) headers.Authorization = 'Bearer ' + t;
  const resp = await fetch('/api/executions?limit=1', { headers });
  if (resp.status === 401) return 'needed';
  if (!t) return 'open';
  // A token the open stack ignores still works; say open, since it is.
  const bare = await fetch('/api/executions?limit=1', { headers: { Accept: 'application/json' } });
  return bare.status === 401 ? 'ok' : 'open';
}

// The list's cursor: in the body ({executions, next_cursor}) or, when the body
// is a bare array, in a response header.
function nextCursorOf(data, headers) {
  if (data && !Array.isArray(data) && data.next_cursor) return data.next_cursor;
  for (const h of ['X-Next-Cursor', 'Next-Cursor', 'X-Cursor']) {
    const v = headers.get(h);
    if (v) return v;
  }
  return null;
}

// listExecutions returns one page: {executions, next} (keyset paging: the
// cursor of the next page, or null).
export async function listExecutions({ status, path, parent, cursor, limit = 50 } = {}) {
  const { data, headers } = await call('GET', '/api/executions', {
    query: { status, path, parent_execution_id: parent, cursor, limit },
  });
  const rows = Array.isArray(data) ? data : (data.executions || []);
  return { executions: rows, next: nextCursorOf(data, headers) };
}

export async function getExecution(id) {
  return (await call('GET', `/api/executions/${encodeURIComponent(id)}`)).data;
}

// events returns one page of the log after a seq: {events, next} (next: the
// after_seq of the next page, or null at the end).
export async function events(id, afterSeq = 0, limit = 1000) {
  const { data } = await call('GET', `/api/executions/${encodeURIComponent(id)}/events`, {
    query: { after_seq: afterSeq, limit },
  });
  const list = Array.isArray(data) ? data : (data.events || []);
  let next = Array.isArray(data) ? null : (data.next_after_seq ?? null);
  if (next === null && list.length === limit) next = list[list.length - 1].seq;
  return { events: list, next };
}

// replay folds the log (replay.md): asOf, when given, is an inclusive seq.
export async function replay(id, { asOf, projection, verify } = {}) {
  return (await call('GET', `/api/executions/${encodeURIComponent(id)}/replay`, {
    query: { as_of_position: asOf, projection, verify: verify ? 'true' : undefined },
  })).data;
}

export async function cancel(id, reason) {
  return (await call('POST', `/api/executions/${encodeURIComponent(id)}/cancel`, { body: { reason } })).data;
}

// redrive continues a FAILED or CANCELLED execution in place under version
// (undefined: its own).
export async function redrive(id, version) {
  return (await call('POST', `/api/executions/${encodeURIComponent(id)}/redrive`, { body: version ? { version } : {} })).data;
}

// execute starts an execution and returns its id.
export async function execute(req) {
  const { data } = await call('POST', '/api/execute', { body: req });
  return String(data.execution_id);
}

// whatIf asks what a version would have done on recorded executions
// (POST /api/whatif): {path, version} and {executions} or {select}.
export async function whatIf(req) {
  return (await call('POST', '/api/whatif', { body: req })).data;
}

export async function listCatalog({ path, cursor, limit = 50 } = {}) {
  const { data, headers } = await call('GET', '/api/catalog', { query: { path, cursor, limit } });
  const rows = Array.isArray(data) ? data : (data.entries || []);
  return { entries: rows, next: nextCursorOf(data, headers) };
}

export async function getCatalog(id) {
  return (await call('GET', `/api/catalog/${encodeURIComponent(id)}`)).data;
}

export async function register(content) {
  return (await call('POST', '/api/catalog/register', { body: { content } })).data;
}

// ---- schedules ----

export async function listSchedules({ cursor, limit = 100 } = {}) {
  const { data } = await call('GET', '/api/schedules', { query: { cursor, limit } });
  return { schedules: data.schedules || [], next: data.next_cursor || null };
}

export async function getSchedule(id) {
  return (await call('GET', `/api/schedules/${encodeURIComponent(id)}`)).data;
}

// scheduleRuns returns one page of a schedule's log, newest first.
export async function scheduleRuns(id, { cursor, limit = 50 } = {}) {
  const { data } = await call('GET', `/api/schedules/${encodeURIComponent(id)}/runs`, { query: { cursor, limit } });
  return { runs: data.runs || [], next: data.next_cursor || null };
}

// setScheduleEnabled pauses (false) or resumes (true) a schedule.
export async function setScheduleEnabled(id, enabled) {
  return (await call('PATCH', `/api/schedules/${encodeURIComponent(id)}`, { body: { enabled } })).data;
}

export async function triggerSchedule(id) {
  return (await call('POST', `/api/schedules/${encodeURIComponent(id)}/trigger`, { body: {} })).data;
}

// ---- workers ----

// listWorkers reads the worker registry (NoETL's {items, count}): who is
// alive and how busy. state: alive, ready, expired, offline, or '' for all.
// doctor lists the executions that break the liveness invariant (GET
// /api/doctor): nothing will move them, or their commands wait on a drain
// that is not running; each has a reason.
export async function doctor() {
  const { data } = await call('GET', '/api/doctor', { query: { limit: 100 } });
  return data.stalled || [];
}

export async function listWorkers({ state } = {}) {
  const { data } = await call('GET', '/api/worker/pools', { query: { status: state } });
  return Array.isArray(data) ? data : (data.items || []);
}
