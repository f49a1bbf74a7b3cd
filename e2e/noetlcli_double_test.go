package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/wire"
)

// noetlCLI plays NoETL's command-line client (github noetl/cli 2.13.0,
// src/main.rs), written from its source: for each command, the request it
// sends (method, path under {server}/api/, body, and both token headers when
// it has a token) and the answer fields it reads, with its types (a field of
// another JSON type is as absent to it), and its exit code. It never
// polls: a user "waits" by running status again. Facts and formats only;
// none of its code.
type noetlCLI struct {
	t      *testing.T
	server string // --server-url
	token  string // --session-token / NOETL_SESSION_TOKEN; "" sends no token header
}

// send is one request as the CLI makes it: {server}/api/{endpoint}, a JSON
// body (reqwest's .json(): Content-Type application/json), and, with a token,
// Authorization: Bearer and x-session-token both.
func (c *noetlCLI) send(method, endpoint string, body any) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.server+"/api/"+endpoint, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("x-session-token", c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, endpoint, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// Exit codes as the CLI ends: 0, or 1 where it calls process::exit(1) or an
// answer it must parse is not JSON.
const (
	cliOK   = 0
	cliFail = 1
)

// jsonObj is a body the CLI parses; nil when it is no JSON object.
func jsonObj(b []byte) map[string]any {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// The CLI's typed reads (serde_json's as_str, as_bool, as_array, as_u64,
// as_i64): another type reads as absent.
func cliStr(m map[string]any, k string) (string, bool) { s, ok := m[k].(string); return s, ok }
func cliBool(m map[string]any, k string) bool          { b, _ := m[k].(bool); return b }
func cliArr(m map[string]any, k string) ([]any, bool)  { a, ok := m[k].([]any); return a, ok }
func cliInt(v any) (int64, bool) {
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

// registerPlaybook is `noetl register playbook -f F` (and `catalog register
// F` for a file without "kind: Credential"): the file's text base64-encoded.
// It prints the whole answer; a non-2xx exits 1.
func (c *noetlCLI) registerPlaybook(text string) (int, map[string]any) {
	code, b := c.send("POST", "catalog/register", map[string]any{
		"content": base64.StdEncoding.EncodeToString([]byte(text)), "resource_type": "Playbook"})
	return cliExit(code, b)
}

// registerCredential is `noetl register credential -f F`: the JSON file sent
// as it is.
func (c *noetlCLI) registerCredential(file string) (int, map[string]any) {
	var body any
	if err := json.Unmarshal([]byte(file), &body); err != nil {
		c.t.Fatal(err)
	}
	code, b := c.send("POST", "credentials", body)
	return cliExit(code, b)
}

// cliExit is how register, exec and rerun end: 2xx with a JSON body 0, else 1.
func cliExit(code int, b []byte) (int, map[string]any) {
	m := jsonObj(b)
	if code/100 != 2 || m == nil {
		return cliFail, m
	}
	return cliOK, m
}

// catalogList is `noetl catalog list T`: the whole answer printed (no field
// read); an error is printed and exits 0.
func (c *noetlCLI) catalogList(kind string) (int, map[string]any) {
	code, b := c.send("POST", "catalog/list", map[string]any{"resource_type": kind})
	return code, jsonObj(b)
}

// catalogGet is `noetl catalog get P`.
func (c *noetlCLI) catalogGet(path string) (int, map[string]any) {
	code, b := c.send("POST", "catalog/resource", map[string]any{"path": path})
	return code, jsonObj(b)
}

// exec is `noetl exec REF -r distributed` with a payload: catalog://NAME@VER
// is path NAME and version VER when VER is an integer (dropped otherwise);
// any other catalog reference is the path. It reads execution_id, of any
// JSON type.
func (c *noetlCLI) exec(ref string, payload map[string]any) (int, string) {
	body := map[string]any{"workload": payload, "resource_kind": "playbook"}
	path := strings.TrimPrefix(ref, "catalog://")
	if name, ver, ok := strings.Cut(path, "@"); ok && strings.HasPrefix(ref, "catalog://") {
		path = name
		if v, err := strconv.ParseInt(ver, 10, 64); err == nil {
			body["version"] = v
		}
	}
	body["path"] = path
	code, m := cliExit(c.send("POST", "execute", body))
	return code, rawID(m)
}

// rerun is `noetl execute rerun ID`: {workload: {}, resource_kind}.
func (c *noetlCLI) rerun(id string, payload map[string]any) (int, string) {
	if payload == nil {
		payload = map[string]any{}
	}
	code, m := cliExit(c.send("POST", "executions/"+id+"/rerun", map[string]any{"workload": payload, "resource_kind": "playbook"}))
	return code, rawID(m)
}

// rawID is execution_id as the CLI prints it in its hint: a string without
// its quotes, a number as written.
func rawID(m map[string]any) string {
	switch v := m["execution_id"].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ""
}

// cliStatus is what `noetl status ID` prints.
type cliStatus struct {
	Label     string   // RUNNING, COMPLETED or FAILED
	Steps     int      // "Steps: N completed": completed_steps' length
	StepNames []string // "Completed steps:", its string elements
	Current   string   // "Current:", only while not completed
	Error     string   // "Error:", only when failed
	Duration  string   // "Duration:", "" when none is printed
	Fallback  bool     // served from GET /api/executions/{id} after a 404
}

// status is `noetl status ID`: one GET; only on 404 the fallback to the
// execution's page of events. Another status prints and exits 0.
func (c *noetlCLI) status(id string) (int, cliStatus) {
	code, b := c.send("GET", "executions/"+id+"/status", nil)
	var m map[string]any
	fallback := false
	switch {
	case code/100 == 2:
		if m = jsonObj(b); m == nil {
			return cliFail, cliStatus{}
		}
	case code == http.StatusNotFound:
		code, b = c.send("GET", "executions/"+id+"?page=1&page_size=10", nil)
		doc := jsonObj(b)
		if code/100 != 2 || doc == nil {
			return cliOK, cliStatus{Label: "?"}
		}
		st, _ := cliStr(doc, "status")
		m = map[string]any{"completed": st == "COMPLETED" || st == "FAILED" || st == "CANCELLED", "failed": st == "FAILED",
			"completed_steps": []any{}, "start_time": doc["start_time"], "end_time": doc["end_time"],
			"duration_seconds": doc["duration_seconds"], "duration_human": doc["duration_human"]}
		fallback = true
	default:
		return cliOK, cliStatus{Label: "?"}
	}
	s := cliStatus{Fallback: fallback, Label: "RUNNING"}
	completed, failed := cliBool(m, "completed"), cliBool(m, "failed")
	if completed {
		s.Label = "COMPLETED"
		if failed {
			s.Label = "FAILED"
		}
	}
	if steps, ok := cliArr(m, "completed_steps"); ok {
		s.Steps = len(steps)
		for _, st := range steps {
			if name, ok := st.(string); ok {
				s.StepNames = append(s.StepNames, name)
			}
		}
	}
	if !completed {
		if s.Current, _ = cliStr(m, "current_step"); s.Current == "" {
			s.Current = "unknown"
		}
	}
	if failed {
		s.Error, _ = cliStr(m, "error")
	}
	s.Duration = cliDuration(m)
	return cliOK, s
}

// cliDuration is the status's Duration line: duration_human when it is a
// non-empty string. (The CLI falls back to duration_seconds, then to the
// times; this server always sends duration_human, which the journeys
// require, so the fallbacks are not played.)
func cliDuration(m map[string]any) string {
	h, _ := cliStr(m, "duration_human")
	return h
}

// cliCancel is what `noetl cancel ID` prints.
type cliCancel struct {
	Status    string   // "Status:", upper-cased
	Count     int      // "Cancelled: N execution(s)"
	Listed    []string // "Cancelled executions:", the string ids, only when N > 1
	Message   string
	Warning   string // the 400 path: "Warning: <message>"
	JSONValid bool
}

// cancel is `noetl cancel ID [--cascade] [--reason R]`: cascade is always
// sent (false unless --cascade), reason only when given. 2xx and 400 exit 0;
// any other status exits 1.
func (c *noetlCLI) cancel(id string, cascade bool, reason string) (int, cliCancel) {
	body := map[string]any{"cascade": cascade}
	if reason != "" {
		body["reason"] = reason
	}
	code, b := c.send("POST", "executions/"+id+"/cancel", body)
	m := jsonObj(b)
	var out cliCancel
	switch {
	case code/100 == 2 && m != nil:
		out.JSONValid = true
		st, ok := cliStr(m, "status")
		if !ok {
			st = "unknown"
		}
		out.Status = strings.ToUpper(st)
		ids, _ := cliArr(m, "cancelled_executions")
		out.Count = len(ids)
		if len(ids) > 1 {
			for _, v := range ids {
				if s, ok := v.(string); ok {
					out.Listed = append(out.Listed, s)
				}
			}
		}
		out.Message, _ = cliStr(m, "message")
		return cliOK, out
	case code == http.StatusBadRequest && m != nil:
		out.JSONValid = true
		if out.Warning, _ = cliStr(m, "message"); out.Warning == "" {
			out.Warning = "Cannot cancel execution"
		}
		return cliOK, out
	}
	return cliFail, out
}

// cliCleanup is what `noetl cleanup` prints.
type cliCleanup struct {
	Found   uint64  // "Found: N stuck execution(s)": cancelled_count as u64
	Message string  // the message
	Listed  []int64 // "Execution IDs:", only the integer ids
}

// cleanup is `noetl cleanup [--older-than-minutes N] [--dry-run]`.
func (c *noetlCLI) cleanup(minutes int, dryRun bool) (int, cliCleanup) {
	code, b := c.send("POST", "executions/cleanup", map[string]any{"older_than_minutes": minutes, "dry_run": dryRun})
	m := jsonObj(b)
	if code/100 != 2 || m == nil {
		return cliFail, cliCleanup{}
	}
	var out cliCleanup
	if f, ok := m["cancelled_count"].(float64); ok && f >= 0 && f == math.Trunc(f) {
		out.Found = uint64(f)
	}
	out.Message, _ = cliStr(m, "message")
	ids, _ := cliArr(m, "execution_ids")
	for _, v := range ids {
		if n, ok := cliInt(v); ok {
			out.Listed = append(out.Listed, n)
		}
	}
	return cliOK, out
}

// dbValidate is `noetl db validate`: the answer printed; an error exits 1.
func (c *noetlCLI) dbValidate() (int, map[string]any) {
	return cliExit(c.send("GET", "db/validate", nil))
}

// dbInit is `noetl db init`: a POST without a body.
func (c *noetlCLI) dbInit() (int, map[string]any) {
	return cliExit(c.send("POST", "db/init", nil))
}

// query is `noetl query SQL -s SCHEMA` (the table format): result read as
// an array of rows, each an array of values; a non-2xx exits 1.
func (c *noetlCLI) query(sql, schema string) (int, [][]any) {
	code, m := cliExit(c.send("POST", "postgres/execute", map[string]any{"query": sql, "schema": schema}))
	if code != cliOK {
		return code, nil
	}
	result, _ := cliArr(m, "result")
	var rows [][]any
	for _, r := range result {
		if row, ok := r.([]any); ok {
			rows = append(rows, row)
		}
	}
	return cliOK, rows
}

const (
	cliHello = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: hello, path: cli/hello, description: Greets}
workload: {name: world}
workflow:
  - step: start
    tool: {kind: python, input: {name: "{{ workload.name }}"}, code: "result = {'greeting': 'hello ' + name}"}
    next: [{step: end}]
  - step: end
    tool: {kind: noop, result: {done: true}}
`
	cliBoom = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: boom, path: cli/boom}
workflow:
  - step: start
    tool: {kind: python, code: "raise ValueError('the step failed on purpose')"}
`
	cliSlow = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: slow, path: cli/slow}
workflow:
  - step: start
    tool: {kind: shell, command: "sleep 120"}
`
	cliParent = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: parent, path: cli/parent}
workflow:
  - step: start
    tool: {kind: playbook, path: cli/slow}
    next: [{step: end}]
  - step: end
    tool: {kind: noop}
`
	cliCredential = `{"name": "cli_pg", "type": "postgres", "description": "the CLI's database",
 "tags": "ci,cli", "meta": {"owner": "ops"},
 "data": {"host": "db.internal", "user": "app", "password": "s3cret-cli-password"}}`
)

// TestNoETLCLIDouble runs NoETL's CLI's journeys, request for request,
// against noetl dev, each answer read the way the CLI reads it (issue 30):
// register a playbook and a credential, catalog list and get, exec by path
// and by catalog://path@version with a payload, status until completed for a
// run that completes and one that fails, cancel of a running and of a
// finished run, cascade false leaving a child running, rerun, cleanup (dry
// run and real), and catalog list of credentials; then db validate, and db
// init and query, refused to the api token and served to the admin token.
// The stack has tokens, so every request carries the CLI's two token headers.
func TestNoETLCLIDouble(t *testing.T) {
	t.Parallel()
	// With tokens, as a shared deployment runs: the CLI sends its token as
	// Authorization: Bearer and x-session-token; the admin token holds the
	// api scope too.
	const apiToken, adminToken = "cli-api-token", "cli-admin-token"
	dev := startDev(t, devOptions{workers: 2, env: []string{"NOETL_API_TOKEN=" + apiToken, "NOETL_WORKER_TOKEN=cli-worker-token",
		"NOETL_ADMIN_TOKEN=" + adminToken}})
	cli := &noetlCLI{t: t, server: dev.url, token: apiToken}
	cl := client.New(dev.url, apiToken)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// Register: playbooks (text, base64) and a credential (its JSON as is).
	for _, pb := range []string{cliHello, cliBoom, cliSlow, cliParent} {
		if code, m := cli.registerPlaybook(pb); code != cliOK || m["path"] == nil {
			t.Fatalf("register playbook: exit %d, %v", code, m)
		}
	}
	code, m := cli.registerPlaybook(cliHello + "# version 2\n")
	if code != cliOK || fmt.Sprint(m["version"]) != "2" {
		t.Fatalf("register hello again: exit %d, %v", code, m)
	}
	if code, m := cli.registerCredential(cliCredential); code != cliOK || m["name"] != "cli_pg" || m["data"] != nil {
		t.Fatalf("register credential: exit %d, %v", code, m)
	}

	// catalog list and get print the whole answer.
	code, m = cli.catalogList("Playbook")
	if entries, _ := cliArr(m, "entries"); code != 200 || !slices.ContainsFunc(entries, func(e any) bool {
		return e.(map[string]any)["path"] == "cli/hello"
	}) {
		t.Errorf("catalog list Playbook: HTTP %d %v", code, m)
	}
	code, m = cli.catalogGet("cli/hello")
	if content, _ := cliStr(m, "content"); code != 200 || !strings.Contains(content, "# version 2") {
		t.Errorf("catalog get: HTTP %d %v", code, m)
	}
	// catalog list Credential: names and metadata, never the data.
	code, m = cli.catalogList("Credential")
	entries, _ := cliArr(m, "entries")
	if code != 200 || len(entries) != 1 || entries[0].(map[string]any)["path"] != "cli_pg" {
		t.Errorf("catalog list Credential: HTTP %d %v", code, m)
	}
	if b, _ := json.Marshal(m); strings.Contains(string(b), "s3cret-cli-password") {
		t.Errorf("catalog list Credential shows the credential's data: %s", b)
	}

	// The CLI does not wait: its user runs status again until it says so.
	waitLabel := func(id string, want ...string) cliStatus {
		t.Helper()
		var s cliStatus
		waitFor(t, "noetl status "+id+" to print "+strings.Join(want, " or "), 2*time.Minute, func() bool {
			code, s = cli.status(id)
			if code != cliOK {
				t.Fatalf("status %s: exit %d", id, code)
			}
			return slices.Contains(want, s.Label)
		})
		return s
	}
	human := regexp.MustCompile(`^(\d+[dhm] )*\d+[dhms]$`)

	// exec by path, and by catalog://path@version with a payload.
	code, byPath := cli.exec("cli/hello", map[string]any{})
	if code != cliOK || byPath == "" {
		t.Fatalf("exec cli/hello: exit %d", code)
	}
	s := waitLabel(byPath, "COMPLETED", "FAILED")
	if s.Label != "COMPLETED" || s.Steps != 2 || !slices.Equal(s.StepNames, []string{"start", "end"}) || !human.MatchString(s.Duration) || s.Error != "" {
		t.Errorf("status of a completed run: %+v", s)
	}
	code, byRef := cli.exec("catalog://cli/hello@1", map[string]any{"name": "cli"})
	if code != cliOK {
		t.Fatalf("exec catalog://cli/hello@1: exit %d", code)
	}
	waitLabel(byRef, "COMPLETED")
	run, err := cl.Execution(ctx, mustID(t, byRef))
	if err != nil {
		t.Fatal(err)
	}
	if run.Version != 1 || run.Workload["name"] != "cli" || !strings.Contains(fmt.Sprint(run.Steps["start"].Result.V), "hello cli") {
		t.Errorf("exec catalog://cli/hello@1 ran version %d with %v: %v", run.Version, run.Workload, run.Steps["start"].Result.V)
	}
	if code, _ := cli.exec("catalog://cli/hello@99", nil); code != cliFail {
		t.Errorf("exec of a version that does not exist: exit %d, want 1", code)
	}

	// A run that fails prints FAILED with its error (NoETL's own server says
	// completed false there, and its CLI prints RUNNING).
	code, failed := cli.exec("cli/boom", map[string]any{})
	if code != cliOK {
		t.Fatalf("exec cli/boom: exit %d", code)
	}
	s = waitLabel(failed, "FAILED", "COMPLETED")
	if s.Label != "FAILED" || !strings.Contains(s.Error, "the step failed on purpose") || s.Steps != 0 {
		t.Errorf("status of a failed run: %+v", s)
	}

	// cancel of a running and of a finished run.
	code, slow := cli.exec("cli/slow", map[string]any{})
	if code != cliOK {
		t.Fatalf("exec cli/slow: exit %d", code)
	}
	if s := waitLabel(slow, "RUNNING"); s.Current != "start" && s.Current != "unknown" {
		t.Errorf("status of a running run: %+v", s)
	}
	code, cc := cli.cancel(slow, false, "the CLI's test")
	if code != cliOK || cc.Status != "CANCELLED" || cc.Count != 1 || cc.Message != "Cancelled 1 execution(s)" {
		t.Errorf("cancel of a running run: exit %d %+v", code, cc)
	}
	if s := waitLabel(slow, "FAILED", "COMPLETED"); s.Label != "FAILED" || !strings.Contains(s.Error, "cancel") {
		t.Errorf("status of a cancelled run: %+v", s)
	}
	for _, id := range []string{byPath, failed, slow} {
		code, cc := cli.cancel(id, false, "")
		if code != cliOK || cc.Status != "ALREADY_COMPLETED" || cc.Count != 0 || !strings.HasPrefix(cc.Message, "Execution "+id+" is already ") {
			t.Errorf("cancel of finished %s: exit %d %+v", id, code, cc)
		}
	}
	if code, _ := cli.cancel("1099511627776", false, ""); code != cliFail {
		t.Errorf("cancel of an execution that does not exist: exit %d, want 1", code)
	}

	// cascade false leaves the child running, now and after the journeys
	// below, through the drain's passes (whose orphan job would cancel it
	// otherwise: TestOrphansHonourCascade); --cascade then ends it.
	code, parent := cli.exec("cli/parent", map[string]any{})
	if code != cliOK {
		t.Fatalf("exec cli/parent: exit %d", code)
	}
	var child int64
	waitFor(t, "cli/parent's child", time.Minute, func() bool {
		rows, _, err := cl.ListExecutions(ctx, url.Values{"parent_execution_id": {parent}})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 1 {
			child = int64(rows[0].ExecutionID)
		}
		return child != 0
	})
	code, cc = cli.cancel(parent, false, "")
	if code != cliOK || cc.Count != 1 || cc.Listed != nil {
		t.Errorf("cancel --cascade=false of the parent: exit %d %+v", code, cc)
	}
	childID := strconv.FormatInt(child, 10)
	if _, s := cli.status(childID); s.Label != "RUNNING" {
		t.Errorf("the child of a parent cancelled without cascade: %+v", s)
	}
	if _, s := cli.status(parent); s.Label != "FAILED" {
		t.Errorf("the parent cancelled without cascade: %+v", s)
	}

	// rerun: the run again, its workload kept.
	code, again := cli.rerun(byRef, nil)
	if code != cliOK || again == "" || again == byRef {
		t.Fatalf("rerun %s: exit %d, %q", byRef, code, again)
	}
	waitLabel(again, "COMPLETED")
	if rr, err := cl.Execution(ctx, mustID(t, again)); err != nil || rr.Workload["name"] != "cli" || rr.Version != 1 {
		t.Errorf("rerun: %v %+v", err, rr)
	}

	// cleanup: an execution nothing moves (its pool has no worker; started
	// outside the CLI, which cannot name a pool), aged ten minutes in the
	// database, as time would age it.
	stuck, err := cl.Execute(ctx, wire.ExecuteRequest{Path: "cli/hello", Pool: "nobody-serves-this"})
	if err != nil {
		t.Fatal(err)
	}
	dev.age(t, ctx, stuck, 10*time.Minute)
	code, swept := cli.cleanup(5, true)
	if code != cliOK || swept.Found != 1 || swept.Message != "[DRY RUN] Would cancel 1 stuck executions older than 5 minutes" || swept.Listed != nil {
		t.Errorf("cleanup --dry-run: exit %d %+v", code, swept)
	}
	if _, s := cli.status(strconv.FormatInt(stuck, 10)); s.Label != "RUNNING" {
		t.Errorf("the stuck run after the dry run: %+v", s)
	}
	code, swept = cli.cleanup(5, false)
	if code != cliOK || swept.Found != 1 || swept.Message != "Successfully cancelled 1 stuck executions older than 5 minutes" {
		t.Errorf("cleanup: exit %d %+v", code, swept)
	}
	if _, s := cli.status(strconv.FormatInt(stuck, 10)); s.Label != "FAILED" {
		t.Errorf("the stuck run after the cleanup: %+v", s)
	}
	if _, s := cli.status(childID); s.Label != "RUNNING" {
		t.Errorf("cleanup cancelled a child that runs: %+v", s)
	}
	if code, swept := cli.cleanup(5, false); code != cliOK || swept.Found != 0 || swept.Message != "No stuck executions found older than 5 minutes" {
		t.Errorf("cleanup with nothing stuck: exit %d %+v", code, swept)
	}

	// db validate; db init and query only with the admin token.
	if code, m := cli.dbValidate(); code != cliOK || m["valid"] != true {
		t.Errorf("db validate: exit %d %v", code, m)
	}
	if code, _ := cli.dbInit(); code != cliFail {
		t.Errorf("db init with the api token: exit %d, want 1 (403)", code)
	}
	if code, _ := cli.query("SELECT 1", "noetl"); code != cliFail {
		t.Errorf("query with the api token: exit %d, want 1 (403)", code)
	}
	admin := &noetlCLI{t: t, server: dev.url, token: adminToken}
	if code, m := admin.dbInit(); code != cliOK || m["message"] != "Database schema ready" {
		t.Errorf("db init: exit %d %v", code, m)
	}
	code, rows := admin.query("SELECT count(*) AS n, max(name) AS name FROM credential", "noetl")
	if code != cliOK || fmt.Sprint(rows) != "[[1 cli_pg]]" {
		t.Errorf("query: exit %d %v", code, rows)
	}

	// The child, cancelled with --cascade (its own children, none).
	if code, cc := cli.cancel(childID, true, ""); code != cliOK || cc.Count != 1 {
		t.Errorf("cancel --cascade of the child: exit %d %+v", code, cc)
	}
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("execution id %q: %v", s, err)
	}
	return n
}

// age moves an execution's last change back by "by" in
// the shard databases beside the cluster database noetl dev printed: what
// that long of nothing happening leaves.
func (d *devStack) age(t *testing.T, ctx context.Context, id int64, by time.Duration) {
	t.Helper()
	m := regexp.MustCompile(`cluster database (\S+)`).FindStringSubmatch(d.printed())
	if m == nil {
		t.Fatalf("noetl dev did not print its database:\n%s", d.printed())
	}
	cluster, err := pgx.Connect(ctx, m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close(ctx)
	// The shards are the cluster database's siblings: <prefix>_shardN beside <prefix>_cluster.
	rows, err := cluster.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE $1 || '_shard%'`,
		strings.TrimSuffix(cluster.Config().Database, "_cluster"))
	if err != nil {
		t.Fatal(err)
	}
	dbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	moved := int64(0)
	for _, db := range dbs {
		cfg := cluster.Config().Copy()
		cfg.Database = db
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		tag, err := conn.Exec(ctx, `UPDATE execution SET updated_at = updated_at - $2::interval WHERE execution_id = $1`,
			id, fmt.Sprintf("%d seconds", int64(by.Seconds())))
		if err != nil {
			t.Fatal(err)
		}
		moved += tag.RowsAffected()
		conn.Close(ctx)
	}
	if moved != 1 {
		t.Fatalf("aged %d execution rows for %d, want 1", moved, id)
	}
}
