package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/dev/devserver"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/wire"
)

// The secrets of TestSecretsStayOut: each must never come back out.
const (
	apiToken      = "e2e-api-token-5a1"
	workerToken   = "e2e-worker-token-4b2"
	fileDSNPass   = "file-pg-password-1c3"
	bearerToken   = "env-bearer-token-2d4"
	otherPassword = "other-alias-password-3e5"
	wlPassword    = "workload-password-6f6"
	wlAPIKey      = "workload-api-key-7a7"
	kcBearer      = "keychain-bearer-token-9b9"
)

const secretsYAML = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: secrets, path: e2e/secrets}
workload:
  db_password: ` + wlPassword + `
  api_key: ` + wlAPIKey + `
  creds_file: ""
  echo_url: ""
  worker_pid: 0
workflow:
  - step: start
    desc: the worker's environment, from the shell
    tool: {kind: shell, command: "(tr '\\000' '\\n' < /proc/$PPID/environ) 2>&1; true"}
    next: environ_python
  - step: environ_python
    tool:
      kind: python
      input: {worker: "{{ worker_pid }}"}
      code: |
        import os
        try:
            result = {"environ": open("/proc/%d/environ" % worker, "rb").read().decode(errors="replace").replace("\0", "\n")}
        except OSError as e:
            result = {"environ": type(e).__name__}
    next: credentials_file
  - step: credentials_file
    tool: {kind: shell, command: "cat \"$CREDS\" 2>&1; true", env: {CREDS: "{{ creds_file }}"}}
    next: postgres
  - step: postgres
    desc: the alias from the file works (its password is in its DSN)
    tool: {kind: postgres, auth: pg_file, query: "SELECT 1 AS one"}
    next: echo
  - step: echo
    desc: a server that echoes the credential the worker sent
    tool: {kind: http, url: "{{ echo_url }}", auth: echo_api}
    next: keychain
  - step: keychain
    desc: the same through the keychain (the worker reads it from the server)
    tool: {kind: http, url: "{{ echo_url }}", auth: kc_echo}
    next: templated
  - step: templated
    tool:
      kind: python
      input: {pw: "{{ db_password }}", key: "{{ api_key }}"}
      code: |
        print("the password is", pw)
        result = {"seen": pw + "/" + key}
    next: templated_shell
  - step: templated_shell
    tool: {kind: shell, command: "echo \"$PGPASSWORD\"", env: {PGPASSWORD: "{{ db_password }}"}}
`

// TestSecretsStayOut is issue 10's "done when" for secrets: a worker holding
// tokens and credentials (NOETL_CREDENTIAL_* and a credentials file) runs
// python and shell steps that read the worker's /proc/<pid>/environ and the credentials
// file, an http step whose server echoes the credential, and steps that get
// the workload's password and api_key through templates. Nothing secret
// appears in the execution view, the events, the commands, replay, the CLI's
// replay --verify, the server's log or the worker's. A credential the worker
// reads through the keychain (GET /api/credentials/{alias}?include_data) is
// masked like the others, and the keychain's tables hold it only sealed. The worker runs as root
// (tools as nobody, the default) and as nobody itself (tools as the same
// user, kept out of /proc by Protect; the credentials file, readable then,
// comes back masked).
func TestSecretsStayOut(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the worker runs as root and as nobody: needs root")
	}
	var serverLog lockedBuffer
	env := map[string]string{"NOETL_API_TOKEN": apiToken, "NOETL_WORKER_TOKEN": workerToken, "NOETL_INTERNAL_TOKEN": "e2e-internal-token-8c8"}
	srv, err := devserver.Start(context.Background(), devserver.Options{DrainEvery: 500 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&serverLog, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	cl := client.New(srv.URL, apiToken)
	if _, err := cl.Register(context.Background(), secretsYAML); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.PutCredential(context.Background(), wire.CredentialRequest{Name: "kc_echo", Type: "bearer",
		Data: wire.Object{"token": kcBearer}}); err != nil {
		t.Fatal(err)
	}
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "you sent: %s", r.Header.Get("Authorization"))
	}))
	t.Cleanup(echo.Close)

	dir := openDir(t)
	// A copy the user nobody can run: the shared build's directory is 0700.
	bin := filepath.Join(dir, "noetl")
	copyFile(t, buildNoetl(t), bin, 0o755)
	// The file's credential logs in as a role of its own whose password is
	// fileDSNPass (the throwaway server checks passwords).
	admin, err := pgx.Connect(context.Background(), srv.ClusterDSN)
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.Exec(context.Background(), "CREATE ROLE e2e_pg_file LOGIN PASSWORD '"+fileDSNPass+"'")
	_ = admin.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	dsn, err := url.Parse(srv.ClusterDSN)
	if err != nil {
		t.Fatal(err)
	}
	dsn.User = url.UserPassword("e2e_pg_file", fileDSNPass)
	credsJSON := fmt.Sprintf(`{"pg_file": {"kind": "postgres", "dsn": %q}, "unused": {"kind": "postgres", "host": "h", "password": "%s"}}`,
		dsn.String(), otherPassword)

	for _, c := range []struct {
		name     string
		asNobody bool
	}{{"worker as root, tools as nobody", false}, {"worker as nobody, tools too", true}} {
		t.Run(c.name, func(t *testing.T) {
			pool := fmt.Sprintf("secrets-%v", c.asNobody)
			creds := filepath.Join(dir, pool+".json")
			if err := os.WriteFile(creds, []byte(credsJSON), 0o600); err != nil {
				t.Fatal(err)
			}
			var workerLog lockedBuffer
			w := exec.Command(bin, "worker", "--server", srv.URL, "--nats", srv.NATSURL, "--pool", pool, "--id", pool)
			w.Dir = dir
			w.Env = []string{"PATH=" + os.Getenv("PATH"), "NOETL_WORKER_TOKEN=" + workerToken, "NOETL_API_TOKEN=" + apiToken,
				"NOETL_CREDENTIALS_FILE=" + creds, fmt.Sprintf(`NOETL_CREDENTIAL_ECHO_API={"kind": "bearer", "token": %q}`, bearerToken)}
			w.Stdout, w.Stderr = &workerLog, &workerLog
			w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if c.asNobody {
				if err := os.Chown(creds, 65534, 65534); err != nil {
					t.Fatal(err)
				}
				w.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534}
			}
			if err := w.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(-w.Process.Pid, syscall.SIGKILL); _ = w.Wait() })

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			id, err := cl.Execute(ctx, wire.ExecuteRequest{Path: "e2e/secrets", Pool: pool,
				Payload: map[string]any{"creds_file": creds, "echo_url": echo.URL, "worker_pid": w.Process.Pid}})
			if err != nil {
				t.Fatal(err)
			}
			view, err := cl.Wait(ctx, id, 100*time.Millisecond)
			if err != nil {
				t.Fatalf("%v\nworker log:\n%s", err, workerLog.String())
			}
			if view.Status != "COMPLETED" {
				t.Fatalf("status %v error %v\nworker log:\n%s", view.Status, view.Error, workerLog.String())
			}

			// The steps ran and were stopped or masked, not skipped.
			stdout := func(name string) string {
				r, _ := step(view, name).Result.V.(map[string]any)
				s, _ := r["stdout"].(string)
				return s
			}
			if out := stdout("start"); !strings.Contains(out, "Permission denied") {
				t.Errorf("shell read of /proc/$PPID/environ: %q", out)
			}
			if r, _ := step(view, "environ_python").Result.V.(map[string]any); r["environ"] != "PermissionError" {
				t.Errorf("python read of the worker's environ: %v", r)
			}
			file := stdout("credentials_file")
			if c.asNobody {
				if !strings.Contains(file, `"pg_file"`) || strings.Count(file, "[REDACTED]") < 2 {
					t.Errorf("the tool user's own credentials file should come back masked: %q", file)
				}
			} else if !strings.Contains(file, "Permission denied") {
				t.Errorf("a root-only credentials file read by the tool user: %q", file)
			}
			if r, _ := step(view, "postgres").Result.V.(map[string]any); fmt.Sprint(r["rows"]) != "[map[one:1]]" {
				t.Errorf("postgres through the file's alias: %v", r)
			}
			if r, _ := step(view, "echo").Result.V.(map[string]any); r["body"] != "you sent: Bearer [REDACTED]" {
				t.Errorf("echoed credential: %v", r)
			}
			if r, _ := step(view, "keychain").Result.V.(map[string]any); r["body"] != "you sent: Bearer [REDACTED]" {
				t.Errorf("echoed keychain credential: %v", r)
			}
			if r, _ := step(view, "templated").Result.V.(map[string]any); r["seen"] != "[REDACTED]/[REDACTED]" {
				t.Errorf("templated secrets: %v", r)
			}

			served := map[string][]byte{"execution view": rawGET(t, fmt.Sprintf("%s/api/executions/%d", srv.URL, id), apiToken),
				"replay": rawGET(t, fmt.Sprintf("%s/api/executions/%d/replay?verify=true", srv.URL, id), apiToken)}
			events := rawGET(t, fmt.Sprintf("%s/api/executions/%d/events?limit=1000", srv.URL, id), apiToken)
			served["events"] = events
			doc, err := jsonx.Decode(events)
			if err != nil {
				t.Fatal(err)
			}
			list, _ := doc.(map[string]any)["events"].([]any)
			commands := 0
			for _, raw := range list {
				if e, _ := raw.(map[string]any); e["event_type"] == "command.issued" {
					commands++
					served[fmt.Sprint("command ", e["event_id"])] = rawGET(t, fmt.Sprintf("%s/api/commands/%s", srv.URL, e["event_id"]), workerToken)
				}
			}
			if commands != 8 {
				t.Fatalf("%d commands issued, want 8", commands)
			}
			served["the keychain's read log"] = rawGET(t, srv.URL+"/api/credentials/kc_echo/reads", apiToken)
			if !bytes.Contains(served["the keychain's read log"], []byte(`"outcome":"served"`)) {
				t.Errorf("the worker's keychain read is not in the log: %s", served["the keychain's read log"])
			}
			served["the keychain's tables"] = clusterRows(t, srv, "credential", "credential_read")
			cli := exec.Command(bin, "replay", fmt.Sprint(id), "--verify", "--json", "--server", srv.URL)
			cli.Env = []string{"NOETL_API_TOKEN=" + apiToken}
			out, err := cli.Output()
			if err != nil {
				t.Fatalf("noetl replay --verify: %v\n%s", err, out)
			}
			rdoc, err := jsonx.DecodeObject(out)
			if v, _ := rdoc["verify"].(map[string]any); err != nil || v["consistent"] != true {
				t.Fatalf("noetl replay --verify: %v\n%s", err, out)
			}
			served["noetl replay --verify"] = out
			_ = syscall.Kill(-w.Process.Pid, syscall.SIGTERM)
			_ = w.Wait()
			served["worker log"] = []byte(workerLog.String())
			served["server log"] = []byte(serverLog.String())
			for what, body := range served {
				for _, secret := range []string{apiToken, workerToken, fileDSNPass, bearerToken, otherPassword, wlPassword, wlAPIKey, kcBearer} {
					if bytes.Contains(body, []byte(secret)) {
						t.Errorf("%s carries %q:\n%s", what, secret, body)
					}
				}
			}
		})
	}
}

// clusterRows is every row of cluster tables as Postgres prints them, bytea
// columns decoded too.
func clusterRows(t *testing.T, srv *devserver.Server, tables ...string) []byte {
	t.Helper()
	var out bytes.Buffer
	ctx := context.Background()
	for _, table := range tables {
		rows, err := srv.Store.Cluster().Query(ctx, `SELECT t::text FROM `+table+` t`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			out.WriteString(line + "\n")
		}
		rows.Close()
	}
	rows, err := srv.Store.Cluster().Query(ctx, `SELECT wrapped_key || nonce || ciphertext FROM credential`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		out.Write(b)
	}
	return out.Bytes()
}

// openDir is a temp dir nobody can use too (t.TempDir's are root's, 0700).
// copyFile copies src to a new file dst with mode perm.
func copyFile(t *testing.T, src, dst string, perm os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func openDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func rawGET(t *testing.T, target, token string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", target, resp.StatusCode, err, body)
	}
	return body
}

// lockedBuffer is a log sink written by several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
