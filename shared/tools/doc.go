// Package tools holds the tool executors the worker runs (worker.md §3, rulings P):
// the kinds of shared/toolkind's table (noop, python, http, postgres, duckdb, shell,
// playbook, transfer, nats, artifact), each reading its config through it. A Registry is configured once per
// worker; its Exec method satisfies pipeline.Exec, so single tools and pipelines go
// through the same door. An unknown kind is an error envelope "tool kind X is not
// supported by this worker".
//
// Every tool:
//   - gets its config already rendered (python `code` too, as NoETL renders it,
//     unless its braces do not compile as a template) and the merged input in
//     Item.Input; python also gets Item.Context, the render context for its
//     `context` global;
//   - stops when ctx is done (the worker puts the step deadline on ctx, R-L2) and then
//     returns a `timeout` envelope (kind timeout); python, shell, http, postgres and
//     playbook also take their own `timeout` (alias timeout_seconds, seconds), the
//     shorter bound wins and the message names which one fired;
//   - returns duration_ms (rounded up, so at least 1) and, on failure, an R-W6 error
//     {message, kind, status, retryable}; Exec never panics.
//
// The calling execution and step (python's `context`, `execution_id` and `step`
// globals; the playbook tool's parent) travel on ctx via WithCall. Config keys
// `_execution_id` and `_step` are a fallback for callers that cannot set ctx; the
// step defaults to the item label.
//
// # Decisions where the spec is silent
//
// Subprocesses (python, shell) run in their own process group with stdin /dev/null and
// an environment of exactly the worker's PATH, HOME, LANG and TMPDIR (when set) plus
// the tool's `env` (values in R-T2 text form, null dropped). On ctx end the whole group
// gets SIGKILL. stdout and stderr are kept up to Options.MaxOutput bytes each (default
// 1 MiB), then cut with a note. A version-manager shim used as the interpreter (pyenv)
// may add variables of its own; point Options.Python at the real binary to avoid it.
//
// With Options.User (a tool user, see User and DefaultToolUser) python and shell run
// as that account with the worker's supplementary groups dropped; each run gets a
// fresh directory under WorkDir owned by the user, which is its HOME and TMPDIR (and
// the shell's cwd unless `cwd` is given), since the worker's may be closed to it.
// Steps running at the same time on one worker share the user, so they are not
// isolated from each other: serve steps that must be in separate worker pools.
//
// python: exactly one of `code`, `code_b64` and `script` (a path, or NoETL's {uri,
// source} read from a file, inline, http, s3 or gcs: pyscript.go); a relative script
// path is taken from the worker's working directory. NoETL's pre-imports (os, json,
// datetime, uuid and its helpers) are globals; main() is called when defined, its
// arguments filled from the input, then `context` (docs/noetl-playbooks.md). Each run gets a temp dir under Options.WorkDir
// (its cwd, removed afterwards) holding the embedded harness (harness/harness.py) and
// the request/result side files. `__name__` is "__noetl__", so an
// `if __name__ == "__main__":` block does not run: main() is called by the contract,
// exactly once. main()'s value wins over a `result` global (NoETL's order), which
// counts only when the code bound it; an input named `result` is the last fallback
// (so `def main(result): …` still runs).
// `libs` are imported after the input globals (an alias wins over an input key of the
// same name); a list of module names is also accepted (`import a.b` semantics). A
// SystemExit(0) in the body skips main(). Whatever the body leaves running in the
// process group is killed when the harness exits. Non-JSON values follow
// json.dumps(default=str): tuples become lists, sets/dates/decimals strings; NaN and
// ±Infinity become strings; non-string dict keys are written as JSON writes them. A
// process that dies without a result (os._exit, a signal) is an error naming the exit
// code or signal. Errors are kind tool.
//
// shell: `command` may also be a list of lines. The exit-code error message adds the
// last stderr line. Background processes are left alone on a normal exit (a command
// may start a daemon on purpose) but killed with the group on timeout.
//
// http: data is {status_code, headers, body, data (= body), url, elapsed}. Header,
// query and form values are sent in R-T2 text form, null left out; a
// non-string `body` is sent in text form without a Content-Type (json and form set
// theirs unless the headers do). Without response_type the body is parsed when the
// Content-Type is application/json or +json; response_type json that does not parse
// falls back to text. Response header names are Go's canonical form (Content-Type). A
// status outside allow_status (default 2xx) is an error with error.status set, 3xx
// included when follow_redirects is false (kind tool). Bodies above MaxHTTPBody are an
// error. `auth` (alias `credential`; a string alias or {credential: alias}) accepts
// credential kinds bearer (Extra.token, else password → "Bearer …"), basic (user +
// password) and http (Extra.headers added, then Extra.token → Bearer, else user +
// password → Basic); explicit request headers win over the credential.
//
// postgres: one connection per call. The data is NoETL's: command_0, command_1, …
// per statement ({status, columns, rows, row_count} or {status, row_count,
// affected_rows, message}) and the last statement's entry at the top with
// statement_count. Without params the script is one simple-protocol
// Query, which PostgreSQL runs as one implicit transaction (explicit BEGIN/COMMIT in
// the script take over, as in psql); with params the single statement is bound
// server-side with untyped text values (null → NULL, objects/lists as JSON), so write
// `$1::int` where the server cannot infer a type. Connection precedence: `connection`
// (aliases connection_string, dsn), else the `auth` credential's dsn or fields; the
// config's host/port/user/password/database (alias dbname) fields override either.
// Values: an integral numeric beyond int64 stays exact as a string; `timestamp`
// (without zone) is written as UTC "…Z"; `date` as YYYY-MM-DD; ±infinity and NaN as
// strings; arrays as JSON arrays (multi-dimensional ones flattened); uuid, interval,
// time, money, enums and unknown types in PostgreSQL's text form. The session's
// DateStyle is pinned to ISO. On ctx end the server is sent a cancel request. Server
// errors are kind tool ("ERROR: … (SQLSTATE xxxxx)" plus DETAIL/HINT); not reaching the
// server is kind connection; a server refusing the login is kind tool.
//
// playbook: a `payload` object left in the config is merged over Item.Input (the
// engine merges `input`/`args`). With return_step, a step the child never finished
// gives result null; Wait must then return a ChildView. On timeout the envelope is
// `timeout` with data {execution_id, status: RUNNING}; the child is not cancelled. A
// Wait status other than COMPLETED, FAILED or CANCELLED (CANCELED is read as
// CANCELLED) is an error naming it.
//
// Credentials (R-P4): CredentialsFromEnv reads NOETL_CREDENTIALS_FILE and every
// NOETL_CREDENTIAL_<ALIAS> once, at construction (so the worker can drop them from its
// environment); an env entry wins over the file's. A store that implements
// SecretLister tells the worker every secret it holds, so they are masked in what the
// worker posts even when a tool finds them some other way.
package tools
